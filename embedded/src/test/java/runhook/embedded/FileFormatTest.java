package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Indexes;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;

/**
 * A file written before secondary indexes were kept (format runhook-h2-1: unique index maps in
 * another order, no secondary index maps) gets its indexes built again at its first open, and
 * then answers indexed queries with every document.
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

  @Test
  void aFileOfTheFormerFormatGetsItsIndexesBuiltAtItsFirstOpen() throws Exception {
    Path dir = Files.createTempDirectory("file-format");
    String file = dir.resolve("db.mv").toString();
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
    assertEquals("runhook-h2-2", store.<String, String>openMap("$runhook-format").get("format"));
    store.close();
  }
}
