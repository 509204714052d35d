package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Indexes;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.bson.Document;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Files of former formats get their indexes built again at their first open, and then answer
 * indexed queries with every document: one written before secondary indexes were kept (format
 * runhook-h2-1: unique index maps in another order, no secondary index maps), one whose
 * documents are stored under their `_id` (runhook-h2-2), which they keep beside the documents
 * stored under positions since, and one whose non-unique keys end with the `_id` instead of the
 * position (runhook-h2-3).
 */
class FileFormatTest {
  private static <T> T withServer(String file, java.util.function.Function<MongoCollection<Document>, T> use) {
    MongoServer server = new MongoServer(FastH2Backend.open(file));
    server.bind(new InetSocketAddress("127.0.0.1", 0));
    try (MongoClient client = MongoClients.create("mongodb://127.0.0.1:" + server.getLocalAddress().getPort())) {
      return use.apply(client.getDatabase("t").getCollection("runs"));
    } finally {
      server.shutdownNow();
    }
  }

  @TempDir Path dir;

  /** A file in the test's temporary directory. */
  private String newFile() {
    return dir.resolve("db.mv").toString();
  }

  @Test
  void aFileOfTheFormerFormatGetsItsIndexesBuiltAtItsFirstOpen() throws Exception {
    String file = newFile();
    withServer(file, runs -> {
      runs.createIndex(Indexes.ascending("state", "createdAt"));
      List<Document> docs = new ArrayList<>();
      for (int i = 0; i < 500; i++) docs.add(new Document("_id", "r" + i).append("state", i % 2 == 0 ? "QUEUED" : "DONE").append("createdAt", i));
      runs.insertMany(docs);
      return null;
    });
    // What a file of format 1 holds: the documents and the index declarations, no index entries this server can read.
    MVStore store = new MVStore.Builder().fileName(file).open();
    for (String name : store.getMapNames()) if (name.contains("._index_")) store.removeMap(name);
    MVMap<String, String> format = store.openMap("$runhook-format");
    format.put("format", "runhook-h2-1");
    store.commit();
    store.close();

    long queued = withServer(file, runs -> runs.countDocuments(Filters.eq("state", "QUEUED")));
    assertEquals(250, queued);
    Document first = withServer(file, runs -> runs.find(Filters.eq("state", "QUEUED")).sort(new Document("createdAt", -1)).first());
    assertEquals("r498", first.getString("_id"));
    store = new MVStore.Builder().fileName(file).readOnly().open();
    assertEquals("runhook-h2-4", store.<String, String>openMap("$runhook-format").get("format"));
    store.close();
  }

  private static <K, V> MVMap.Builder<K, V> values() {
    return new MVMap.Builder<K, V>().keyType(ValueType.INSTANCE).valueType(ValueType.INSTANCE);
  }

  @Test
  void documentsGoUnderGrowingPositionsAndThoseOfTheFormatBeforeKeepTheirIds() throws Exception {
    String file = newFile();
    withServer(file, runs -> {
      runs.createIndex(Indexes.ascending("state", "createdAt"));
      for (int i = 0; i < 300; i++) runs.insertOne(new Document("_id", UUID.randomUUID().toString()).append("state", "DONE").append("createdAt", i));
      runs.insertOne(new Document("_id", 2L).append("state", "DONE").append("createdAt", 300)); // an _id that a position may equal
      return null;
    });
    // Positions grow with each insert, whatever the _id.
    MVStore store = new MVStore.Builder().fileName(file).open();
    MVMap<Object, de.bwaldvogel.mongo.bson.Document> documents = store.openMap("databases.t.runs", values());
    List<Object> keys = new ArrayList<>(documents.keyList());
    assertEquals(301, keys.size());
    for (int i = 0; i < keys.size(); i++) assertEquals(Long.valueOf(i + 1), keys.get(i));
    assertEquals(2L, documents.get(301L).get("_id"));
    // What format 2 held: each document under its `_id`, which every index entry names as its position.
    Map<Object, Object> idOf = new HashMap<>();
    for (Object key : keys) idOf.put(key, documents.get(key).get("_id"));
    for (Object key : keys) documents.put(idOf.get(key), documents.remove(key));
    for (String name : store.getMapNames()) {
      if (!name.startsWith("t.runs._index_")) continue;
      MVMap<de.bwaldvogel.mongo.backend.KeyValue, Object> index =
          store.openMap(name, new MVMap.Builder<de.bwaldvogel.mongo.backend.KeyValue, Object>().keyType(H2IndexEntries.KeyType.INSTANCE).valueType(ValueType.INSTANCE));
      for (var key : new ArrayList<>(index.keyList())) index.put(key, idOf.get(index.get(key)));
    }
    store.<String, String>openMap("$runhook-format").put("format", "runhook-h2-2");
    store.commit();
    store.close();

    withServer(file, runs -> {
      assertEquals(301, runs.countDocuments());
      assertEquals(300, runs.find(Filters.eq("_id", 2L)).first().getInteger("createdAt"));
      runs.updateOne(Filters.eq("_id", 2L), new Document("$set", new Document("state", "QUEUED")));
      runs.insertOne(new Document("_id", "new").append("state", "QUEUED").append("createdAt", 301));
      runs.insertOne(new Document("_id", 3L).append("state", "QUEUED").append("createdAt", 302));
      runs.deleteOne(Filters.eq("createdAt", 0));
      List<Object> queued = new ArrayList<>();
      runs.find(Filters.eq("state", "QUEUED")).sort(new Document("createdAt", 1)).forEach(d -> queued.add(d.get("_id")));
      assertEquals(List.of(2L, "new", 3L), queued);
      assertEquals(302, runs.countDocuments(Filters.eq("state", "DONE")) + runs.countDocuments(Filters.eq("state", "QUEUED")));
      return null;
    });
    store = new MVStore.Builder().fileName(file).readOnly().open();
    assertEquals("runhook-h2-4", store.<String, String>openMap("$runhook-format").get("format"));
    documents = store.openMap("databases.t.runs", values());
    assertEquals(302, documents.size());
    // The new documents went after the largest Long key (2, an _id of format 2).
    assertEquals("new", documents.get(3L).get("_id"));
    assertEquals(3L, documents.get(4L).get("_id"));
    store.close();
  }

  @Test
  void nonUniqueKeysOfFormat3AreBuiltAgainEndingWithThePosition() throws Exception {
    String file = newFile();
    withServer(file, runs -> {
      runs.createIndex(Indexes.ascending("state"));
      for (int i = 0; i < 200; i++) runs.insertOne(new Document("_id", UUID.randomUUID().toString()).append("state", i % 2 == 0 ? "DONE" : "QUEUED").append("n", i));
      return null;
    });
    // What format 3 held: each key of the non-unique index ended with the `_id`, not the position and the `_id`.
    MVStore store = new MVStore.Builder().fileName(file).open();
    MVMap<de.bwaldvogel.mongo.backend.KeyValue, Object> index =
        store.openMap("t.runs._index_state_1", new MVMap.Builder<de.bwaldvogel.mongo.backend.KeyValue, Object>().keyType(H2IndexEntries.KeyType.INSTANCE).valueType(ValueType.INSTANCE));
    assertEquals(200, index.size());
    for (var key : new ArrayList<>(index.keyList())) {
      assertEquals(3, key.size()); // state, position, _id
      Object position = index.remove(key);
      assertEquals(position, key.get(1));
      index.put(new de.bwaldvogel.mongo.backend.KeyValue(key.get(0), key.get(2)), position);
    }
    store.<String, String>openMap("$runhook-format").put("format", "runhook-h2-3");
    store.commit();
    store.close();

    withServer(file, runs -> {
      runs.deleteMany(Filters.eq("state", "DONE"));
      assertEquals(0, runs.countDocuments(Filters.eq("state", "DONE")));
      List<Integer> queued = new ArrayList<>();
      runs.find(Filters.eq("state", "QUEUED")).forEach(d -> queued.add(d.getInteger("n")));
      assertEquals(100, queued.size());
      for (int i = 0; i < queued.size(); i++) assertEquals(2 * i + 1, queued.get(i)); // in the order they were stored
      return null;
    });
    store = new MVStore.Builder().fileName(file).readOnly().open();
    assertEquals("runhook-h2-4", store.<String, String>openMap("$runhook-format").get("format"));
    assertEquals(100, store.openMap("t.runs._index_state_1", new MVMap.Builder<de.bwaldvogel.mongo.backend.KeyValue, Object>().keyType(H2IndexEntries.KeyType.INSTANCE).valueType(ValueType.INSTANCE)).size());
    store.close();
  }
}
