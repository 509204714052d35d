package runhook.embedded;

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.BasicDataType;
import org.h2.mvstore.type.ObjectDataType;

/**
 * Keys and values of the collection and index maps: documents, _id values, index
 * KeyValues and positions. A compact tagged binary form (exact: Integer stays Integer,
 * Instant keeps its nanoseconds), Java serialization only for rare BSON types, and a
 * comparison that never serializes.
 *
 * <p>The order defined by {@link #compare} is the on-disk order of every B-tree: never
 * change it for an existing format (bump {@link FastH2Backend#FORMAT} instead). Values of
 * different kinds order by kind; within a kind by natural order, containers element by
 * element. compare() == 0 exactly when equals() (documents: same fields in the same order,
 * as BSON and as H2's serialized-bytes comparison had it).
 */
final class ValueType extends BasicDataType<Object> {
  static final ValueType INSTANCE = new ValueType();

  private static final int NULL = 0, MISSING = 1, FALSE = 2, TRUE = 3, INT = 4, LONG = 5, DOUBLE = 6, STRING = 7,
      OBJECT_ID = 8, UUID_ = 9, INSTANT = 10, DOCUMENT = 11, LIST = 12, KEY_VALUE = 13, SERIALIZED = 14;

  private static int kind(Object o) {
    if (o == null) return NULL;
    if (o instanceof String) return STRING;
    if (o instanceof KeyValue) return KEY_VALUE; // every index key
    if (o instanceof Document) return DOCUMENT;
    if (o instanceof Integer) return INT;
    if (o instanceof Long) return LONG;
    if (o instanceof Double) return DOUBLE;
    if (o instanceof Boolean b) return b ? TRUE : FALSE;
    if (o instanceof ObjectId) return OBJECT_ID;
    if (o instanceof Instant) return INSTANT;
    if (o instanceof UUID) return UUID_;
    if (o instanceof Missing) return MISSING;
    if (o instanceof List<?>) return LIST; // read back as an ArrayList
    return SERIALIZED;
  }

  @Override
  public Object[] createStorage(int size) {
    return new Object[size];
  }

  @Override
  public int compare(Object a, Object b) {
    if (a == b) return 0;
    if (a instanceof String x && b instanceof String y) return x.compareTo(y); // most keys
    int ka = kind(a), kb = kind(b);
    if (ka != kb) return Integer.compare(ka, kb);
    switch (ka) {
      case NULL, MISSING, FALSE, TRUE:
        return 0;
      case INT:
        return ((Integer) a).compareTo((Integer) b);
      case LONG:
        return ((Long) a).compareTo((Long) b);
      case DOUBLE:
        return ((Double) a).compareTo((Double) b);
      case STRING:
        return ((String) a).compareTo((String) b);
      case OBJECT_ID:
        return ((ObjectId) a).compareTo((ObjectId) b);
      case UUID_:
        return ((UUID) a).compareTo((UUID) b);
      case INSTANT:
        return ((Instant) a).compareTo((Instant) b);
      case DOCUMENT: {
        Iterator<Map.Entry<String, Object>> ia = ((Document) a).entrySet().iterator();
        Iterator<Map.Entry<String, Object>> ib = ((Document) b).entrySet().iterator();
        while (ia.hasNext() && ib.hasNext()) {
          Map.Entry<String, Object> ea = ia.next(), eb = ib.next();
          int c = ea.getKey().compareTo(eb.getKey());
          if (c == 0) c = compare(ea.getValue(), eb.getValue());
          if (c != 0) return c;
        }
        return Boolean.compare(ia.hasNext(), ib.hasNext());
      }
      case LIST:
        return compareSequences(((List<?>) a).iterator(), ((List<?>) b).iterator());
      case KEY_VALUE: {
        KeyValue x = (KeyValue) a, y = (KeyValue) b;
        int n = Math.min(x.size(), y.size());
        for (int i = 0; i < n; i++) {
          int c = compare(x.get(i), y.get(i));
          if (c != 0) return c;
        }
        return Integer.compare(x.size(), y.size());
      }
      default: {
        int c = a.getClass().getName().compareTo(b.getClass().getName());
        if (c != 0 || a.equals(b)) return c;
        return Arrays.compareUnsigned(ObjectDataType.serialize(a), ObjectDataType.serialize(b));
      }
    }
  }

  private int compareSequences(Iterator<?> ia, Iterator<?> ib) {
    while (ia.hasNext() && ib.hasNext()) {
      int c = compare(ia.next(), ib.next());
      if (c != 0) return c;
    }
    return Boolean.compare(ia.hasNext(), ib.hasNext());
  }

  /** Rough heap size, for H2's page splitting, cache and auto-commit accounting. */
  @Override
  public int getMemory(Object o) {
    switch (kind(o)) {
      case NULL, MISSING, FALSE, TRUE:
        return 8;
      case INT, LONG, DOUBLE:
        return 24;
      case STRING:
        return 48 + ((String) o).length();
      case OBJECT_ID, UUID_, INSTANT:
        return 40;
      case DOCUMENT: {
        int size = 80;
        for (Map.Entry<String, Object> e : ((Document) o).entrySet()) {
          size += 40 + 48 + e.getKey().length() + getMemory(e.getValue());
        }
        return size;
      }
      case LIST: {
        int size = 40;
        for (Object v : (List<?>) o) size += 8 + getMemory(v);
        return size;
      }
      case KEY_VALUE: {
        int size = 56;
        for (Object v : (KeyValue) o) size += 8 + getMemory(v);
        return size;
      }
      default:
        return 256;
    }
  }

  @Override
  public void write(WriteBuffer buff, Object o) {
    int kind = kind(o);
    buff.put((byte) kind);
    switch (kind) {
      case NULL, MISSING, FALSE, TRUE -> {}
      case INT -> buff.putVarInt((Integer) o);
      case LONG -> buff.putLong((Long) o);
      case DOUBLE -> buff.putDouble((Double) o);
      case STRING -> writeString(buff, (String) o);
      case OBJECT_ID -> buff.put(((ObjectId) o).toByteArray());
      case UUID_ -> buff.putLong(((UUID) o).getMostSignificantBits()).putLong(((UUID) o).getLeastSignificantBits());
      case INSTANT -> buff.putLong(((Instant) o).getEpochSecond()).putInt(((Instant) o).getNano());
      case DOCUMENT -> {
        Document d = (Document) o;
        buff.putVarInt(d.size());
        for (Map.Entry<String, Object> e : d.entrySet()) {
          writeString(buff, e.getKey());
          write(buff, e.getValue());
        }
      }
      case LIST -> {
        List<?> list = (List<?>) o;
        buff.putVarInt(list.size());
        for (Object v : list) write(buff, v);
      }
      case KEY_VALUE -> {
        KeyValue kv = (KeyValue) o;
        buff.putVarInt(kv.size());
        for (Object v : kv) write(buff, v);
      }
      default -> {
        byte[] bytes = ObjectDataType.serialize(o);
        buff.putVarInt(bytes.length).put(bytes);
      }
    }
  }

  /**
   * A string as H2 writes one (its length in chars, then each char in one to three bytes).
   * Nearly every stored string is ASCII, one byte a char: those are copied whole, not put a
   * char at a time (the larger part of a commit's serialization time went to that loop).
   */
  @SuppressWarnings("deprecation") // String.getBytes(int, int, byte[], int): each char's low byte, the char itself for ASCII
  static void writeString(WriteBuffer buff, String s) {
    int length = s.length();
    buff.putVarInt(length);
    for (int i = 0; i < length; i++) {
      if (s.charAt(i) >= 0x80) {
        buff.putStringData(s, length);
        return;
      }
    }
    if (length > ASCII_SCRATCH) {
      buff.put(s.getBytes(StandardCharsets.ISO_8859_1));
      return;
    }
    // Copied through a scratch array, not a new one per string: the commits write tens of MB of strings a second.
    byte[] scratch = ASCII.get();
    s.getBytes(0, length, scratch, 0);
    buff.put(scratch, 0, length);
  }

  private static final int ASCII_SCRATCH = 4096;
  private static final ThreadLocal<byte[]> ASCII = ThreadLocal.withInitial(() -> new byte[ASCII_SCRATCH]);

  /** A string written by {@link #writeString}: an ASCII one decoded whole, any other a char at a time as H2 does. */
  static String readString(ByteBuffer buff) {
    int length = DataUtils.readVarInt(buff);
    if (buff.hasArray() && buff.remaining() >= length) {
      byte[] array = buff.array();
      int from = buff.arrayOffset() + buff.position();
      int i = 0;
      while (i < length && array[from + i] >= 0) i++;
      if (i == length) {
        buff.position(buff.position() + length);
        return new String(array, from, length, StandardCharsets.ISO_8859_1);
      }
    }
    return DataUtils.readString(buff, length);
  }

  @Override
  public Object read(ByteBuffer buff) {
    int kind = buff.get();
    switch (kind) {
      case NULL:
        return null;
      case MISSING:
        return Missing.getInstance();
      case FALSE:
        return Boolean.FALSE;
      case TRUE:
        return Boolean.TRUE;
      case INT:
        return DataUtils.readVarInt(buff);
      case LONG:
        return buff.getLong();
      case DOUBLE:
        return buff.getDouble();
      case STRING:
        return readString(buff);
      case OBJECT_ID: {
        byte[] bytes = new byte[12];
        buff.get(bytes);
        return new ObjectId(bytes);
      }
      case UUID_:
        return new UUID(buff.getLong(), buff.getLong());
      case INSTANT:
        return Instant.ofEpochSecond(buff.getLong(), buff.getInt());
      case DOCUMENT: {
        int n = DataUtils.readVarInt(buff);
        Document d = new Document();
        for (int i = 0; i < n; i++) {
          String key = readString(buff);
          d.put(key, read(buff));
        }
        return d;
      }
      case LIST: {
        int n = DataUtils.readVarInt(buff);
        List<Object> list = new ArrayList<>(n);
        for (int i = 0; i < n; i++) list.add(read(buff));
        return list;
      }
      case KEY_VALUE: {
        int n = DataUtils.readVarInt(buff);
        List<Object> values = new ArrayList<>(n);
        for (int i = 0; i < n; i++) values.add(read(buff));
        return new KeyValue(values);
      }
      case SERIALIZED: {
        byte[] bytes = new byte[DataUtils.readVarInt(buff)];
        buff.get(bytes);
        return ObjectDataType.deserialize(bytes);
      }
      default:
        throw new IllegalStateException("unknown value tag " + kind + " in the H2 file");
    }
  }
}
