package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.Updates;
import com.mongodb.client.MongoDatabase;
import de.bwaldvogel.mongo.MongoServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import org.bson.Document;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Acknowledged writes between checkpoints live in the journal: a copy of the files taken
 * while the server runs (what a power cut leaves: the store at its last checkpoint, the
 * journal's synced records) opens with every acknowledged insert, update and removal, and
 * their index entries, and once only.
 */
class JournalTest {
  @TempDir Path dir;

  private static void withServer(Path file, Consumer<MongoDatabase> use) {
    MongoServer server = new MongoServer(FastH2Backend.open(file.toString()));
    server.bind(new InetSocketAddress("127.0.0.1", 0));
    try (MongoClient client = MongoClients.create("mongodb://127.0.0.1:" + server.getLocalAddress().getPort())) {
      use.accept(client.getDatabase("t"));
    } finally {
      server.shutdownNow();
    }
  }

  /** The collection's documents by `_id`, and what its indexes answer. */
  private static String contents(MongoCollection<Document> c) {
    List<String> out = new ArrayList<>();
    for (Document d : c.find().sort(Sorts.ascending("_id"))) out.add(d.toJson());
    for (Document d : c.find(Filters.eq("s", "even")).sort(Sorts.ascending("n"))) out.add("s:" + d.get("_id"));
    for (Document d : c.find(Filters.gte("n", 0)).sort(Sorts.descending("n"))) out.add("n:" + d.get("_id"));
    return String.join("\n", out);
  }

  /** One entry per document in each index. */
  private static void assertIndexesWhole(MongoDatabase db) {
    Document result = db.runCommand(new Document("validate", "c"));
    long records = ((Number) result.get("nrecords")).longValue();
    Document keys = result.get("keysPerIndex", Document.class);
    assertTrue(keys.size() >= 3, keys.toJson());
    for (String index : keys.keySet()) assertEquals(records, ((Number) keys.get(index)).longValue(), index);
  }

  /** Runs `writes` on a server of `file` that never checkpoints by time, and copies the files while it runs; returns the contents then. */
  private static String writeAndCopy(Path file, Path copy, Consumer<MongoCollection<Document>> writes) throws Exception {
    Files.createDirectories(file.getParent());
    Files.createDirectories(copy.getParent());
    String[] expected = new String[1];
    System.setProperty("runhook.h2.checkpointMs", "3600000");
    try {
      withServer(file, db -> {
        MongoCollection<Document> c = db.getCollection("c");
        c.createIndex(Indexes.ascending("k"), new IndexOptions().unique(true).sparse(true));
        c.createIndex(Indexes.ascending("s", "n"));
        c.createIndex(Indexes.ascending("n"));
        writes.accept(c); // each write acknowledged before the next: after the indexes' checkpoint, in the journal only
        expected[0] = contents(c);
        try {
          Files.copy(file, copy);
          Files.copy(Journal.pathFor(file.toString()), Journal.pathFor(copy.toString()));
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      });
    } finally {
      System.clearProperty("runhook.h2.checkpointMs");
    }
    // The copy's store is at the checkpoint of the indexes: none of the documents.
    MVStore raw = new MVStore.Builder().fileName(copy.toString()).readOnly().open();
    try {
      assertEquals(0, raw.openMap("databases.t.c").size(), "the copy's store holds documents: nothing to replay");
    } finally {
      raw.close();
    }
    return expected[0];
  }

  @Test
  void aCopyTakenBetweenCheckpointsOpensWithEveryAcknowledgedWriteOnce() throws Exception {
    Path copy = dir.resolve("copy").resolve("db.mv");
    String expected = writeAndCopy(dir.resolve("live").resolve("db.mv"), copy, c -> {
      for (int i = 0; i < 300; i++) c.insertOne(new Document("_id", i).append("k", "k" + i).append("s", i % 2 == 0 ? "even" : "odd").append("n", i));
      for (int i = 0; i < 300; i += 3) c.updateOne(Filters.eq("_id", i), Updates.combine(Updates.set("s", "odd"), Updates.set("k", "moved" + i)));
      c.deleteMany(Filters.lt("n", 50));
      c.findOneAndUpdate(Filters.eq("_id", 100), Updates.inc("n", 1000));
      c.insertOne(new Document("_id", 1000).append("k", "k1").append("s", "even").append("n", -1)); // k1's holder was removed
    });
    for (int open = 0; open < 2; open++) { // the second open replays nothing again
      withServer(copy, db -> {
        MongoCollection<Document> c = db.getCollection("c");
        assertEquals(expected, contents(c));
        assertIndexesWhole(db);
        MongoWriteException duplicate = assertThrows(MongoWriteException.class, () -> c.insertOne(new Document("_id", 2000).append("k", "k1")));
        assertTrue(duplicate.getMessage().contains("duplicate key"), duplicate.getMessage());
      });
    }
  }

  @Test
  void aTornLastRecordIsLeftOut() throws Exception {
    Path copy = dir.resolve("copy").resolve("db.mv");
    String expected = writeAndCopy(dir.resolve("live").resolve("db.mv"), copy, c -> {
      for (int i = 0; i < 50; i++) c.insertOne(new Document("_id", i).append("k", "k" + i).append("s", "even").append("n", i));
    });
    // A record cut short at the journal's end, as a power cut in the middle of its write leaves it.
    Path journal = Journal.pathFor(copy.toString());
    byte[] bytes = Files.readAllBytes(journal);
    Files.write(journal, Arrays.copyOf(bytes, 30), StandardOpenOption.APPEND);
    withServer(copy, db -> {
      assertEquals(expected, contents(db.getCollection("c")));
      assertIndexesWhole(db);
    });
  }
}
