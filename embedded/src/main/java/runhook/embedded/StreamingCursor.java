package runhook.embedded;

import de.bwaldvogel.mongo.backend.AbstractCursor;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.DefaultQueryMatcher;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.List;
import org.h2.mvstore.ScanReads;

/**
 * A query in index order answered batch by batch: the first batch now, the next ones as getMore
 * asks for them, each read under the collection's lock and copied there (a read sees a
 * document whole), the index let go of in between. mongo-java-server collects every match
 * before the first batch: an export of a stream of 100,000 entries read and copied them all
 * first, and held them until the last batch was taken.
 */
final class StreamingCursor extends AbstractCursor {
  /** What a getMore without a batch size takes. */
  private static final int DEFAULT_BATCH = 1000;

  private final IndexWalk<?> walk;
  private final Object collection;
  private final Document query;
  private final DefaultQueryMatcher matcher = new DefaultQueryMatcher();
  private int toSkip;
  /** Matches still to return, or -1 for all. */
  private int left;
  private Document ahead;

  private StreamingCursor(long id, IndexWalk<?> walk, Object collection, Document query, int skip, int limit) {
    super(id);
    this.walk = walk;
    this.collection = collection;
    this.query = query;
    this.toSkip = skip;
    this.left = limit > 0 ? limit : -1;
  }

  /** The first batch of a query, with a cursor for the rest when there is more. Called under the collection's lock. */
  static QueryResult firstBatch(IndexWalk<?> walk, Object collection, CursorRegistry registry, Document query, int skip, int limit, int batchSize) {
    StreamingCursor cursor = new StreamingCursor(registry.generateCursorId(), walk, collection, query, skip, limit);
    List<Document> first = cursor.take(batchSize);
    if (cursor.exhausted()) return new QueryResult(first);
    registry.add(cursor);
    return new QueryResult(first, cursor);
  }

  /** The next match, or null. */
  private Document nextMatch() {
    if (ahead != null) {
      Document d = ahead;
      ahead = null;
      return d;
    }
    while (left != 0 && walk.hasNext()) {
      Document d = walk.next();
      if (!matcher.matches(d, query)) continue;
      if (toSkip > 0) {
        toSkip--;
        continue;
      }
      if (left > 0) left--;
      return d;
    }
    return null;
  }

  private boolean exhausted() {
    if (ahead == null) ahead = nextMatch();
    walk.pause();
    return ahead == null;
  }

  private List<Document> take(int n) {
    List<Document> out = new ArrayList<>();
    for (Document d; out.size() < n && (d = nextMatch()) != null; ) out.add(d.cloneDeeply());
    walk.pause();
    return out;
  }

  @Override
  public boolean isEmpty() {
    synchronized (collection) {
      return exhausted();
    }
  }

  /** A later batch: the leaves it reads from the file pass by the page cache ({@link ScanReads}). */
  @Override
  public List<Document> takeDocuments(int numberToReturn) {
    synchronized (collection) {
      return ScanReads.during(() -> take(numberToReturn > 0 ? numberToReturn : DEFAULT_BATCH));
    }
  }
}
