package runhook.embedded;

import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import io.netty.channel.Channel;
import java.util.List;

/**
 * MemoryBackend whose collections read whole documents ({@link WholeReads}) and keep every
 * index sorted ({@link UniqueIndex}, {@link SecondaryIndex} on {@link MemoryIndexEntries}),
 * answering queries through them ({@link IndexedQueries}, {@link QueryCommands}).
 */
final class IndexedMemoryBackend extends MemoryBackend {
  @Override
  public Document handleCommand(Channel channel, String databaseName, String command, Document query) {
    Document parameter = ServerParameters.handle(command, query);
    if (parameter != null) return parameter;
    MemoryGuard.check(command, query);
    return WholeReads.handle(command, () -> super.handleCommand(channel, databaseName, command, query));
  }

  @Override
  public MemoryDatabase openOrCreateDatabase(String databaseName) {
    return new MemoryDatabase(databaseName, getCursorRegistry()) {
      @Override
      public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver resolver, Oplog oplog) {
        Document answer = QueryCommands.handle(this, command, query, resolver, oplog);
        return answer != null ? answer : super.handleCommand(channel, command, query, resolver, oplog);
      }

      @Override
      protected Index<Integer> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
        return new UniqueIndex<>(indexName, keys, sparse, new MemoryIndexEntries());
      }

      @Override
      protected Index<Integer> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
        return new SecondaryIndex<>(indexName, keys, sparse, new MemoryIndexEntries());
      }

      @Override
      protected MemoryCollection openOrCreateCollection(String collectionName, CollectionOptions options) {
        return new MemoryCollection(this, collectionName, options, cursorRegistry) {
          @Override
          protected QueryResult queryDocuments(Document query, Document orderBy, int skip, int limit, int batchSize, Document fieldSelector) {
            IndexWalk<Integer> walk = IndexedQueries.candidates(this, getIndexes(), query, orderBy, skip, limit, this::getDocument);
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

          @Override
          public synchronized void removeDocument(Document document) {
            SecondaryIndex.removing(getIndexes(), document, () -> super.removeDocument(document));
          }
        };
      }
    };
  }
}
