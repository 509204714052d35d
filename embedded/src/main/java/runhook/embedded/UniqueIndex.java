package runhook.embedded;

import de.bwaldvogel.mongo.backend.AbstractUniqueIndex;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.bson.Document;
import java.util.List;
import java.util.Map;

/**
 * A unique index (`_id` included) whose entries are sorted ({@link IndexEntries}), so that the
 * planner can also walk ranges of it (a log stream's `_id` range, say). Uniqueness, sparseness
 * and key extraction are mongo-java-server's own ({@link AbstractUniqueIndex}).
 */
final class UniqueIndex<P> extends AbstractUniqueIndex<P> implements OrderedIndex {
  private final IndexEntries entries;

  UniqueIndex(String name, List<IndexKey> keys, boolean sparse, IndexEntries entries) {
    super(name, keys, sparse);
    this.entries = entries;
  }

  @Override
  public IndexEntries entries() {
    return entries;
  }

  /** Only `_id` is sure to: an empty array at another unique index's field leaves no entry. */
  @Override
  public boolean coversEveryDocument() {
    return getKeys().size() == 1 && getKeys().get(0).getKey().equals("_id");
  }

  @Override
  public boolean multikey() {
    return !coversEveryDocument(); // not tracked; `_id` can never hold an array
  }

  @Override
  public void readEntries(Document document, Object position) {
    getPosition(document); // a sparse index's missing key: a look-up that finds nothing
  }

  @Override
  @SuppressWarnings("unchecked")
  protected P removeDocument(KeyValue keyValue) {
    return (P) entries.remove(keyValue);
  }

  @Override
  protected boolean putKeyPosition(KeyValue keyValue, P position) {
    return entries.putIfAbsent(keyValue, Missing.ofNullable(position));
  }

  @Override
  @SuppressWarnings("unchecked")
  protected Iterable<Map.Entry<KeyValue, P>> getIterable() {
    return (Iterable<Map.Entry<KeyValue, P>>) (Iterable<?>) entries.all();
  }

  @Override
  @SuppressWarnings("unchecked")
  protected P getPosition(KeyValue keyValue) {
    return (P) entries.get(keyValue);
  }

  @Override
  public long getCount() {
    return entries.size();
  }

  @Override
  public boolean isEmpty() {
    return entries.size() == 0;
  }

  @Override
  public long getDataSize() {
    return getCount();
  }
}
