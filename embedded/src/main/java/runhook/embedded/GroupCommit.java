package runhook.embedded;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import org.h2.mvstore.ChunkSlices;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;

/**
 * Group commit: a write is answered once the {@link Journal} records that hold it are on disk.
 * One write + fsync of the journal serves every write that finished before it began, so while
 * one is in flight the next group gathers. The store itself is written by checkpoints (an
 * MVStore commit, which writes every page changed since the last one, and its fsync): about
 * once a second, and before answering a write the journal cannot hold (a collection created or
 * dropped, an index built: anything but a document written to an existing collection). A
 * checkpoint takes its snapshot under the exclusive side of {@link #writes} (writes hold the
 * shared side while they run), so that it holds whole writes: a crash never leaves a document
 * without its index entries. It writes each page changed in that second once, where a commit
 * per group wrote it once per group. Checkpoints run on a thread of their own, so the journal's
 * syncs go on while one writes its pages; between two checkpoints, every 100 ms, a slice of a
 * sparse chunk's live pages is rewritten ({@link ChunkSlices}) so that the file's space is
 * reused; the next checkpoint stores it.
 */
final class GroupCommit {
  private static final long HOUSEKEEPING_NS = 100_000_000L;
  /** Sparse chunks are emptied while the chunks' live share is below this (%). */
  private static final int COMPACT_FILL_RATE = Integer.getInteger("runhook.h2.compactFillRate", 50);
  /**
   * Every 100 ms, a slice of a sparse chunk's live pages is rewritten: 1 MB while no write
   * waits, 256 KB while writes wait (they wait for it: a few ms). A slice goes on where the last
   * one stopped, so a chunk of any size is emptied in time; H2's own compaction (whole chunks of
   * at most the step's size) never chose the tens of MB chunks of bulk writes, and the file grew
   * to ten times its data. A slice before every commit, as many bytes as the writes stored,
   * kept the file at twice its data but halved the accepts and made writes wait 3× longer.
   */
  private static final long COMPACT_IDLE_SLICE = 1 << 20;
  private static final long COMPACT_BUSY_SLICE = 256 << 10;
  /**
   * And at most this long: the writes that arrive meanwhile wait for it. Pages read from the
   * disk (not the OS's cache) took up to 345 ms for one 1 MB slice. (A slice of 256 KB from
   * the cache takes 10-40 ms on the 2-core development machine.)
   */
  private static final long COMPACT_IDLE_NS = 40_000_000;
  private static final long COMPACT_BUSY_NS = 20_000_000;
  /** Chunks younger than this are left to empty themselves (their pages are being written). */
  private static final long COMPACT_COLD_MS = 10_000;
  private static final long GATHER_MAX_NS = 5_000_000;
  /**
   * How often the store is written while it has changes (runhook.h2.checkpointMs, read at the
   * open). Each checkpoint writes a page changed many times since the last one once; the
   * journal replayed at a start holds about this long of writes.
   */
  private final long checkpointNs = Long.getLong("runhook.h2.checkpointMs", 1000) * 1_000_000L;

  final ReentrantReadWriteLock writes = new ReentrantReadWriteLock();
  final CommitStats stats = new CommitStats();
  private final MVStore store;
  private final Journal journal;
  /** The file-format map, where each checkpoint stores the journal's generation. */
  private final MVMap<String, String> format;
  private final ChunkSlices slices;
  private final Thread syncer;
  private final Thread checkpointer;
  /** Writes waiting for the journal's next sync (guarded by this). */
  private List<Consumer<Boolean>> waiting = new ArrayList<>();
  /** Writes waiting for the next checkpoint (guarded by {@link #checkpoints}). */
  private List<Consumer<Boolean>> afterCheckpoint = new ArrayList<>();
  private final Object checkpoints = new Object();
  private volatile boolean closed;
  private volatile boolean syncerDone;
  /** Whether the last journal sync served writes (space reuse then takes smaller slices). */
  private volatile boolean busy;

  GroupCommit(MVStore store, Journal journal, MVMap<String, String> format) {
    this.store = store;
    this.journal = journal;
    this.format = format;
    slices = new ChunkSlices(store, COMPACT_COLD_MS);
    syncer = new Thread(this::syncLoop, "runhook-journal-sync");
    checkpointer = new Thread(this::checkpointLoop, "runhook-checkpoint");
    syncer.setDaemon(true);
    checkpointer.setDaemon(true);
    syncer.start();
    checkpointer.start();
  }

  /**
   * Calls done(true) once the writes finished before this call are on disk (the journal, or
   * with `checkpoint` the store itself), done(false) if that failed.
   */
  void afterNextCommit(Consumer<Boolean> done, boolean checkpoint) {
    if (checkpoint) {
      synchronized (checkpoints) {
        if (!closed) {
          afterCheckpoint.add(done);
          checkpoints.notifyAll();
          return;
        }
      }
    } else {
      synchronized (this) {
        if (!closed) {
          waiting.add(done);
          notifyAll();
          return;
        }
      }
    }
    done.accept(false);
  }

  /** Syncs and answers what is waiting, checkpoints and answers what waits for that, then stops. */
  void close() {
    synchronized (this) {
      closed = true;
      notifyAll();
    }
    join(syncer);
    synchronized (checkpoints) {
      checkpoints.notifyAll();
    }
    join(checkpointer);
  }

  private static void join(Thread thread) {
    try {
      thread.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The journal's group commit: one write + fsync of the journal answers every write that finished before it began. */
  private void syncLoop() {
    int expected = 0; // about how many writers there are: a recent group's size, decaying
    long cycleNs = 0; // the last journal write + sync
    for (;;) {
      List<Consumer<Boolean>> group;
      synchronized (this) {
        try {
          if (waiting.isEmpty() && !closed) wait(HOUSEKEEPING_NS / 1_000_000);
          // The writers answered by the last sync come back within a moment: wait for
          // them a little (a fraction of a sync), else every other sync serves only
          // the one write that came in while the previous one ran.
          long until = System.nanoTime() + Math.min(cycleNs / 4, GATHER_MAX_NS);
          for (long left; !closed && waiting.size() < expected && (left = until - System.nanoTime()) > 0; ) {
            wait(left / 1_000_000, (int) (left % 1_000_000));
          }
        } catch (InterruptedException e) {
          closed = true;
        }
        group = waiting;
        waiting = new ArrayList<>();
      }
      busy = !group.isEmpty();
      // A change the journal does not hold (made outside a command): what follows it waits for a checkpoint.
      boolean unrecorded = journal.changedOutsideCommands();
      boolean ok = true;
      if (!group.isEmpty() || journal.hasEnded()) {
        long t = System.nanoTime();
        ok = syncJournal();
        cycleNs = System.nanoTime() - t;
      }
      if (!group.isEmpty()) expected = Math.max(group.size(), expected - (expected + 7) / 8);
      if (ok && unrecorded && !group.isEmpty()) {
        synchronized (checkpoints) {
          afterCheckpoint.addAll(group);
          checkpoints.notifyAll();
        }
      } else {
        answer(group, ok);
      }
      synchronized (this) {
        if (closed && waiting.isEmpty()) {
          syncerDone = true;
          return;
        }
      }
    }
  }

  /**
   * Checkpoints: about once a second while the store has changes, when a write waits for one,
   * and when a change outside commands was made; and every 100 ms a space-reuse slice. On a
   * thread of their own, so that journal syncs (every write's answer) go on meanwhile.
   */
  private void checkpointLoop() {
    long housekept = System.nanoTime();
    long checkpointed = System.nanoTime();
    for (;;) {
      List<Consumer<Boolean>> group;
      boolean closing;
      synchronized (checkpoints) {
        try {
          if (afterCheckpoint.isEmpty() && !closed && (failed || !journal.changedOutsideCommands())) {
            checkpoints.wait(HOUSEKEEPING_NS / 1_000_000);
          }
        } catch (InterruptedException e) {
          closed = true;
        }
        closing = closed && syncerDone;
        group = afterCheckpoint;
        afterCheckpoint = new ArrayList<>();
      }
      if (!failed && System.nanoTime() - housekept > HOUSEKEEPING_NS) {
        housekept = System.nanoTime();
        boolean idle = !busy;
        try {
          long t = System.nanoTime();
          // the same content in other pages: nothing for the journal
          journal.unrecorded(() -> slices.step(COMPACT_FILL_RATE, idle ? COMPACT_IDLE_SLICE : COMPACT_BUSY_SLICE, idle ? COMPACT_IDLE_NS : COMPACT_BUSY_NS));
          stats.record(CommitStats.Step.SLICE, System.nanoTime() - t);
        } catch (RuntimeException e) {
          e.printStackTrace(); // only space reuse; the next checkpoint reports a broken store
        }
      }
      boolean due = System.nanoTime() - checkpointed > checkpointNs && store.hasUnsavedChanges();
      if (!group.isEmpty() || closing || due || journal.changedOutsideCommands()) {
        boolean ok = checkpoint();
        checkpointed = System.nanoTime();
        answer(group, ok);
      }
      if (closing) {
        synchronized (checkpoints) {
          if (afterCheckpoint.isEmpty()) return;
        }
      }
    }
  }

  private static void answer(List<Consumer<Boolean>> group, boolean ok) {
    for (Consumer<Boolean> done : group) {
      try {
        done.accept(ok);
      } catch (RuntimeException e) {
        // that connection's event loop is gone (the server is stopping): nobody to answer
      }
    }
  }

  /**
   * Set by the first failed commit or sync (of the store or the journal), for good: after a
   * failed fsync the OS may have dropped those pages while a later fsync succeeds, so a later
   * chunk or record (which may build on them) must never acknowledge a write. Writers get their connection closed until a
   * restart reopens the file at its last complete chunk.
   */
  private volatile boolean failed;

  /** Whether a commit or sync failed (then nothing more is acknowledged until a restart). */
  boolean failed() {
    return failed;
  }

  /**
   * A checkpoint: between two commands (under the exclusive lock), the journal's next
   * generation begun and the store's snapshot taken, so that the commit holds whole commands:
   * every one that ended before, none after. Commands go on once the snapshot is taken
   * ({@link CommitSnapshot}), while its pages are written and synced; then the journal files it
   * made obsolete are removed.
   */
  private boolean checkpoint() {
    if (failed) return false;
    try {
      long t = System.nanoTime();
      long generation;
      writes.writeLock().lock();
      long c = System.nanoTime();
      stats.record(CommitStats.Step.LOCK_WAIT, c - t);
      boolean[] held = {true};
      try {
        generation = journal.nextGeneration(format);
        CommitSnapshot.releaseWhenTaken(() -> {
          held[0] = false;
          writes.writeLock().unlock();
          stats.record(CommitStats.Step.HELD, System.nanoTime() - c);
        });
        store.commit();
      } finally {
        CommitSnapshot.end();
        if (held[0]) writes.writeLock().unlock(); // failed before the release was set
      }
      long committed = System.nanoTime();
      stats.record(CommitStats.Step.COMMIT, committed - c);
      store.sync();
      stats.record(CommitStats.Step.SYNC, System.nanoTime() - committed);
      journal.checkpointed(generation);
      return true;
    } catch (IOException | RuntimeException | Error e) {
      return fail(e);
    }
  }

  /** Writes and syncs the journal records of the commands that ended. */
  private boolean syncJournal() {
    if (failed) return false;
    try {
      long t = System.nanoTime();
      journal.sync();
      stats.record(CommitStats.Step.JOURNAL, System.nanoTime() - t);
      return true;
    } catch (IOException | RuntimeException | Error e) {
      return fail(e);
    }
  }

  private boolean fail(Throwable e) {
    failed = true;
    e.printStackTrace(); // the writers get their connection closed, not an acknowledgement
    return false;
  }
}
