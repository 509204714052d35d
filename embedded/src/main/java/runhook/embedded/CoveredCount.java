package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.AbstractMongoCollection;
import de.bwaldvogel.mongo.bson.Document;
import java.util.List;

/**
 * A count answered from an index's entries alone, as MongoDB answers a count its index covers:
 * the aggregation countDocuments sends ({@code $match}, then an optional {@code $skip} and
 * {@code $limit}, then {@code $group} of a constant `_id` summing 1), when the match's index
 * plan holds exactly its matches ({@link QueryPlanner#answersExactly}). No document is read,
 * and the count of the file backend's B-tree is a look-up of two positions, so counting a
 * project's 10,000 queued runs no longer reads 10,000 documents while writes to the
 * collection wait.
 */
final class CoveredCount {
  private CoveredCount() {}

  /** What one covered count did (for explain): the plan it counted in and how many entries it counted. */
  record Counted(QueryPlanner.Plan plan, long entries, List<Document> result) {}

  /** The pipeline's answer, or null when it is not a count that an index covers. */
  static Counted answer(MongoCollection<?> collection, List<Document> pipeline) {
    if (!(collection instanceof AbstractMongoCollection<?> c) || !(pipeline.get(0).get("$match") instanceof Document match)) return null;
    int at = 1;
    long skip = 0;
    long limit = Long.MAX_VALUE;
    if (at < pipeline.size() && pipeline.get(at).size() == 1 && pipeline.get(at).get("$skip") instanceof Number n) {
      skip = wholeNumber(n);
      at++;
    }
    if (at < pipeline.size() && pipeline.get(at).size() == 1 && pipeline.get(at).get("$limit") instanceof Number n) {
      limit = wholeNumber(n);
      at++;
    }
    if (skip < 0 || limit <= 0 || at != pipeline.size() - 1) return null;
    Document group = pipeline.get(at).size() == 1 && pipeline.get(at).get("$group") instanceof Document g ? g : null;
    String countField = group == null ? null : countField(group);
    if (countField == null) return null;
    synchronized (c) { // as the collection's own reads: no write is half done meanwhile
      QueryPlanner.Plan plan = QueryPlanner.plan(c.getIndexes(), match, null, 0, 0);
      if (plan == null || !QueryPlanner.answersExactly(plan, match)) return null;
      long cap = limit == Long.MAX_VALUE ? Long.MAX_VALUE : skip + limit;
      long entries = 0;
      for (QueryPlanner.Interval i : plan.intervals()) {
        entries += plan.index().entries().countExactly(i.low(), i.high(), cap - entries);
        if (entries >= cap) break;
      }
      long n = Math.min(Math.max(0, entries - skip), limit);
      // $sum of 1s is an int while it fits, as MongoDB's; no match: no group at all.
      Object sum = n <= Integer.MAX_VALUE ? (Object) (int) n : (Object) n;
      List<Document> result = n == 0 ? List.of() : List.of(new Document("_id", group.get("_id")).append(countField, sum));
      return new Counted(plan, entries, result);
    }
  }

  /** The field of a group that counts ({@code {_id: <constant>, n: {$sum: 1}}}), or null. */
  private static String countField(Document group) {
    if (group.size() != 2 || !group.containsKey("_id")) return null;
    Object id = group.get("_id");
    boolean constant = id == null || id instanceof Number || id instanceof Boolean || (id instanceof String s && !s.startsWith("$"));
    if (!constant) return null;
    for (String field : group.keySet()) {
      if (field.equals("_id")) continue;
      if (group.get(field) instanceof Document sum && sum.size() == 1 && sum.get("$sum") instanceof Integer one && one == 1) return field;
    }
    return null;
  }

  /** A whole number, or -1 (not a count this class answers). */
  private static long wholeNumber(Number n) {
    double d = n.doubleValue();
    return d == Math.rint(d) && d >= 0 && d <= Long.MAX_VALUE ? n.longValue() : -1;
  }
}
