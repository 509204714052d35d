package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import java.util.Iterator;
import java.util.Map;

/**
 * The sorted entries of one index (key → position), in {@link IndexOrder}: a skip list on the
 * memory backend ({@link MemoryIndexEntries}), an MVStore map written in the same commit as
 * the documents on the file backend ({@link H2IndexEntries}).
 */
interface IndexEntries {
  Object get(KeyValue key);

  /** Stores the entry; false if the key was there already (nothing changed). */
  boolean putIfAbsent(KeyValue key, Object position);

  /** Removes the entry; its position, or null if there was none. */
  Object remove(KeyValue key);

  /** The entries from {@code low} to {@code high} (bounds, never equal to a key), ascending or descending. */
  Iterator<Map.Entry<KeyValue, Object>> range(KeyValue low, KeyValue high, boolean descending);

  /** About how many entries lie between two bounds, counting no further than {@code cap}. */
  long count(KeyValue low, KeyValue high, long cap);

  /** Exactly how many entries lie between two bounds, or {@code cap} if at least that many. */
  long countExactly(KeyValue low, KeyValue high, long cap);

  Iterable<Map.Entry<KeyValue, Object>> all();

  long size();

  /** Whether some document had an array at an indexed field (persisted where the entries are). */
  boolean multikey();

  void markMultikey();
}
