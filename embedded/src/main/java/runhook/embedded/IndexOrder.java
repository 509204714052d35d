package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.bson.BinData;
import de.bwaldvogel.mongo.bson.BsonRegularExpression;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.LegacyUUID;
import de.bwaldvogel.mongo.bson.MaxKey;
import de.bwaldvogel.mongo.bson.MinKey;
import de.bwaldvogel.mongo.bson.ObjectId;
import java.time.Instant;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;

/**
 * The order of index keys: MongoDB's comparison order (BSON type brackets, numbers by value
 * across their types), element by element over an index's {@link KeyValue}s, so that an index
 * walked in this order yields documents in the order a sort on its fields asks for.
 *
 * <p>Range scans are bounded by {@link Bound}s: a bound is below (or above) every value of one
 * type bracket and of the brackets before it, and is never equal to a stored key, so a scan
 * from a lower to an upper bound is inclusive of everything between and needs no flags.
 */
final class IndexOrder implements Comparator<Object> {
  static final IndexOrder INSTANCE = new IndexOrder();

  private IndexOrder() {}

  /** Below or above every value of bracket {@code rank} (and of lower brackets, or higher ones). */
  record Bound(int rank, boolean above) {}

  /** Below every key; above every key. */
  static final Bound MIN = new Bound(Integer.MIN_VALUE, false);
  static final Bound MAX = new Bound(Integer.MAX_VALUE, true);

  /**
   * The values a key field holds: numbers normalized as the unique indexes store them (a Long
   * that a double holds exactly, and every other number, as a Double; -0 as 0), missing as null.
   * Scalars are done here; documents and arrays as KeyValue does (its stream allocates, and
   * every index key of every write comes here).
   */
  static Object normalize(Object value) {
    if (value == null || value instanceof Missing) return null;
    if (value instanceof String || value instanceof Instant || value instanceof Boolean) return value;
    if (value instanceof Long l && l != (long) l.doubleValue()) return value;
    if (value instanceof Number n) {
      double d = n.doubleValue();
      return d == 0.0 ? Double.valueOf(0.0) : Double.valueOf(d);
    }
    return new KeyValue(Collections.singletonList(value)).normalized().get(0);
  }

  /** MongoDB's type brackets in comparison order (see ValueComparator's SORT_PRIORITY), null and missing in one. */
  static int rank(Object v) {
    if (v instanceof Bound b) throw new IllegalArgumentException("a bound has no rank of its own: " + b);
    if (v instanceof MinKey) return 0;
    if (v == null || v instanceof Missing) return 1;
    if (v instanceof Number) return 2;
    if (v instanceof String) return 3;
    if (v instanceof Document) return 4;
    if (v instanceof List<?>) return 5;
    if (v instanceof BinData) return 6;
    if (v instanceof LegacyUUID) return 7;
    if (v instanceof UUID) return 8;
    if (v instanceof ObjectId) return 9;
    if (v instanceof Boolean) return 10;
    if (v instanceof Instant) return 11;
    if (v instanceof BsonTimestamp) return 12;
    if (v instanceof BsonRegularExpression) return 13;
    if (v instanceof MaxKey) return 14;
    return 15;
  }

  @Override
  public int compare(Object a, Object b) {
    if (a == b) return 0;
    if (a instanceof KeyValue x && b instanceof KeyValue y) {
      int n = Math.min(x.size(), y.size());
      for (int i = 0; i < n; i++) {
        int c = compare(x.get(i), y.get(i));
        if (c != 0) return c;
      }
      // A bound longer than the key it meets is below or above every key with that prefix.
      if (x.size() > n) return x.get(n) instanceof Bound bound && !bound.above() ? -1 : 1;
      if (y.size() > n) return y.get(n) instanceof Bound bound && !bound.above() ? 1 : -1;
      return 0;
    }
    if (a instanceof Bound x) return b instanceof Bound y ? compareBounds(x, y) : -compareToBound(b, x);
    if (b instanceof Bound y) return compareToBound(a, y);
    return ValueComparator.ascWithoutListHandling().compare(a, b);
  }

  private static int compareToBound(Object value, Bound bound) {
    int r = rank(value);
    if (r != bound.rank()) return r < bound.rank() ? -1 : 1;
    return bound.above() ? -1 : 1;
  }

  private static int compareBounds(Bound x, Bound y) {
    if (x.rank() != y.rank()) return Integer.compare(x.rank(), y.rank());
    return Boolean.compare(x.above(), y.above());
  }
}
