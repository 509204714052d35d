package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import de.bwaldvogel.mongo.backend.DefaultQueryMatcher;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.h2.H2Collection;
import de.bwaldvogel.mongo.backend.h2.H2Database;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import de.bwaldvogel.mongo.wire.bson.BsonEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import java.lang.reflect.Field;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;

/** H2Database whose collection and index maps use {@link ValueType} for keys and values. */
final class FastH2Database extends H2Database {
  private static final Field MV_STORE;

  static {
    try {
      MV_STORE = H2Database.class.getDeclaredField("mvStore");
      MV_STORE.setAccessible(true);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** The journal document writes are appended to (null while the backend opens, and when not durable). */
  private final Supplier<Journal> journal;

  FastH2Database(String databaseName, MVStore mvStore, CursorRegistry cursorRegistry, Supplier<Journal> journal) {
    super(databaseName, mvStore, cursorRegistry);
    this.journal = journal;
  }

  /** A change the journal's records do not describe (a collection or an index made): the next commit stores it. */
  private void needCheckpoint() {
    Journal j = journal == null ? null : journal.get(); // null while H2Database's constructor opens the collections
    if (j != null) j.needCheckpoint();
  }

  /** Applies a journal record to this database's collection (opening the store, before any write). */
  void replay(byte type, String collectionName, Object position, Document document) {
    if (!(resolveCollection(collectionName, false) instanceof Collection collection)) {
      throw new IllegalStateException("the journal has a record of " + getFullCollectionNamespace(collectionName) + ", which the store does not hold");
    }
    collection.replay(type, position, document);
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

  private IndexEntries entries(String collectionName, String indexName) {
    String namespace = getFullCollectionNamespace(collectionName);
    return new H2IndexEntries(store(), namespace + "._index_" + indexName, store().openMap("meta." + namespace), indexName);
  }

  @Override
  protected Index<Object> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
    needCheckpoint();
    return new UniqueIndex<>(indexName, keys, sparse, entries(collectionName, indexName));
  }

  @Override
  protected Index<Object> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
    needCheckpoint();
    return new SecondaryIndex<>(indexName, keys, sparse, entries(collectionName, indexName));
  }

  @Override
  public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver resolver, Oplog oplog) {
    Document answer = QueryCommands.handle(this, command, query, resolver, oplog);
    return answer != null ? answer : super.handleCommand(channel, command, query, resolver, oplog);
  }

  /**
   * Reads what `query` matches in `collectionName` ahead of a write ({@link ReadAhead}); returns
   * how many documents it read.
   */
  int readAhead(Object collectionName, Object query, int limit, int max) {
    if (!(collectionName instanceof String name) || !(query instanceof Document q)) return 0;
    return resolveCollection(name, false) instanceof Collection collection ? collection.readAhead(q, limit, max) : 0;
  }

  @Override
  protected MongoCollection<Object> openOrCreateCollection(String collectionName, CollectionOptions options) {
    needCheckpoint();
    String fullName = getFullCollectionNamespace(collectionName);
    MVMap<Object, Document> dataMap = store().openMap("databases." + fullName, builder());
    MVMap<String, Object> metaMap = store().openMap("meta." + fullName);
    return new Collection(collectionName, options, dataMap, metaMap);
  }

  /**
   * H2Collection whose queries use runhook's indexes ({@link IndexedQueries}) and whose
   * documents are stored under a position (a Long) that grows with each insert, as MongoDB's
   * record ids: H2Collection stores each under its `_id`, so that inserts of random ids (UUIDs)
   * each changed a random page of the documents' B-tree, read from the file once the
   * collection outgrew the page cache and rewritten whole by the commit, where now they all go
   * to its last page, and a retention sweep removes neighbours. The `_id` index maps `_id` to
   * the position, as it did before. Documents of a file of format 2 keep their `_id` as their
   * position (a key of another kind than Long, or a Long below the first new position).
   */
  private final class Collection extends H2Collection {
    private final MVMap<Object, Document> documents;
    private final AtomicLong nextPosition;

    Collection(String name, CollectionOptions options, MVMap<Object, Document> dataMap, MVMap<String, Object> metaMap) {
      super(FastH2Database.this, name, options, dataMap, metaMap, FastH2Database.this.cursorRegistry);
      this.documents = dataMap;
      // ValueType orders keys by kind (Long before Double): the largest Long key, if any.
      this.nextPosition = new AtomicLong(dataMap.lowerKey(Double.NEGATIVE_INFINITY) instanceof Long last ? Math.addExact(last, 1) : 1);
    }

    /** Appends the record of a change about to be made (in this collection's lock, as every change is). */
    private void journal(byte type, Object position, Document document) {
      Journal j = journal == null ? null : journal.get();
      if (j != null) j.append(type, getDatabaseName(), getCollectionName(), position, document);
    }

    @Override
    protected Object addDocumentInternal(Document document) {
      Long position = nextPosition.getAndIncrement();
      journal(Journal.INSERT, position, document);
      Document previous = documents.putIfAbsent(position, document);
      if (previous != null) throw new IllegalStateException("position " + position + " of " + getFullName() + " is taken");
      return position;
    }

    @Override
    protected void handleUpdate(Object position, Document oldDocument, Document newDocument) {
      journal(Journal.UPDATE, position, newDocument);
      super.handleUpdate(position, oldDocument, newDocument);
    }

    @Override
    protected void removeDocument(Object position) {
      journal(Journal.REMOVE, position, null);
      super.removeDocument(position);
    }

    /** A journal record's change, as addDocument, an update and removeDocument make it, at the record's position. */
    synchronized void replay(byte type, Object position, Document document) {
      Document old = type == Journal.INSERT ? null : getDocument(position);
      if (type != Journal.INSERT && old == null) throw new IllegalStateException("the journal changes position " + position + " of " + getFullName() + ", which holds nothing");
      switch (type) {
        case Journal.INSERT -> {
          if (position instanceof Long p && p >= nextPosition.get()) nextPosition.set(p + 1);
          if (documents.putIfAbsent(position, document) != null) throw new IllegalStateException("the journal inserts at position " + position + " of " + getFullName() + ", which is taken");
          for (Index<Object> index : getIndexes()) index.add(document, position, this);
          updateDataSize(bsonSize(document));
        }
        case Journal.UPDATE -> {
          for (Index<Object> index : getIndexes()) index.updateInPlace(old, document, position, this);
          updateDataSize(bsonSize(document) - bsonSize(old));
          super.handleUpdate(position, old, document);
        }
        case Journal.REMOVE -> {
          for (Index<Object> index : getIndexes()) index.remove(old);
          updateDataSize(-bsonSize(old));
          super.removeDocument(position);
        }
        default -> throw new IllegalStateException("unknown journal record type " + type);
      }
    }

    /** A document's size as mongo-java-server counts it in a collection's data size (its BSON). */
    private static int bsonSize(Document document) {
      ByteBuf buffer = Unpooled.buffer();
      try {
        BsonEncoder.encodeDocument(document, buffer);
        return buffer.writerIndex();
      } finally {
        buffer.release();
      }
    }

    @Override
    protected QueryResult queryDocuments(Document query, Document orderBy, int skip, int limit, int batchSize, Document fieldSelector) {
      IndexWalk<Object> walk = IndexedQueries.candidates(this, getIndexes(), query, orderBy, skip, limit, this::getDocument);
      if (walk == null) return super.queryDocuments(query, orderBy, skip, limit, batchSize, fieldSelector);
      if (IndexedQueries.streams(walk, batchSize, fieldSelector)) return StreamingCursor.firstBatch(walk, this, cursorRegistry, query, skip, limit, batchSize);
      return matchDocumentsFromStream(query, walk.stream(), skip, limit, batchSize, walk.plan().sortServed() ? null : deriveComparator(orderBy), fieldSelector);
    }

    @Override
    protected QueryResult createQueryResult(List<Document> matched, int batchSize) {
      return super.createQueryResult(WholeReads.copies(matched), batchSize);
    }

    @Override
    public synchronized Document findAndModify(Document query) {
      return WholeReads.copyValue(super.findAndModify(query));
    }

    /**
     * Reads the documents that `query` matches (at most `max`; `limit` as the write's, 0 for
     * all) and their index entries, without this collection's lock: MVStore maps are safe to
     * read beside writers; a document another thread updates meanwhile (in place) may give a
     * wrong key or an exception, which only reads a page for nothing.
     */
    int readAhead(Document query, int limit, int max) {
      List<Index<Object>> indexes = List.copyOf(getIndexes());
      IndexWalk<Object> walk = IndexedQueries.candidates(this, indexes, query, null, 0, limit, this::getDocument);
      if (walk == null) return 0; // a scan, or a look-up mongo-java-server's unique index answers
      DefaultQueryMatcher matcher = new DefaultQueryMatcher();
      int read = 0;
      int matched = 0;
      while (walk.hasNext() && read < max && (limit == 0 || matched < limit)) {
        Document document = walk.next();
        read++;
        if (!matcher.matches(document, query)) continue;
        matched++;
        readEntries(indexes, document);
      }
      return read;
    }

    private static void readEntries(List<Index<Object>> indexes, Document document) {
      for (Index<Object> index : indexes) {
        if (index instanceof OrderedIndex ordered) ordered.readEntries(document);
      }
    }
  }
}
