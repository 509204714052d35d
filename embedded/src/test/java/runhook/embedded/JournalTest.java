package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.bson.Document;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The journal: writes acknowledged after the last checkpoint are replayed when the store opens
 * after a crash (documents and index entries alike), a group torn by the crash is left out
 * whole, and a journal of an older generation is never replayed over a newer checkpoint.
 */
class JournalTest {
  @TempDir Path dir;

  private Path journalFile() {
    return dir.resolve("db.mv" + FastH2Backend.JOURNAL_SUFFIX);
  }

  /** Writes documents 1..n (n = i), each acknowledged, then crashes; returns the journal the crash left. */
  private Path crashAfterWrites(int n) throws Exception {
    Opened opened = new Opened();
    for (int i = 1; i <= n; i++) opened.write(i, i);
    opened.crash();
    return journalFile();
  }

  /** An open store with its journal and group commit, as FastH2Backend opens them. */
  private final class Opened {
    final MVStore store;
    final Journal journal;
    final GroupCommit commit;
    final MVMap<Object, Document> documents;
    final MVMap<KeyValue, Object> index;

    Opened() throws Exception {
      this(true);
    }

    /** Recording or not (then every group is a commit of the store, as with -Drunhook.h2.journal=false). */
    Opened(boolean record) throws Exception {
      store = new MVStore.Builder().fileName(dir.resolve("db.mv").toString()).autoCommitDisabled().autoCommitBufferSize(0).open();
      journal = Journal.open(store, store.openMap("$runhook-format"), journalFile(), record);
      commit = new GroupCommit(store, record ? journal : null);
      documents = JournaledMap.open(store, "databases.t.c");
      index = JournaledMap.open(store, "t.c._index_n_1");
    }

    /** Writes a document and its index entry as one write, and waits until it is acknowledged. */
    void write(long position, int n) throws Exception {
      commit.writes.readLock().lock();
      try {
        documents.put(position, new Document("_id", position).append("n", n));
        index.put(new KeyValue(n, position), position);
      } finally {
        commit.writes.readLock().unlock();
      }
      CompletableFuture<Boolean> acknowledged = new CompletableFuture<>();
      commit.afterNextCommit(acknowledged::complete);
      assertTrue(acknowledged.get(10, TimeUnit.SECONDS));
    }

    /** As a kill leaves it: no checkpoint, the journal as the last group left it. */
    void crash() throws Exception {
      store.closeImmediately();
      journal.close();
    }

    /** As a stop leaves it: the last group, a checkpoint, an empty journal. */
    void stop() throws Exception {
      commit.close();
      commit.writes.writeLock().lock();
      try {
        journal.checkpoint();
      } finally {
        commit.writes.writeLock().unlock();
      }
      store.close();
      journal.restart();
      journal.close();
    }
  }

  @Test
  void writesAcknowledgedAfterTheLastCheckpointAreReplayedAfterACrash() throws Exception {
    Opened first = new Opened();
    for (int i = 1; i <= 50; i++) first.write(i, i * 10);
    first.crash();

    Opened second = new Opened();
    assertTrue(second.journal.replayed() > 0, "nothing was replayed: the test wrote no group after a checkpoint");
    for (long i = 1; i <= 50; i++) {
      assertEquals((int) i * 10, second.documents.get(i).get("n"), "document " + i);
      assertEquals(i, second.index.get(new KeyValue((int) i * 10, i)), "index entry " + i);
    }
    assertEquals(50, second.documents.size());
    assertEquals(50, second.index.size());
    second.crash();

    // Replayed once, then checkpointed: a second open has nothing to replay, and the same data.
    Opened third = new Opened();
    assertEquals(0, third.journal.replayed());
    assertEquals(50, third.documents.size());
    third.stop();
  }

  @Test
  void aStartWithoutTheJournalStillReplaysItAndNeverReplaysItOverItsOwnWrites() throws Exception {
    Path journal = crashAfterWrites(10);
    Path left = dir.resolve("left.journal");
    Files.copy(journal, left);

    Opened plain = new Opened(false);
    assertTrue(plain.journal.replayed() > 0);
    assertEquals(10, plain.documents.size());
    plain.write(1, 100); // committed to the store, not recorded
    plain.crash();
    Files.copy(left, journal, StandardCopyOption.REPLACE_EXISTING);

    Opened again = new Opened();
    assertEquals(0, again.journal.replayed(), "the generation moved on when the journal was replayed");
    assertEquals(100, again.documents.get(1L).get("n"));
    again.stop();
  }

  @Test
  void aGroupTornByTheCrashIsLeftOutWhole() throws Exception {
    Path journal = crashAfterWrites(20);
    long whole = Files.size(journal);
    // The start of a group whose end never reached the disk: its length says more than follows.
    Files.write(journal, new byte[] {0, 0, 1, 0, 1, 2, 3, 4, 1, 7}, StandardOpenOption.APPEND);

    Opened second = new Opened();
    assertTrue(second.journal.replayed() > 0);
    assertEquals(20, second.documents.size());
    assertEquals(20, second.index.size());
    assertTrue(whole > 0);
    second.stop();
  }

  @Test
  void aJournalOfAnOlderGenerationIsNotReplayed() throws Exception {
    Opened first = new Opened();
    first.write(1, 1);
    first.write(2, 1); // position 2 is n=1 in this generation's journal
    first.crash();
    Path journal = journalFile();
    Path older = dir.resolve("older.journal");
    Files.copy(journal, older);

    Opened second = new Opened(); // replays, checkpoints: a new generation
    second.write(2, 2);
    second.documents.remove(1L);
    second.write(3, 3);
    second.stop();
    // A crash between a checkpoint's sync and the journal's restart leaves the older journal.
    Files.copy(older, journal, StandardCopyOption.REPLACE_EXISTING);

    Opened third = new Opened();
    assertEquals(0, third.journal.replayed());
    assertNull(third.documents.get(1L));
    assertEquals(2, third.documents.get(2L).get("n"));
    assertEquals(3, third.documents.get(3L).get("n"));
    third.stop();
  }
}
