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
      for (int i = 0; i < 5; i++) db.getCollection("c").insertOne(new Document("_id", i)); // one at a time: one sync each at least
      Document stats = admin.runCommand(new Document(CommitStats.COMMAND, 1).append("reset", true));
      // the first insert created the collection (a checkpoint), the others are in the journal
      for (String name : new String[] {"lockWait", "commit", "sync", "journal"}) {
        long count = ((Number) step(stats, name).get("count")).longValue();
        assertTrue(count >= (name.equals("journal") ? 4 : 1), name + " counted " + count);
        assertTrue(((Number) step(stats, name).get("maxMs")).doubleValue() > 0, name);
        assertTrue(step(stats, name).getString("maxAt").startsWith("20"), name);
      }
      Document after = admin.runCommand(new Document(CommitStats.COMMAND, 1));
      assertEquals(0L, ((Number) step(after, "commit").get("count")).longValue(), "reset");
      assertNull(step(after, "commit").get("maxAt"));
      // The counters run on from the open: the next write adds its record's bytes to the journal's.
      long journaled = ((Number) step(after, "file").get("journalBytes")).longValue();
      assertTrue(journaled >= ((Number) step(stats, "file").get("journalBytes")).longValue() && journaled > 0, "journaled " + journaled);
      assertTrue(((Number) step(after, "file").get("writeBytes")).longValue() > 0, "the checkpoints wrote the file");
      db.getCollection("c").insertOne(new Document("_id", 5).append("pad", "x".repeat(10_000)));
      long later = ((Number) step(admin.runCommand(new Document(CommitStats.COMMAND, 1)), "file").get("journalBytes")).longValue();
      assertTrue(later >= journaled + 10_000, "journaled " + journaled + " then " + later);
      assertTrue(step(after, "file").containsKey("reads") && step(after, "file").containsKey("cacheHitPercent"));
    }
  }
}
