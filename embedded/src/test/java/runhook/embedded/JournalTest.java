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
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The journal: writes acknowledged after the last checkpoint are replayed when the store opens
 * after a crash (documents and index entries alike), with those acknowledged while a
 * checkpoint's chunk was being written (the next generation's file) after them; a group torn by
 * the crash is left out whole, and a journal of an older generation is never replayed over a
 * newer checkpoint.
 */
class JournalTest {
  @TempDir Path dir;

  /** The journal's two files (even and odd generations). */
  private List<Path> journalFiles() {
    Path even = dir.resolve("db.mv" + FastH2Backend.JOURNAL_SUFFIX);
    return List.of(even, Journal.oddFile(even));
  }

  /** Copies the journal's files to (or, back, from) copies named with `tag`. */
  private void copyJournal(String tag, boolean back) throws Exception {
    for (Path file : journalFiles()) {
      Path copy = file.resolveSibling(file.getFileName() + "." + tag);
      if (back) Files.copy(copy, file, StandardCopyOption.REPLACE_EXISTING);
      else Files.copy(file, copy, StandardCopyOption.REPLACE_EXISTING);
    }
  }

  /** Writes documents 1..n (n = i), each acknowledged, then crashes. */
  private void crashAfterWrites(int n) throws Exception {
    Opened opened = new Opened();
    for (int i = 1; i <= n; i++) opened.write(i, i);
    opened.crash();
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
      journal = Journal.open(store, store.openMap("$runhook-format"), journalFiles().get(0), record);
      commit = new GroupCommit(store, record ? journal : null);
      documents = JournaledMap.open(store, "databases.t.c");
      index = JournaledMap.open(store, "t.c._index_n_1");
    }

    /** Writes a document and its index entry as one write, and waits until it is acknowledged. */
    void write(long position, int n) throws Exception {
      write(position, n, "");
    }

    /** As {@link #write(long, int)}, the document carrying `padding`. */
    void write(long position, int n, String padding) throws Exception {
      commit.writes.readLock().lock();
      try {
        change(position, n, padding);
      } finally {
        commit.writes.readLock().unlock();
      }
      CompletableFuture<Boolean> acknowledged = new CompletableFuture<>();
      commit.afterNextCommit(acknowledged::complete);
      assertTrue(acknowledged.get(10, TimeUnit.SECONDS));
    }

    void change(long position, int n) {
      change(position, n, "");
    }

    void change(long position, int n, String padding) {
      documents.put(position, new Document("_id", position).append("n", n).append("padding", padding));
      index.put(new KeyValue(n, position), position);
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
      journal.retire();
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
    crashAfterWrites(10);
    copyJournal("left", false);

    Opened plain = new Opened(false);
    assertTrue(plain.journal.replayed() > 0);
    assertEquals(10, plain.documents.size());
    plain.write(1, 100); // committed to the store, not recorded
    plain.crash();
    copyJournal("left", true);

    Opened again = new Opened();
    assertEquals(0, again.journal.replayed(), "the generation moved on when the journal was replayed");
    assertEquals(100, again.documents.get(1L).get("n"));
    again.stop();
  }

  @Test
  void aGroupTornByTheCrashIsLeftOutWhole() throws Exception {
    crashAfterWrites(20);
    for (Path journal : journalFiles()) {
      // The start of a group whose end never reached the disk: its length says more than follows.
      Files.write(journal, new byte[] {0, 0, 1, 0, 1, 2, 3, 4, 1, 7}, StandardOpenOption.APPEND);
    }

    Opened second = new Opened();
    assertTrue(second.journal.replayed() > 0);
    assertEquals(20, second.documents.size());
    assertEquals(20, second.index.size());
    second.stop();
  }

  /**
   * Writes acknowledged across checkpoints written in the background (due every 8 MB of changed
   * pages), then a crash at whatever point the last one had reached: every write is there.
   */
  @Test
  void writesAcknowledgedAcrossBackgroundCheckpointsSurviveACrash() throws Exception {
    Opened first = new Opened();
    String padding = "x".repeat(16 << 10);
    int n = 2400; // some 40 MB of documents
    for (int i = 1; i <= n; i++) first.write(i, i, padding);
    Document stats = first.commit.stats.answer(new Document(), first.store.getFileStore());
    long background = ((Number) ((Document) stats.get("checkpoint")).get("count")).longValue();
    assertTrue(background >= 2, "checkpoints written in the background: " + background);
    first.crash();

    Opened second = new Opened();
    assertEquals(n, second.documents.size());
    assertEquals(n, second.index.size());
    for (long i = 1; i <= n; i++) assertEquals((int) i, second.documents.get(i).get("n"), "document " + i);
    second.stop();
  }

  /**
   * A checkpoint whose chunk never reached the disk (its commit is left out here): the groups of
   * its generation and those acknowledged after it, in the other file, are replayed in order.
   */
  @Test
  void writesAcknowledgedWhileACheckpointWasWrittenAreReplayedAfterItsGeneration() throws Exception {
    Opened first = new Opened();
    first.commit.close(); // this test takes the groups itself
    first.change(1, 1);
    first.journal.append(first.journal.takeGroup());
    first.change(2, 2);
    first.change(1, 10);
    Journal.Group last = first.journal.checkpoint(() -> {}); // the chunk: never written
    first.journal.append(last);
    first.change(2, 20);
    first.change(3, 30);
    first.journal.append(first.journal.takeGroup());
    first.crash();

    Opened second = new Opened();
    assertEquals(3, second.journal.replayed());
    assertEquals(10, second.documents.get(1L).get("n"));
    assertEquals(20, second.documents.get(2L).get("n"));
    assertEquals(30, second.documents.get(3L).get("n"));
    assertEquals(5, second.index.size()); // every entry written: (1,1) (10,1) (2,2) (20,2) (30,3)
    second.stop();
  }

  /**
   * A checkpoint synced, its older generation not yet retired, then groups of its own
   * generation: only those are replayed, over the checkpoint, which holds some of them already.
   */
  @Test
  void aCheckpointSyncedBeforeItsOlderGenerationIsRetiredReplaysOnlyItsOwn() throws Exception {
    Opened first = new Opened();
    first.commit.close();
    first.change(1, 1);
    first.journal.append(first.journal.takeGroup());
    first.documents.remove(1L);
    Journal.Group last = first.journal.checkpoint(() -> {
      first.change(4, 4); // a write after the generation began, in the chunk and in its group
      first.store.commit();
    });
    first.journal.append(last);
    first.store.sync();
    first.change(5, 5);
    first.journal.append(first.journal.takeGroup());
    first.crash();

    Opened second = new Opened();
    assertEquals(1, second.journal.replayed());
    assertNull(second.documents.get(1L));
    assertEquals(4, second.documents.get(4L).get("n"));
    assertEquals(5, second.documents.get(5L).get("n"));
    second.stop();
  }

  @Test
  void aJournalOfAnOlderGenerationIsNotReplayed() throws Exception {
    Opened first = new Opened();
    first.write(1, 1);
    first.write(2, 1); // position 2 is n=1 in this generation's journal
    first.crash();
    copyJournal("older", false);

    Opened second = new Opened(); // replays, checkpoints: a new generation
    second.write(2, 2);
    second.documents.remove(1L);
    second.write(3, 3);
    second.stop();
    // A crash between a checkpoint's sync and the journal's restart leaves the older journal.
    copyJournal("older", true);

    Opened third = new Opened();
    assertEquals(0, third.journal.replayed());
    assertNull(third.documents.get(1L));
    assertEquals(2, third.documents.get(2L).get("n"));
    assertEquals(3, third.documents.get(3L).get("n"));
    third.stop();
  }
}
