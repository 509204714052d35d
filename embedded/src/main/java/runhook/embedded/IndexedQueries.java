package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.DefaultQueryMatcher;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.bson.Document;
import java.util.Iterator;
import java.util.List;
import java.util.function.Function;

/**
 * How a collection answers a query through its indexes: the {@link QueryPlanner}'s plan is
 * walked lazily, interval by interval, and each position fetched, so that a sort the index
 * order serves is not sorted again and a limit stops the walk. Without a plan the collection
 * scans, unless the {@link ScanGuard} refuses. What a query did is recorded for {@code explain}.
 */
final class IndexedQueries {
  private IndexedQueries() {}

  /** What one query did: the index (null: a scan), and how many keys and documents it read. */
  static final class Execution {
    String indexName;
    List<String> keyPattern = List.of();
    boolean descending;
    int intervals;
    long keysExamined;
    long docsExamined;
    boolean scanned;
  }

  private static final ThreadLocal<Execution> RECORDING = new ThreadLocal<>();

  /** Runs {@code query} recording what the queries it makes on this thread do (explain). */
  static <T> T recording(Execution execution, java.util.function.Supplier<T> query) {
    Execution before = RECORDING.get();
    RECORDING.set(execution);
    try {
      return query.get();
    } finally {
      RECORDING.set(before);
    }
  }

  /**
   * The documents to match against a query, in the plan's order, or null when the collection
   * must scan (which the guard may refuse: then this throws).
   */
  static <P> IndexWalk<P> candidates(MongoCollection<P> collection, List<Index<P>> indexes, Document query, Document orderBy, int skip,
      int limit, Function<P, Document> fetch) {
    QueryPlanner.Plan plan = QueryPlanner.plan(indexes, query, orderBy, skip, limit);
    Execution recording = RECORDING.get();
    if (plan == null) {
      boolean uniqueLookup = indexes.stream().anyMatch(i -> i.canHandle(query)); // mongo-java-server's own (a regex on a unique field)
      if (recording != null && !uniqueLookup) {
        recording.scanned = true;
        recording.docsExamined = collection.count(); // a scan reads every document
      }
      String database = collection.getDatabaseName();
      if (!uniqueLookup && recording == null && ScanGuard.applies(database, collection.getCollectionName())) {
        throw ScanGuard.refusal(database, collection.getCollectionName(), query, orderBy);
      }
      return null;
    }
    Execution execution = recording != null ? recording : new Execution();
    if (plan.race() != null && raceWins(plan.race(), plan.estimate(), query, skip + limit, fetch, execution)) plan = plan.race();
    execution.indexName = plan.index().getName();
    execution.keyPattern = plan.index().getKeys().stream().map(k -> k.getKey()).toList();
    execution.descending = plan.descending();
    execution.intervals = plan.intervals().size();
    return new IndexWalk<>(plan, fetch, execution);
  }

  /** Whether the walk in the sort's order finds `wanted` matches within `budget` documents. */
  private static <P> boolean raceWins(QueryPlanner.Plan sorted, long budget, Document query, int wanted, Function<P, Document> fetch, Execution execution) {
    Iterator<Document> documents = new IndexWalk<>(sorted, fetch, execution);
    DefaultQueryMatcher matcher = new DefaultQueryMatcher(); // it keeps state of its last match
    int matched = 0;
    for (long read = 0; read <= budget && documents.hasNext(); read++) {
      if (matcher.matches(documents.next(), query) && ++matched >= wanted) return true;
    }
    return !documents.hasNext(); // the whole walk was shorter than the budget
  }

  /**
   * Whether a query is answered batch by batch ({@link StreamingCursor}): a find that asked for
   * batches, in index order, without a projection; the rest is collected at once, as
   * mongo-java-server does.
   */
  static boolean streams(IndexWalk<?> walk, int batchSize, Document fieldSelector) {
    return batchSize > 0 && walk.plan().sortServed() && (fieldSelector == null || fieldSelector.isEmpty()) && RECORDING.get() == null;
  }
}
