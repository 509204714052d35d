package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import java.nio.ByteBuffer;
import java.util.AbstractMap;
import java.util.Iterator;
import java.util.Map;
import org.h2.mvstore.Cursor;
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
    this.map = store.openMap(mapName, new MVMap.Builder<KeyValue, Object>().keyType(KeyType.INSTANCE).valueType(ValueType.INSTANCE));
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

  /** Index keys: written and read as {@link ValueType} writes them, compared in {@link IndexOrder}. */
  static final class KeyType extends BasicDataType<KeyValue> {
    static final KeyType INSTANCE = new KeyType();

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
