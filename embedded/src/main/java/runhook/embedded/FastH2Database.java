package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.ArrayFilters;
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
import io.netty.channel.Channel;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.h2.mvstore.LeafReads;
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

  private IndexEntries entries(String collectionName, String indexName) {
    String namespace = getFullCollectionNamespace(collectionName);
    return new H2IndexEntries(store(), namespace + "._index_" + indexName, JournaledMap.open(store(), "meta." + namespace), indexName);
  }

  @Override
  protected Index<Object> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
    return new UniqueIndex<>(indexName, keys, sparse, entries(collectionName, indexName));
  }

  @Override
  protected Index<Object> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
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
    String fullName = getFullCollectionNamespace(collectionName);
    MVMap<Object, Document> dataMap = JournaledMap.open(store(), "databases." + fullName);
    MVMap<String, Object> metaMap = JournaledMap.open(store(), "meta." + fullName);
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

    @Override
    protected Object addDocumentInternal(Document document) {
      Long position = nextPosition.getAndIncrement();
      Document previous = documents.putIfAbsent(position, document);
      if (previous != null) throw new IllegalStateException("position " + position + " of " + getFullName() + " is taken");
      return position;
    }

    @Override
    protected QueryResult queryDocuments(Document query, Document orderBy, int skip, int limit, int batchSize, Document fieldSelector) {
      IndexWalk<Object> walk = IndexedQueries.candidates(this, getIndexes(), query, orderBy, skip, limit, new LeafReads<>(documents)::get);
      if (walk == null) return super.queryDocuments(query, orderBy, skip, limit, batchSize, fieldSelector);
      if (IndexedQueries.streams(walk, batchSize, fieldSelector)) return StreamingCursor.firstBatch(walk, this, cursorRegistry, query, skip, limit, batchSize);
      return matchDocumentsFromStream(query, walk.stream(), skip, limit, batchSize, walk.plan().sortServed() ? null : deriveComparator(orderBy), fieldSelector);
    }

    /**
     * Whether this thread runs an update: the documents it matches are handed to it as copies,
     * which it changes and stores in place of the originals. mongo-java-server changes the
     * stored document itself, field by field, and a checkpoint serializes the stored documents
     * while writes go on ({@link GroupCommit}): a stored document is never changed.
     */
    private static final ThreadLocal<Boolean> UPDATING = ThreadLocal.withInitial(() -> false);

    @Override
    protected QueryResult createQueryResult(List<Document> matched, int batchSize) {
      if (UPDATING.get()) {
        List<Document> copies = new ArrayList<>(matched.size());
        for (Document d : matched) copies.add(d.clone()); // updates put new values, never change one in place
        return super.createQueryResult(copies, batchSize);
      }
      return super.createQueryResult(WholeReads.copies(matched), batchSize);
    }

    @Override
    public Document updateDocuments(Document selector, Document update, ArrayFilters arrayFilters, boolean multi, boolean upsert, Oplog oplog) {
      UPDATING.set(true);
      try {
        return super.updateDocuments(selector, update, arrayFilters, multi, upsert, oplog);
      } finally {
        UPDATING.set(false);
      }
    }

    @Override
    public synchronized Document findAndModify(Document query) {
      UPDATING.set(true);
      try {
        return WholeReads.copyValue(super.findAndModify(query));
      } finally {
        UPDATING.set(false);
      }
    }

    @Override
    public synchronized void removeDocument(Document document) {
      SecondaryIndex.removing(getIndexes(), document, () -> super.removeDocument(document));
    }

    /**
     * Reads the documents that `query` matches (at most `max`; `limit` as the write's, 0 for
     * all) and their index entries, without this collection's lock: MVStore maps are safe to
     * read beside writers, and an update puts a new document in place of the one it read.
     */
    int readAhead(Document query, int limit, int max) {
      List<Index<Object>> indexes = List.copyOf(getIndexes());
      IndexWalk<Object> walk = IndexedQueries.candidates(this, indexes, query, null, 0, limit, new LeafReads<>(documents)::get);
      if (walk == null) return 0; // a scan, or a look-up mongo-java-server's unique index answers
      DefaultQueryMatcher matcher = new DefaultQueryMatcher();
      int read = 0;
      int matched = 0;
      while (walk.hasNext() && read < max && (limit == 0 || matched < limit)) {
        Document document = walk.next();
        read++;
        if (!matcher.matches(document, query)) continue;
        matched++;
        readEntries(indexes, document, walk.position());
      }
      return read;
    }

    private static void readEntries(List<Index<Object>> indexes, Document document, Object position) {
      for (Index<Object> index : indexes) {
        if (index instanceof OrderedIndex ordered) ordered.readEntries(document, position);
      }
    }
  }
}
