package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.client.MongoDatabase;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/** runhookCommitStats counts each step of the group commit that acknowledged writes, and resets; the file's counters run on. */
class CommitStatsTest {
  private static Document step(Document stats, String name) {
    return stats.get(name, Document.class);
  }

  @Test
  void eachAcknowledgedWriteIsCountedInTheStepsOfItsCommit() throws Exception {
    try (FileServer s = new FileServer("commit-stats")) {
      MongoDatabase admin = s.client.getDatabase("admin");
      admin.runCommand(new Document(CommitStats.COMMAND, 1).append("reset", true));
      MongoDatabase db = s.client.getDatabase("t");
      for (int i = 0; i < 5; i++) db.getCollection("c").insertOne(new Document("_id", i)); // one at a time: one commit each at least
      Document stats = admin.runCommand(new Document(CommitStats.COMMAND, 1).append("reset", true));
      for (String name : new String[] {"lockWait", "held", "commit", "sync"}) {
        long count = ((Number) step(stats, name).get("count")).longValue();
        assertTrue(count >= 5, name + " counted " + count);
        assertTrue(((Number) step(stats, name).get("maxMs")).doubleValue() > 0, name);
        assertTrue(step(stats, name).getString("maxAt").startsWith("20"), name);
      }
      Document after = admin.runCommand(new Document(CommitStats.COMMAND, 1));
      assertEquals(0L, ((Number) step(after, "commit").get("count")).longValue(), "reset");
      assertNull(step(after, "commit").get("maxAt"));
      // The file's counters run on from the open: the next write adds a chunk's bytes.
      long written = ((Number) step(after, "file").get("writeBytes")).longValue();
      assertTrue(written >= ((Number) step(stats, "file").get("writeBytes")).longValue() && written > 0, "written " + written);
      db.getCollection("c").insertOne(new Document("_id", 5).append("pad", "x".repeat(10_000)));
      long later = ((Number) step(admin.runCommand(new Document(CommitStats.COMMAND, 1)), "file").get("writeBytes")).longValue();
      assertTrue(later >= written + 10_000, "written " + written + " then " + later);
      assertTrue(step(after, "file").containsKey("reads") && step(after, "file").containsKey("cacheHitPercent"));
    }
  }

  /**
   * A commit holds writes only while it takes its snapshot, not while it serializes and writes
   * its pages (fails when the exclusive lock is kept to the end of the commit: held = commit).
   */
  @Test
  void aCommitHoldsWritesOnlyUntilItsSnapshotIsTaken() throws Exception {
    try (FileServer s = new FileServer("commit-snapshot")) {
      MongoDatabase admin = s.client.getDatabase("admin");
      var runs = s.client.getDatabase("t").getCollection("runs");
      runs.insertOne(new Document("_id", "first")); // the collection and its maps exist
      admin.runCommand(new Document(CommitStats.COMMAND, 1).append("reset", true));
      String pad = "x".repeat(2_000);
      List<Document> batch = new ArrayList<>();
      for (int j = 0; j < 10_000; j++) batch.add(new Document("_id", "r" + j).append("n", j).append("pad", pad));
      runs.insertMany(batch); // 20 MB for the commits that answer it
      Document stats = admin.runCommand(new Document(CommitStats.COMMAND, 1));
      double held = ((Number) step(stats, "held").get("maxMs")).doubleValue();
      double commit = ((Number) step(stats, "commit").get("maxMs")).doubleValue();
      assertTrue(held < commit / 4, "writes were held " + held + " ms of a commit of " + commit + " ms");
    }
  }
}
