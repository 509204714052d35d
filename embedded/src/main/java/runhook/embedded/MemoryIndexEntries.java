package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import java.util.Collections;
import java.util.Iterator;
import java.util.Map;
import java.util.NavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;

/** {@link IndexEntries} of the memory backend: a skip list in {@link IndexOrder}. */
final class MemoryIndexEntries implements IndexEntries {
  private final ConcurrentSkipListMap<KeyValue, Object> map = new ConcurrentSkipListMap<>(IndexOrder.INSTANCE);
  private volatile boolean multikey;

  @Override
  public Object get(KeyValue key) {
    return map.get(key);
  }

  @Override
  public boolean putIfAbsent(KeyValue key, Object position) {
    return map.putIfAbsent(key, position) == null;
  }

  @Override
  public Object remove(KeyValue key) {
    return map.remove(key);
  }

  /** The entries from low to high; none when low is above high (a range such as {$gte: b, $lt: a}, which MongoDB answers with nothing). */
  private NavigableMap<KeyValue, Object> between(KeyValue low, KeyValue high) {
    return IndexOrder.INSTANCE.compare(low, high) > 0 ? Collections.emptyNavigableMap() : map.subMap(low, true, high, true);
  }

  @Override
  public Iterator<Map.Entry<KeyValue, Object>> range(KeyValue low, KeyValue high, boolean descending) {
    NavigableMap<KeyValue, Object> sub = between(low, high);
    return (descending ? sub.descendingMap() : sub).entrySet().iterator();
  }

  /** Counting walks the entries: beyond this many, the planner learns only that there are many. */
  private static final long COUNT_LIMIT = 2048;

  @Override
  public long count(KeyValue low, KeyValue high, long cap) {
    return countExactly(low, high, Math.min(cap, COUNT_LIMIT));
  }

  @Override
  public long countExactly(KeyValue low, KeyValue high, long cap) {
    long n = 0;
    for (Iterator<?> it = between(low, high).keySet().iterator(); it.hasNext() && n < cap; it.next()) n++;
    return n;
  }

  @Override
  public Iterable<Map.Entry<KeyValue, Object>> all() {
    return map.entrySet();
  }

  @Override
  public long size() {
    return map.size();
  }

  @Override
  public boolean multikey() {
    return multikey;
  }

  @Override
  public void markMultikey() {
    multikey = true;
  }
}
