package runhook.embedded;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.AbstractUniqueIndex;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.EmptyIndex;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.h2.H2Collection;
import de.bwaldvogel.mongo.backend.h2.H2Database;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.MVStoreTool;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.BasicDataType;
import org.h2.mvstore.type.ObjectDataType;

/**
 * runhook's embedded MongoDB-wire server.
 *
 * <pre>java -jar runhook-embedded-mongo.jar --port N [--file path.mv]</pre>
 *
 * Without --file the data lives in memory. Prints "listening PORT" once it accepts
 * connections. It stops (committing and closing the H2 file cleanly) when its standard input
 * ends, so it never outlives the runhook process that started it, even after kill -9 of
 * that process.
 *
 * <p>The file backend is mongo-java-server's H2Backend on an MVStore we open ourselves, with
 * {@link FastH2Database}: its maps use {@link ValueType} instead of H2's default
 * ObjectDataType, which stores every document and index key with Java serialization and,
 * for keys that are not Comparable (every index key is a KeyValue), serializes both sides of
 * each comparison of a B-tree search. See bench/results/2026-11-23-embedded-backends.md.
 *
 * <p>System properties (for benchmarks): {@code runhook.h2=stock} uses the unmodified
 * {@code new H2Backend(file)}; {@code runhook.h2.commitMs} (default 1000) is the MVStore
 * auto-commit delay, the most a kill -9 of this process can lose; {@code
 * runhook.h2.cacheMb} (default 32) its page cache; {@code runhook.h2.retentionMs} overrides
 * H2's 45 s chunk retention; {@code runhook.h2.compactMaxLiveMb} (default 32) see
 * {@link FastH2Backend#close}.
 */
public final class EmbeddedMongo {
  private EmbeddedMongo() {}

  public static void main(String[] args) throws Exception {
    int port = 0;
    String file = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--port" -> port = Integer.parseInt(args[++i]);
        case "--file" -> file = args[++i];
        default -> {
          System.err.println("unknown argument " + args[i]);
          System.exit(2);
        }
      }
    }
    MongoBackend backend;
    if (file == null) {
      backend = new MemoryBackend();
    } else if ("stock".equals(System.getProperty("runhook.h2"))) {
      backend = new H2Backend(file);
    } else {
      backend = FastH2Backend.open(file);
    }
    MongoServer server = new MongoServer(backend);
    server.bind(new InetSocketAddress("127.0.0.1", port));
    InetSocketAddress bound = server.getLocalAddress();
    AtomicBoolean stopped = new AtomicBoolean();
    Runnable stop = () -> {
      if (stopped.compareAndSet(false, true)) {
        // closes the clients, then the backend: the MVStore commits, syncs and closes.
        server.shutdownNow();
      }
    };
    Runtime.getRuntime().addShutdownHook(new Thread(stop)); // SIGTERM, SIGINT
    System.out.println("listening " + bound.getPort());
    System.out.flush();
    InputStream in = System.in;
    byte[] buf = new byte[256];
    while (in.read(buf) >= 0) {
      // runhook never writes here; EOF means it is gone (or wants us to stop).
    }
    int status = 0;
    try {
      stop.run();
    } catch (Throwable t) {
      t.printStackTrace();
      status = 1;
    }
    System.exit(status);
  }

  /** H2Backend on an MVStore opened with runhook's settings and {@link FastH2Database}s. */
  static final class FastH2Backend extends H2Backend {
    /**
     * Marks files written with {@link ValueType}: no other reader can read them. (No
     * database name contains "$", so H2Database.drop, by name prefix, never removes it.)
     */
    private static final String FORMAT_MAP = "$runhook-format";
    private static final String FORMAT = "runhook-h2-1";
    /** Most live data compacted on close: ~0.5 s on a quiet machine, 3 s on a very busy one. */
    private static final long COMPACT_MAX_LIVE_MB = Long.getLong("runhook.h2.compactMaxLiveMb", 32);

    static FastH2Backend open(String fileName) {
      int commitMs = Integer.getInteger("runhook.h2.commitMs", 1000);
      int cacheMb = Integer.getInteger("runhook.h2.cacheMb", 32);
      MVStore store = new MVStore.Builder()
          .fileName(fileName)
          .cacheSize(cacheMb)
          .open();
      try {
        store.setAutoCommitDelay(commitMs);
        String retentionMs = System.getProperty("runhook.h2.retentionMs");
        if (retentionMs != null) store.setRetentionTime(Integer.parseInt(retentionMs));
        MVMap<String, String> format = store.openMap(FORMAT_MAP);
        String found = format.get("format");
        if (found == null) {
          boolean hasData = store.getMapNames().stream().anyMatch(n -> n.startsWith("databases."));
          if (hasData) {
            throw new IllegalStateException(fileName + " was written by another H2 backend (no " + FORMAT + " marker); move it away to start afresh");
          }
          format.put("format", FORMAT);
          store.commit();
        } else if (!FORMAT.equals(found)) {
          throw new IllegalStateException(fileName + " has format " + found + ", this server reads " + FORMAT);
        }
        return new FastH2Backend(store);
      } catch (RuntimeException e) {
        store.closeImmediately();
        throw e;
      }
    }

    private FastH2Backend(MVStore store) {
      super(store);
    }

    @Override
    protected MongoDatabase openOrCreateDatabase(String databaseName) {
      return new FastH2Database(databaseName, getMvStore(), getCursorRegistry());
    }

    /**
     * Commits, syncs and closes the store. Under a stream of random-key writes an MVStore
     * file grows far beyond its live data (every commit rewrites the touched leaf pages as a
     * new chunk, and old chunks are only reused after the retention time), so when the file
     * is mostly garbage and the live data small enough to copy well within the 5 s the
     * launcher grants for stopping, it is then compacted into a fresh file (written beside it
     * and renamed over it: a kill during that loses nothing, the old file was closed and synced).
     */
    @Override
    public void close() {
      MVStore store = getMvStore();
      boolean compact = false;
      try {
        store.commit();
        long size = store.getFileStore().size();
        // the file's used blocks × the live share of their chunks
        long live = size * store.getFillRate() / 100 * store.getFileStore().getChunksFillRate() / 100;
        compact = size > (32L << 20) && live * 2 < size && live < (COMPACT_MAX_LIVE_MB << 20);
      } catch (RuntimeException e) {
        // only an estimate; close normally
      }
      String fileName = store.getFileStore().getFileName();
      store.close(0); // commit, clean-shutdown mark, sync, unlock
      super.close(); // the store is closed already: this only forgets the databases
      if (compact) {
        // What MVStore.close(-1) does, without compressing every page (CPU).
        MVStoreTool.compact(fileName, false);
      }
    }
  }

  /** H2Database whose collection and index maps use {@link ValueType} for keys and values. */
  static final class FastH2Database extends H2Database {
    private static final Field MV_STORE;

    static {
      try {
        MV_STORE = H2Database.class.getDeclaredField("mvStore");
        MV_STORE.setAccessible(true);
      } catch (ReflectiveOperationException e) {
        throw new ExceptionInInitializerError(e);
      }
    }

    FastH2Database(String databaseName, MVStore mvStore, CursorRegistry cursorRegistry) {
      super(databaseName, mvStore, cursorRegistry);
    }

    // H2Database's constructor opens the existing collections (calling the methods below)
    // before a subclass field could be set, so read its own field.
    private MVStore store() {
      try {
        return (MVStore) MV_STORE.get(this);
      } catch (IllegalAccessException e) {
        throw new IllegalStateException(e);
      }
    }

    private static <K, V> MVMap.Builder<K, V> builder() {
      return new MVMap.Builder<K, V>().keyType(ValueType.INSTANCE).valueType(ValueType.INSTANCE);
    }

    @Override
    protected Index<Object> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
      MVMap<KeyValue, Object> map = store().openMap(getFullCollectionNamespace(collectionName) + "._index_" + indexName, builder());
      return new FastUniqueIndex(map, indexName, keys, sparse);
    }

    /**
     * mongo-java-server keeps no secondary (non-unique) indexes: it answers such queries by
     * scanning. Its placeholder reports itself empty, so every open of the database (each
     * start) and every createIndex "filled" it by reading and decoding the whole collection
     * twice, for nothing; this one says it is not empty, which skips that.
     */
    @Override
    protected Index<Object> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
      return new EmptyIndex<>(indexName, keys) {
        @Override
        public boolean isEmpty() {
          return false;
        }
      };
    }

    @Override
    protected MongoCollection<Object> openOrCreateCollection(String collectionName, CollectionOptions options) {
      String fullName = getFullCollectionNamespace(collectionName);
      MVMap<Object, Document> dataMap = store().openMap("databases." + fullName, builder());
      MVMap<String, Object> metaMap = store().openMap("meta." + fullName);
      return new H2Collection(this, collectionName, options, dataMap, metaMap, cursorRegistry);
    }
  }

  /** mongo-java-server's H2UniqueIndex (whose constructor is package-private), unchanged. */
  static final class FastUniqueIndex extends AbstractUniqueIndex<Object> {
    private final MVMap<KeyValue, Object> map;

    FastUniqueIndex(MVMap<KeyValue, Object> map, String name, List<IndexKey> keys, boolean sparse) {
      super(name, keys, sparse);
      this.map = map;
    }

    @Override
    protected Object removeDocument(KeyValue keyValue) {
      return map.remove(keyValue);
    }

    @Override
    protected boolean putKeyPosition(KeyValue keyValue, Object position) {
      return map.putIfAbsent(keyValue, Missing.ofNullable(position)) == null;
    }

    @Override
    protected Iterable<Map.Entry<KeyValue, Object>> getIterable() {
      return map.entrySet();
    }

    @Override
    protected Object getPosition(KeyValue keyValue) {
      return map.get(keyValue);
    }

    @Override
    public long getCount() {
      return map.sizeAsLong();
    }

    @Override
    public boolean isEmpty() {
      return map.isEmpty();
    }

    @Override
    public long getDataSize() {
      return getCount();
    }
  }

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
  static final class ValueType extends BasicDataType<Object> {
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

    private static void writeString(WriteBuffer buff, String s) {
      buff.putVarInt(s.length()).putStringData(s, s.length());
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
          return DataUtils.readString(buff, DataUtils.readVarInt(buff));
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
            String key = DataUtils.readString(buff, DataUtils.readVarInt(buff));
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
}
