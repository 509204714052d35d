package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * On the file backend, a write that waits for its collection (held by a long read, or a long
 * delete) holds up neither the commits nor the writes to other collections: they are answered
 * while it waits, and it is answered once its collection is free.
 */
class CommitLockOrderTest {
  private Path dir;
  private FastH2Backend backend;
  private MongoServer server;
  private MongoClient client;

  @BeforeEach
  void start() throws Exception {
    dir = Files.createTempDirectory("commit-lock-order");
    backend = FastH2Backend.open(dir.resolve("db.mv").toString());
    server = new MongoServer(backend);
    server.bind(new InetSocketAddress("127.0.0.1", 0));
    client = MongoClients.create("mongodb://127.0.0.1:" + server.getLocalAddress().getPort());
  }

  @AfterEach
  void stop() throws Exception {
    client.close();
    server.shutdownNow();
    try (var files = Files.walk(dir)) {
      files.sorted((a, b) -> b.compareTo(a)).forEach(p -> p.toFile().delete());
    }
  }

  @Test
  void aWriteWaitingForItsCollectionHoldsUpNoOtherWrite() throws Exception {
    MongoDatabase db = client.getDatabase("t");
    db.getCollection("runs").insertOne(new Document("_id", "a"));
    db.getCollection("probe").insertOne(new Document("_id", 0));
    MongoCollection<?> runs = backend.resolveDatabase("t").resolveCollection("runs", true);
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    // What a long read of `runs` does: hold its lock (until the test lets go).
    Thread reader = new Thread(() -> {
      synchronized (runs) {
        held.countDown();
        try {
          release.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
    reader.start();
    held.await();
    try {
      CompletableFuture<Void> waiting = CompletableFuture.runAsync(() -> db.getCollection("runs").insertOne(new Document("_id", "b")));
      Thread.sleep(200); // it is waiting for `runs` by now
      assertFalse(waiting.isDone());
      // Writes to other collections, each answered once a commit holds it, go on meanwhile
      // (with the commit lock taken before the collection's, the first of them waited for
      // the reader: the commit waited for the insert waiting for `runs`).
      for (int i = 1; i <= 20; i++) {
        int n = i;
        CompletableFuture.runAsync(() -> db.getCollection("probe").insertOne(new Document("_id", n))).get(10, TimeUnit.SECONDS);
      }
      assertFalse(waiting.isDone());
      release.countDown();
      waiting.get(10, TimeUnit.SECONDS);
    } finally {
      release.countDown();
      reader.join();
    }
    assertEquals(2, db.getCollection("runs").countDocuments());
    assertEquals(21, db.getCollection("probe").countDocuments());
  }
}
