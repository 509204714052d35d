package runhook.embedded;

import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.bson.Document;
import java.util.List;

/** An index the {@link QueryPlanner} can walk: its fields, and its entries in {@link IndexOrder}. */
interface OrderedIndex {
  String getName();

  List<IndexKey> getKeys();

  IndexEntries entries();

  /** Whether every document has an entry, so that a walk of the whole index sees every document. */
  boolean coversEveryDocument();

  /** Whether a document may have several entries (an array at an indexed field): then the index order is no sort order. */
  boolean multikey();

  /** Reads the entries of a document at a position (and so the pages that hold them), changing nothing. */
  void readEntries(Document document, Object position);
}
