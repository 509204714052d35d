package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.client.MongoDatabase;
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
      // Each write's group is appended to the journal and synced, or checkpointed (the first: it creates the collection).
      long groups = ((Number) step(stats, "journal").get("count")).longValue() + ((Number) step(stats, "commit").get("count")).longValue();
      assertTrue(groups >= 5, "groups " + groups);
      for (String name : new String[] {"lockWait", "journal"}) {
        long count = ((Number) step(stats, name).get("count")).longValue();
        assertTrue(count >= 1, name + " counted " + count);
        assertTrue(((Number) step(stats, name).get("maxMs")).doubleValue() > 0, name);
        assertTrue(step(stats, name).getString("maxAt").startsWith("20"), name);
      }
      Document after = admin.runCommand(new Document(CommitStats.COMMAND, 1));
      assertEquals(0L, ((Number) step(after, "journal").get("count")).longValue(), "reset");
      assertNull(step(after, "journal").get("maxAt"));
      // The file's counters run on from the open: the next write adds its bytes to the journal's.
      long written = ((Number) step(after, "file").get("journalBytes")).longValue();
      assertTrue(written >= ((Number) step(stats, "file").get("journalBytes")).longValue() && written > 0, "written " + written);
      assertTrue(((Number) step(after, "file").get("writeBytes")).longValue() > 0, "the store's file is written by checkpoints");
      db.getCollection("c").insertOne(new Document("_id", 5).append("pad", "x".repeat(10_000)));
      long later = ((Number) step(admin.runCommand(new Document(CommitStats.COMMAND, 1)), "file").get("journalBytes")).longValue();
      assertTrue(later >= written + 10_000, "written " + written + " then " + later);
      assertTrue(step(after, "file").containsKey("reads") && step(after, "file").containsKey("cacheHitPercent"));
      // The space reuse's figures: nothing moved in a fresh file, whose chunks are live.
      assertEquals(0L, ((Number) step(after, "file").get("movedBytes")).longValue());
      long live = ((Number) step(after, "file").get("liveChunkPercent")).longValue();
      assertTrue(live > 0 && live <= 100, "live " + live);
    }
  }
}
