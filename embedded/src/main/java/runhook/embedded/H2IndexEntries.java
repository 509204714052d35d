package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import java.nio.ByteBuffer;
import java.util.AbstractMap;
import java.util.Iterator;
import java.util.Map;
import org.h2.mvstore.Cursor;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.BasicDataType;

/**
 * {@link IndexEntries} of the file backend: an MVStore map (keys in {@link IndexOrder}, stored
 * in {@link ValueType}'s form) in the same store as the collection, so the group
 * commit writes an index change in the same chunk as the document change it belongs to. The
 * multikey flag lives in the collection's meta map.
 */
final class H2IndexEntries implements IndexEntries {
  private final MVMap<KeyValue, Object> map;
  private final MVMap<String, Object> meta;
  private final String multikeyFlag;

  H2IndexEntries(MVStore store, String mapName, MVMap<String, Object> meta, String indexName) {
    this.map = JournaledMap.open(store, mapName);
    this.meta = meta;
    this.multikeyFlag = "multikey." + indexName;
  }

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

  @Override
  public Iterator<Map.Entry<KeyValue, Object>> range(KeyValue low, KeyValue high, boolean descending) {
    Cursor<KeyValue, Object> cursor = descending ? map.cursor(high, low, true) : map.cursor(low, high, false);
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        return cursor.hasNext();
      }

      @Override
      public Map.Entry<KeyValue, Object> next() {
        KeyValue key = cursor.next();
        return new AbstractMap.SimpleImmutableEntry<>(key, cursor.getValue());
      }
    };
  }

  /** Exact, from the B-tree's counts: the insertion points of the two bounds. */
  @Override
  public long count(KeyValue low, KeyValue high, long cap) {
    return countExactly(low, high, cap);
  }

  @Override
  public long countExactly(KeyValue low, KeyValue high, long cap) {
    long from = -map.getKeyIndex(low) - 1;
    long to = -map.getKeyIndex(high) - 1;
    return Math.min(cap, Math.max(0, to - from));
  }

  @Override
  public Iterable<Map.Entry<KeyValue, Object>> all() {
    return map.entrySet();
  }

  @Override
  public long size() {
    return map.sizeAsLong();
  }

  @Override
  public boolean multikey() {
    return Boolean.TRUE.equals(meta.get(multikeyFlag));
  }

  @Override
  public void markMultikey() {
    if (!multikey()) meta.put(multikeyFlag, Boolean.TRUE);
  }

  /**
   * Index keys: compared in {@link IndexOrder}; a page's keys are written each as the number of
   * leading values it shares with the key before it, then the others as {@link ValueType}
   * writes them. Neighbouring keys mostly share their first values (an environment, a state, a
   * collection), which were most of what a commit wrote: every commit rewrites each changed
   * page and the path to its map's root, and an internal page holds whole keys too. Pages
   * written before hold each key whole (they begin with ValueType's tag of a KeyValue, never
   * with {@link #SHARED_PREFIXES}) and are read as they are.
   */
  static final class KeyType extends BasicDataType<KeyValue> {
    static final KeyType INSTANCE = new KeyType();
    private static final byte SHARED_PREFIXES = -1;

    @Override
    public void write(WriteBuffer buff, Object storage, int len) {
      if (len == 0) return; // as a page of whole keys: nothing, so that both read alike
      KeyValue[] keys = cast(storage);
      buff.put(SHARED_PREFIXES);
      KeyValue previous = null;
      for (int i = 0; i < len; i++) {
        KeyValue key = keys[i];
        int shared = previous == null ? 0 : sharedValues(previous, key);
        buff.putVarInt(key.size()).putVarInt(shared);
        for (int j = shared; j < key.size(); j++) ValueType.INSTANCE.write(buff, key.get(j));
        previous = key;
      }
    }

    @Override
    public void read(ByteBuffer buff, Object storage, int len) {
      if (len == 0) return;
      if (buff.get(buff.position()) != SHARED_PREFIXES) {
        super.read(buff, storage, len);
        return;
      }
      buff.get();
      KeyValue[] keys = cast(storage);
      KeyValue previous = null;
      for (int i = 0; i < len; i++) {
        int size = DataUtils.readVarInt(buff);
        int shared = DataUtils.readVarInt(buff);
        if (shared > size || shared > 0 && (previous == null || shared > previous.size())) {
          throw new IllegalStateException("index page: a key of " + size + " values shares " + shared);
        }
        Object[] values = new Object[size];
        for (int j = 0; j < shared; j++) values[j] = previous.get(j);
        for (int j = shared; j < size; j++) values[j] = ValueType.INSTANCE.read(buff);
        keys[i] = previous = new KeyValue(values);
      }
    }

    /** How many leading values of `b` are those of `a`, exactly (same class: an Integer never stands for a Long). */
    private static int sharedValues(KeyValue a, KeyValue b) {
      int n = Math.min(a.size(), b.size());
      int i = 0;
      while (i < n && sameValue(a.get(i), b.get(i))) i++;
      return i;
    }

    private static boolean sameValue(Object x, Object y) {
      if (x == y) return true;
      if (x == null || y == null || x.getClass() != y.getClass()) return false;
      if (x instanceof String) return x.equals(y); // most values: no need for the type-ordered compare
      return ValueType.INSTANCE.compare(x, y) == 0;
    }

    @Override
    public KeyValue[] createStorage(int size) {
      return new KeyValue[size];
    }

    @Override
    public int compare(KeyValue a, KeyValue b) {
      return IndexOrder.INSTANCE.compare(a, b);
    }

    @Override
    public int getMemory(KeyValue key) {
      return ValueType.INSTANCE.getMemory(key);
    }

    @Override
    public void write(WriteBuffer buff, KeyValue key) {
      ValueType.INSTANCE.write(buff, key);
    }

    @Override
    public KeyValue read(ByteBuffer buff) {
      return (KeyValue) ValueType.INSTANCE.read(buff);
    }
  }
}
