package runhook.embedded;

import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.bson.BsonRegularExpression;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.MaxKey;
import de.bwaldvogel.mongo.bson.MinKey;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Chooses the index that serves a query, as MongoDB's planner would for the shapes runhook
 * uses: equality (or `$in`) on a prefix of the index's fields and a range on the next one give
 * the intervals to walk; the index order serves the sort when the sort's fields follow the
 * fields the query pins, all in one direction (then a limit stops the walk early). Every
 * candidate document is still matched against the whole query, so an interval only needs to
 * hold every match. Among the indexes that can serve, the one with the fewest entries to walk
 * wins (counted in the index, capped).
 *
 * <p>No plan (null) when no index bounds the query or serves its sort: that query scans.
 */
final class QueryPlanner {
  private QueryPlanner() {}

  /** More combinations of `$in` values than this walk a shorter prefix instead. */
  static final int MAX_INTERVALS = 1000;

  static final long COUNT_CAP = 1_000_000;

  /** Walk from low to high (bounds of {@link IndexOrder}). */
  record Interval(KeyValue low, KeyValue high) {}

  /**
   * A chosen index: its intervals in index order (walked back to front when {@code descending}),
   * whether that order is the sort's, and about how many entries the walk reads.
   */
  record Plan(OrderedIndex index, List<Interval> intervals, boolean descending, boolean sortServed, int boundFields, long estimate, Plan race) {
    /** Whether one document can come out of the walk twice (several intervals, or array entries). */
    boolean mayRepeat() {
      return intervals.size() > 1 || index.multikey();
    }

    /**
     * With a limit, a walk in the sort's order may find its page long before it has read as
     * much as this plan would (a time range at the start of a stream, say): counting cannot
     * tell, so such a walk is tried first, for as many documents as this plan would read
     * ({@link IndexedQueries}), as MongoDB races its candidate plans.
     */
    Plan withRace(Plan sorted) {
      return new Plan(index, intervals, descending, sortServed, boundFields, estimate, sorted);
    }
  }

  /** What a query asks of one field, as far as an index can tell. */
  static final class FieldBounds {
    /** Equal to one of these (normalized, ascending, distinct), or null when not an equality. */
    List<Object> points;
    Object low = IndexOrder.MIN;
    boolean lowInclusive = true;
    Object high = IndexOrder.MAX;
    boolean highInclusive = true;
    /** The type bracket of the range, or -1 for none. */
    int rangeRank = -1;
    /** Whether the bounds say all the query asks of the field. */
    boolean whole = true;

    boolean pinned() {
      return points != null && points.size() == 1;
    }

    boolean hasRange() {
      return rangeRank >= 0;
    }

    void equal(Object value) {
      if (!indexable(value)) {
        whole = false;
      } else if (points == null) {
        points = Collections.singletonList(IndexOrder.normalize(value));
      } else {
        whole = false; // a second equality: the first bounds the walk, the match does the rest
      }
    }

    void in(Object values) {
      if (!(values instanceof Collection<?> c) || points != null || !c.stream().allMatch(QueryPlanner::indexable)) {
        whole = false;
        return;
      }
      TreeSet<Object> sorted = new TreeSet<>(IndexOrder.INSTANCE);
      for (Object v : c) sorted.add(IndexOrder.normalize(v));
      points = new ArrayList<>(sorted);
    }

    void range(String op, Object value) {
      if (!indexable(value) || value == null || value instanceof Missing || value instanceof MinKey || value instanceof MaxKey) {
        whole = false;
        return;
      }
      Object v = IndexOrder.normalize(value);
      int rank = IndexOrder.rank(v);
      if (rangeRank >= 0 && rank != rangeRank) {
        whole = false; // nothing matches both; the match says so
        return;
      }
      rangeRank = rank;
      boolean lower = op.equals("$gt") || op.equals("$gte");
      boolean inclusive = op.equals("$gte") || op.equals("$lte");
      if (lower) {
        int c = low instanceof IndexOrder.Bound ? 1 : IndexOrder.INSTANCE.compare(v, low);
        if (c > 0 || (c == 0 && !inclusive)) {
          low = v;
          lowInclusive = inclusive;
        }
      } else {
        int c = high instanceof IndexOrder.Bound ? -1 : IndexOrder.INSTANCE.compare(v, high);
        if (c < 0 || (c == 0 && !inclusive)) {
          high = v;
          highInclusive = inclusive;
        }
      }
    }
  }

  /** Values an interval can be built on: not arrays (which match by element) and not patterns. */
  private static boolean indexable(Object v) {
    return !(v instanceof Collection<?>) && !(v instanceof BsonRegularExpression) && !(v instanceof Pattern)
        && !(v instanceof Document d && BsonRegularExpression.isRegularExpression(d));
  }

  /** What the query asks of each field, top-level and within `$and`; the rest is left to the match. */
  static Map<String, FieldBounds> bounds(Document query, boolean[] whole) {
    Map<String, FieldBounds> out = new LinkedHashMap<>();
    collect(query, out, whole);
    return out;
  }

  private static void collect(Document query, Map<String, FieldBounds> out, boolean[] whole) {
    for (Map.Entry<String, Object> e : query.entrySet()) {
      String field = e.getKey();
      Object value = e.getValue();
      if (field.equals("$and") && value instanceof List<?> clauses) {
        for (Object clause : clauses) {
          if (clause instanceof Document d) collect(d, out, whole);
          else whole[0] = false;
        }
        continue;
      }
      if (field.startsWith("$")) {
        whole[0] = false; // $or, $nor, $expr, $comment…: left to the match
        continue;
      }
      FieldBounds b = out.computeIfAbsent(field, f -> new FieldBounds());
      if (value instanceof Document d && !d.isEmpty() && d.keySet().stream().allMatch(k -> k.startsWith("$"))) {
        for (Map.Entry<String, Object> op : d.entrySet()) {
          switch (op.getKey()) {
            case "$eq" -> b.equal(op.getValue());
            case "$in" -> b.in(op.getValue());
            case "$gt", "$gte", "$lt", "$lte" -> b.range(op.getKey(), op.getValue());
            default -> b.whole = false;
          }
        }
      } else {
        b.equal(value);
      }
    }
  }

  /** The best plan for a query on these indexes, or null when none bounds it or serves its sort. */
  static Plan plan(List<? extends Index<?>> indexes, Document query, Document orderBy, int skip, int limit) {
    boolean[] whole = {true};
    Map<String, FieldBounds> bounds = bounds(query, whole);
    List<String> sortFields = new ArrayList<>();
    List<Integer> sortDirections = new ArrayList<>();
    if (orderBy != null) {
      for (Map.Entry<String, Object> e : orderBy.entrySet()) {
        if (e.getKey().startsWith("$") || !(e.getValue() instanceof Number n)) return null; // $natural, $meta: a scan
        sortFields.add(e.getKey());
        sortDirections.add(n.doubleValue() < 0 ? -1 : 1);
      }
    }
    Plan single = singleEntry(indexes, bounds, sortFields, sortDirections);
    if (single != null) return single;
    boolean exact = whole[0] && bounds.values().stream().allMatch(b -> b.whole);
    Plan best = null;
    long bestCost = Long.MAX_VALUE;
    Plan bestSorted = null;
    long bestSortedCost = Long.MAX_VALUE;
    List<Candidate> candidates = new ArrayList<>();
    for (Index<?> index : indexes) {
      if (!(index instanceof OrderedIndex ordered)) continue;
      Candidate c = candidate(ordered, bounds, sortFields, sortDirections);
      if (c != null) candidates.add(c);
    }
    if (candidates.size() == 1) { // nothing to choose between: not counted (the estimate only serves a race between two)
      Candidate c = candidates.get(0);
      return new Plan(c.index, c.intervals, c.direction < 0, c.direction != 0, c.boundFields, 0, null);
    }
    for (Candidate c : candidates) {
      OrderedIndex ordered = c.index;
      long cap = Math.min(COUNT_CAP, bestCost == Long.MAX_VALUE ? COUNT_CAP : bestCost + 1);
      long estimate = 0;
      for (Interval i : c.intervals) {
        estimate += ordered.entries().count(i.low(), i.high(), cap - estimate);
        if (estimate >= cap) break;
      }
      boolean coversQuery = exact && c.consumes(bounds);
      long cost = estimate;
      if (c.direction != 0 && limit > 0 && coversQuery) cost = Math.min(cost, (long) skip + limit);
      if (c.direction == 0) cost += cost / 8 + 1; // the matches must be sorted too
      Plan plan = new Plan(ordered, c.intervals, c.direction < 0, c.direction != 0, c.boundFields, estimate, null);
      if (best == null || cost < bestCost || (cost == bestCost && c.better(best))) {
        best = plan;
        bestCost = cost;
      }
      if (c.direction != 0 && !sortFields.isEmpty() && cost < bestSortedCost) {
        bestSorted = plan;
        bestSortedCost = cost;
      }
    }
    if (best != null && !best.sortServed() && bestSorted != null && limit > 0) return best.withRace(bestSorted);
    return best;
  }

  /**
   * A unique index whose every field the query pins to one value: it holds one entry at most
   * for the query, so no plan reads less and none is counted (MongoDB's IDHACK for `_id`, here
   * for any unique index that has an entry for every document). Counting the others was most of
   * the planning of a run's update by `_id`, each index on `state` counted twice: a descent of
   * each B-tree, from the file at a million runs.
   */
  private static Plan singleEntry(List<? extends Index<?>> indexes, Map<String, FieldBounds> bounds, List<String> sortFields, List<Integer> sortDirections) {
    for (Index<?> index : indexes) {
      if (!(index instanceof UniqueIndex<?> unique) || !unique.coversEveryDocument() || unique.multikey()) continue;
      boolean pinned = true;
      for (IndexKey key : unique.getKeys()) {
        FieldBounds b = bounds.get(key.getKey());
        if (b == null || !b.pinned()) pinned = false;
      }
      if (!pinned) continue;
      Candidate c = candidate(unique, bounds, sortFields, sortDirections);
      return new Plan(unique, c.intervals, c.direction < 0, c.direction != 0, c.boundFields, 1, null);
    }
    return null;
  }

  /**
   * Whether a plan's intervals hold exactly the documents the query matches, so that counting
   * the entries in them counts the matches without reading a document: a secondary index where
   * each document has exactly one entry (not sparse, no arrays), and a query made only of
   * equalities or `$in` on the fields the intervals pin and a range on the next one, one kind of
   * condition per field (an equality and a range on the same field are left to the match).
   */
  static boolean answersExactly(Plan plan, Document query) {
    if (!(plan.index() instanceof SecondaryIndex<?>) || plan.race() != null || plan.index().multikey() || !plan.index().coversEveryDocument()) {
      return false;
    }
    boolean[] whole = {true};
    Map<String, FieldBounds> bounds = bounds(query, whole);
    if (!whole[0]) return false;
    List<IndexKey> keys = plan.index().getKeys();
    for (Map.Entry<String, FieldBounds> e : bounds.entrySet()) {
      FieldBounds b = e.getValue();
      if (!b.whole || (b.points != null) == b.hasRange()) return false;
      int at = -1;
      for (int i = 0; i < keys.size(); i++) if (keys.get(i).getKey().equals(e.getKey())) at = i;
      if (at < 0 || at >= plan.boundFields()) return false;
      if (b.hasRange() && at != plan.boundFields() - 1) return false;
    }
    return true;
  }

  /** An index's intervals for a query, and the direction that serves the sort (0: it does not). */
  private record Candidate(OrderedIndex index, List<Interval> intervals, int boundFields, int direction) {
    boolean consumes(Map<String, FieldBounds> bounds) {
      List<IndexKey> keys = index.getKeys();
      for (String field : bounds.keySet()) {
        int at = -1;
        for (int i = 0; i < keys.size(); i++) if (keys.get(i).getKey().equals(field)) at = i;
        if (at < 0 || at >= boundFields) return false;
      }
      return true;
    }

    boolean better(Plan other) {
      if ((direction != 0) != other.sortServed()) return direction != 0;
      if (boundFields != other.boundFields()) return boundFields > other.boundFields();
      return index instanceof UniqueIndex<?> && !(other.index() instanceof UniqueIndex<?>);
    }
  }

  private static Candidate candidate(OrderedIndex index, Map<String, FieldBounds> bounds, List<String> sortFields, List<Integer> sortDirections) {
    List<IndexKey> keys = index.getKeys();
    List<List<Object>> prefix = new ArrayList<>();
    long combinations = 1;
    for (IndexKey key : keys) {
      FieldBounds b = bounds.get(key.getKey());
      if (b == null || b.points == null || combinations * b.points.size() > MAX_INTERVALS) break;
      prefix.add(b.points);
      combinations *= Math.max(1, b.points.size());
    }
    FieldBounds range = prefix.size() < keys.size() ? bounds.get(keys.get(prefix.size()).getKey()) : null;
    if (range != null && !range.hasRange()) range = null;
    int direction = sortDirection(index, bounds, sortFields, sortDirections);
    if (prefix.isEmpty() && range == null) {
      // Only a walk of the whole index, to serve a sort (a limit then stops it).
      if (sortFields.isEmpty() || direction == 0 || !index.coversEveryDocument()) return null;
    }
    List<Interval> intervals = new ArrayList<>();
    intervals(prefix, 0, new ArrayList<>(), range, intervals);
    return new Candidate(index, intervals, prefix.size() + (range != null ? 1 : 0), direction);
  }

  private static void intervals(List<List<Object>> prefix, int i, List<Object> values, FieldBounds range, List<Interval> out) {
    if (i < prefix.size()) {
      for (Object v : prefix.get(i)) {
        values.add(v);
        intervals(prefix, i + 1, values, range, out);
        values.remove(values.size() - 1);
      }
      return;
    }
    List<Object> low = new ArrayList<>(values);
    List<Object> high = new ArrayList<>(values);
    if (range != null) {
      low.add(range.low instanceof IndexOrder.Bound ? new IndexOrder.Bound(range.rangeRank, false) : range.low);
      low.add(range.lowInclusive ? IndexOrder.MIN : IndexOrder.MAX);
      high.add(range.high instanceof IndexOrder.Bound ? new IndexOrder.Bound(range.rangeRank, true) : range.high);
      high.add(range.highInclusive ? IndexOrder.MAX : IndexOrder.MIN);
    } else {
      low.add(IndexOrder.MIN);
      high.add(IndexOrder.MAX);
    }
    out.add(new Interval(new KeyValue(low), new KeyValue(high)));
  }

  /**
   * 1 or -1 when walking the index forward or back yields the sort's order, else 0. Fields the
   * query pins to one value are the same in every match, so they drop out of both the sort
   * and the index's fields; what is left of the sort must then begin the index's fields, all in
   * the index's direction or all against it.
   */
  private static int sortDirection(OrderedIndex index, Map<String, FieldBounds> bounds, List<String> sortFields, List<Integer> sortDirections) {
    List<String> sort = new ArrayList<>();
    List<Integer> directions = new ArrayList<>();
    for (int i = 0; i < sortFields.size(); i++) {
      FieldBounds b = bounds.get(sortFields.get(i));
      if (b != null && b.pinned()) continue;
      sort.add(sortFields.get(i));
      directions.add(sortDirections.get(i));
    }
    if (sort.isEmpty()) return 1;
    if (index.multikey()) return 0;
    List<String> rest = new ArrayList<>();
    for (IndexKey key : index.getKeys()) {
      FieldBounds b = bounds.get(key.getKey());
      if (!(b != null && b.pinned())) rest.add(key.getKey());
    }
    if (sort.size() > rest.size() || !rest.subList(0, sort.size()).equals(sort)) return 0;
    int direction = directions.get(0);
    for (int d : directions) if (d != direction) return 0;
    return direction;
  }
}
