package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.bson.Document;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.function.Function;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

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
  static <P> Stream<Document> candidates(MongoCollection<P> collection, List<Index<P>> indexes, Document query, Document orderBy, int skip,
      int limit, Function<P, Document> fetch, boolean[] sorted) {
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
      sorted[0] = false;
      return null;
    }
    sorted[0] = plan.sortServed();
    Execution execution = recording != null ? recording : new Execution();
    execution.indexName = plan.index().getName();
    execution.keyPattern = plan.index().getKeys().stream().map(k -> k.getKey()).toList();
    execution.descending = plan.descending();
    execution.intervals = plan.intervals().size();
    List<QueryPlanner.Interval> intervals = new ArrayList<>(plan.intervals());
    if (plan.descending()) java.util.Collections.reverse(intervals);
    IndexEntries entries = plan.index().entries();
    Stream<Object> positions = intervals.stream().flatMap(i -> {
      Iterator<Map.Entry<KeyValue, Object>> walk = entries.range(i.low(), i.high(), plan.descending());
      return StreamSupport.stream(Spliterators.spliteratorUnknownSize(walk, Spliterator.ORDERED), false).map(e -> {
        execution.keysExamined++;
        return e.getValue();
      });
    });
    if (plan.mayRepeat()) {
      Set<Object> seen = new HashSet<>();
      positions = positions.filter(seen::add);
    }
    @SuppressWarnings("unchecked")
    Stream<Document> documents = positions.map(p -> {
      execution.docsExamined++;
      return fetch.apply((P) p);
    });
    return documents;
  }
}
