package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Updates;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import org.bson.Document;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The journal makes a write durable between checkpoints: what a crash leaves on disk (the
 * store's last checkpoint and the journal files, copied while the server runs) opens with every
 * acknowledged write, its index entries with it; a torn last record ends the replay; a
 * generation older than the store's is never replayed over it.
 */
class JournalTest {
  @BeforeEach
  void noCheckpointDuringATest() {
    System.setProperty("runhook.h2.checkpointMs", "600000"); // only those a write asks for
  }

  @AfterEach
  void defaults() {
    System.clearProperty("runhook.h2.checkpointMs");
  }

  /** What a crash of `s` now leaves on disk: its files copied into a fresh directory. */
  private static Path crashCopy(FileServer s) throws Exception {
    Path copy = Files.createTempDirectory("journal-crash");
    try (Stream<Path> files = Files.list(s.dir)) {
      for (Path f : files.toList()) Files.copy(f, copy.resolve(f.getFileName()));
    }
    return copy;
  }

  private static List<Path> journalFiles(Path dir) throws Exception {
    try (Stream<Path> files = Files.list(dir)) {
      return files.filter(f -> f.getFileName().toString().startsWith("db.mv.journal.")).sorted().toList();
    }
  }

  private static <T> T opened(Path dir, Function<MongoCollection<Document>, T> use) {
    MongoServer server = new MongoServer(FastH2Backend.open(dir.resolve("db.mv").toString()));
    server.bind(new InetSocketAddress("127.0.0.1", 0));
    try (MongoClient client = MongoClients.create("mongodb://127.0.0.1:" + server.getLocalAddress().getPort())) {
      return use.apply(client.getDatabase("t").getCollection("runs"));
    } finally {
      server.shutdownNow();
    }
  }

  /** A collection with an index, created (and checkpointed) before the writes under test. */
  private static MongoCollection<Document> runs(FileServer s) {
    MongoCollection<Document> runs = s.client.getDatabase("t").getCollection("runs");
    runs.createIndex(Indexes.ascending("state", "n"));
    runs.insertOne(new Document("_id", "first").append("state", "DONE").append("n", -1));
    return runs;
  }

  @Test
  void everyAcknowledgedWriteSinceTheCheckpointIsReplayedWithItsIndexEntries() throws Exception {
    try (FileServer s = new FileServer("journal-replay")) {
      MongoCollection<Document> runs = runs(s);
      for (int i = 0; i < 200; i++) runs.insertOne(new Document("_id", "r" + i).append("state", "QUEUED").append("n", i));
      runs.updateMany(Filters.lt("n", 50), Updates.set("state", "DONE"));
      runs.deleteMany(Filters.gte("n", 150));
      Path crashed = crashCopy(s);
      assertTrue(Files.size(journalFiles(crashed).get(journalFiles(crashed).size() - 1)) > 0, "the writes are in the journal, not yet in a checkpoint");

      assertEquals(51L, (long) opened(crashed, r -> r.countDocuments(Filters.eq("state", "DONE"))), "the first and the 50 updated");
      assertEquals(100L, (long) opened(crashed, r -> r.countDocuments(Filters.eq("state", "QUEUED"))));
      assertEquals(151L, (long) opened(crashed, r -> r.countDocuments()));
      // the index agrees with the documents: an indexed, sorted read returns whole documents
      Document last = opened(crashed, r -> r.find(Filters.eq("state", "QUEUED")).sort(new Document("n", -1)).first());
      assertEquals("r149", last.getString("_id"));
      // the replay was stored by a checkpoint, and the server closed with everything in the store: no file is left
      assertEquals(List.of(), journalFiles(crashed));
    }
  }

  @Test
  void aTornLastRecordEndsTheReplayAndTheFileOpens() throws Exception {
    try (FileServer s = new FileServer("journal-torn")) {
      MongoCollection<Document> runs = runs(s);
      for (int i = 0; i < 10; i++) runs.insertOne(new Document("_id", "r" + i).append("state", "QUEUED").append("n", i));
      Path crashed = crashCopy(s);
      Path last = journalFiles(crashed).get(journalFiles(crashed).size() - 1);
      try (FileChannel f = FileChannel.open(last, StandardOpenOption.WRITE)) {
        f.truncate(f.size() - 3); // the last insert's record, half written
      }
      long stored = opened(crashed, r -> r.countDocuments(Filters.eq("state", "QUEUED")));
      assertEquals(9, stored);
      assertEquals(9L, (long) opened(crashed, r -> r.countDocuments(Filters.eq("state", "QUEUED"))), "and opens again the same");
    }
  }

  @Test
  void aGenerationOlderThanTheStoresIsNotReplayedOverIt() throws Exception {
    try (FileServer s = new FileServer("journal-generations")) {
      MongoCollection<Document> runs = runs(s);
      for (int i = 0; i < 10; i++) runs.insertOne(new Document("_id", "r" + i).append("state", "QUEUED").append("n", i));
      Path before = crashCopy(s);
      runs.drop(); // a checkpoint: the next generation
      Path crashed = crashCopy(s);
      // the older generation's file, as a crash between the checkpoint's sync and its removal leaves it
      for (Path old : journalFiles(before)) {
        if (!Files.exists(crashed.resolve(old.getFileName()))) Files.copy(old, crashed.resolve(old.getFileName()));
      }
      assertTrue(journalFiles(crashed).size() >= 2);
      assertEquals(0L, (long) opened(crashed, r -> r.countDocuments()), "the dropped collection is not brought back");
    }
  }

  @Test
  void everyMapACommandWritesRecordsItsChanges() throws Exception {
    try (FileServer s = new FileServer("journal-maps")) {
      MongoCollection<Document> runs = runs(s);
      runs.createIndex(Indexes.ascending("tags"));
      runs.insertOne(new Document("_id", "x").append("tags", List.of("a", "b")));
      runs.updateOne(Filters.eq("_id", "x"), Updates.set("state", "QUEUED"));
      MVStore store = s.backend.getMvStore();
      int maps = 0;
      for (String name : store.getMapNames()) {
        if (!name.startsWith("databases.") && !name.startsWith("meta.") && !name.contains("._index_")) continue;
        maps++;
        assertTrue(store.openMap(name) instanceof JournaledMap, name + " is written without records");
      }
      assertTrue(maps >= 5, "documents, metadata and three indexes: " + maps);
      assertFalse(journalFiles(s.dir).isEmpty());
    }
  }
}
