package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.mongodb.client.MongoDatabase;
import de.bwaldvogel.mongo.MongoCollection;
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
  private FileServer files;

  @BeforeEach
  void start() throws Exception {
    files = new FileServer("commit-lock-order");
  }

  @AfterEach
  void stop() throws Exception {
    files.close();
  }

  @Test
  void aWriteWaitingForItsCollectionHoldsUpNoOtherWrite() throws Exception {
    MongoDatabase db = files.client.getDatabase("t");
    db.getCollection("runs").insertOne(new Document("_id", "a"));
    db.getCollection("probe").insertOne(new Document("_id", 0));
    MongoCollection<?> runs = files.backend.resolveDatabase("t").resolveCollection("runs", true);
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
