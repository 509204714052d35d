package runhook.embedded;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import org.h2.mvstore.ChunkSlices;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.WriteBuffer;

/**
 * Group commit: a write is answered once a group that holds it is on disk: its changes appended
 * to the {@link Journal} and synced, or (a checkpoint, about once a second, or without a journal)
 * an MVStore commit and FileStore.sync() (the fsync; MVStore.commit() only writes the chunk,
 * which the OS may keep in its cache). One group serves every write that finished before it
 * was taken, so while one is in flight the next gathers. Writes hold the shared side of {@link
 * #writes} while they run, and taking a group or a commit the exclusive side (not the sync), so
 * a group or a chunk never holds half of a write (a unique index entry without its document,
 * say) for a crash to leave behind. Every 100 ms (one after another while the store is quiet),
 * a slice of a sparse chunk's live pages is rewritten ({@link ChunkSlices}) so that the file's
 * space is reused; the next checkpoint stores it.
 */
final class GroupCommit implements Runnable {
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
  /**
   * Under load (commits a quarter of the time or more), only chunks less than a fifth live are
   * emptied (each byte moved frees four or more: the chunks of the last seconds' commits, nearly
   * all dead); the others wait until the load eases. After a bulk load the chunks left to empty
   * are some 45 % live, and moving them while a million runs' calls went on cost the calls a
   * sixth at 16 callers (each page moved rewrites its path to the root and its old chunk's
   * entry in the layout too).
   */
  private static final int COMPACT_LOADED_CHUNK_FILL_RATE = 20;
  private static final long COMPACT_BUSY_SLICE = 256 << 10;
  /**
   * And at most this long: the writes that arrive meanwhile wait for it. Pages read from the
   * disk (not the OS's cache) took up to 345 ms for one 1 MB slice. (A slice of 256 KB from
   * the cache takes 10-40 ms on the 2-core development machine.)
   */
  private static final long COMPACT_IDLE_NS = 40_000_000;
  private static final long COMPACT_BUSY_NS = 20_000_000;
  /**
   * While the commits take under a twentieth of the time (a server's own polling takes ~1 %),
   * slices of at most this long follow one another whenever no write waits, not one per 100 ms:
   * after a bulk load, a quiet server with runhook polling beside it moved a slice per 100 ms
   * (its polls' writes made most of them the small ones) and a million runs' chunks were still
   * 44 % live after 15 minutes. A write that comes meanwhile waits for one such slice.
   */
  private static final long COMPACT_QUIET_NS = 10_000_000;
  /** Chunks younger than this are left to empty themselves (their pages are being written). */
  private static final long COMPACT_COLD_MS = 10_000;
  /** The chunks are surveyed for sparse ones once a second, not before every slice (a walk over all of them). */
  private static final long COMPACT_SURVEY_MS = 1000;
  private static final long GATHER_MAX_NS = 5_000_000;

  final ReentrantReadWriteLock writes = new ReentrantReadWriteLock();
  final CommitStats stats = new CommitStats();
  private final MVStore store;
  /** The writes' journal (null: every group is a commit of the store). */
  private final Journal journal;
  private final ChunkSlices slices;
  private final Thread thread;
  private List<Consumer<Boolean>> waiting = new ArrayList<>();
  private boolean closed;

  GroupCommit(MVStore store, Journal journal) {
    this(store, journal, COMPACT_COLD_MS);
  }

  /** With chunks rewritable once coldMs old (tests: at once). */
  GroupCommit(MVStore store, Journal journal, long coldMs) {
    this.store = store;
    this.journal = journal;
    slices = new ChunkSlices(store, coldMs, COMPACT_SURVEY_MS);
    thread = new Thread(this, "runhook-group-commit");
    thread.setDaemon(true);
    thread.start();
  }

  /** Calls done(true) once a commit begun after this call is on disk, done(false) if it failed. */
  void afterNextCommit(Consumer<Boolean> done) {
    synchronized (this) {
      if (!closed) {
        waiting.add(done);
        notifyAll();
        return;
      }
    }
    done.accept(false);
  }

  /** Commits and answers what is waiting, then stops. */
  void close() {
    synchronized (this) {
      closed = true;
      notifyAll();
    }
    try {
      thread.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void run() {
    long housekept = System.nanoTime();
    int expected = 0; // about how many writers there are: a recent group's size, decaying
    long cycleNs = 0; // the last commit + sync
    long committingNs = 0; // the writes' commits + syncs in this window (100 ms or more)
    boolean quiet = false; // the commits took under a twentieth of the last window
    boolean moving = false; // the last slice moved pages (there is more to move)
    for (;;) {
      // While quiet with more to move, slices follow one another (none after a failed commit).
      boolean backToBack = quiet && moving && !failed;
      List<Consumer<Boolean>> group;
      synchronized (this) {
        try {
          if (waiting.isEmpty() && !closed && !backToBack) wait(HOUSEKEEPING_NS / 1_000_000);
          // The writers answered by the last commit come back within a moment: wait for
          // them a little (a fraction of a commit), else every other commit serves only
          // the one write that came in while the previous commit ran.
          long until = System.nanoTime() + Math.min(cycleNs / 4, GATHER_MAX_NS);
          for (long left; !closed && waiting.size() < expected && (left = until - System.nanoTime()) > 0; ) {
            wait(left / 1_000_000, (int) (left % 1_000_000));
          }
        } catch (InterruptedException e) {
          closed = true;
        }
      }
      // A slice of space reuse goes before the commit, which then stores it with the writes
      // waiting (they wait for one small slice).
      boolean compacted = false;
      boolean idle;
      synchronized (this) {
        idle = waiting.isEmpty() && !closed;
      }
      boolean due = System.nanoTime() - housekept > HOUSEKEEPING_NS;
      if (!failed && (due || (quiet && moving && idle))) {
        boolean loaded = false;
        if (due) {
          // Under load: the commits took a quarter of the window or more; quiet: under a twentieth.
          long window = System.nanoTime() - housekept;
          loaded = committingNs * 4 > window;
          quiet = committingNs * 20 < window;
          housekept = System.nanoTime();
          committingNs = 0;
        }
        try {
          long t = System.nanoTime();
          long moved = loaded
              ? slices.step(COMPACT_FILL_RATE, COMPACT_LOADED_CHUNK_FILL_RATE, COMPACT_BUSY_SLICE, COMPACT_BUSY_NS)
              : !idle
                  ? slices.step(COMPACT_FILL_RATE, COMPACT_BUSY_SLICE, COMPACT_BUSY_NS)
                  : slices.step(COMPACT_FILL_RATE, COMPACT_IDLE_SLICE, due ? COMPACT_IDLE_NS : COMPACT_QUIET_NS);
          stats.record(CommitStats.Step.SLICE, System.nanoTime() - t);
          stats.moved(moved);
          compacted = moved > 0;
          moving = compacted;
        } catch (RuntimeException e) {
          moving = false;
          e.printStackTrace(); // only space reuse; the next commit reports a broken store
        }
      }
      synchronized (this) {
        group = waiting;
        waiting = new ArrayList<>();
      }
      // With a journal, a checkpoint may be due with no write waiting (the changes of the last second).
      if (!group.isEmpty() || compacted || journal != null && store.hasUnsavedChanges()) {
        long t = System.nanoTime();
        boolean ok = commitAndSync();
        cycleNs = System.nanoTime() - t;
        if (!group.isEmpty()) committingNs += cycleNs; // the writes' commits, not a slice's alone
        if (!group.isEmpty()) expected = Math.max(group.size(), expected - (expected + 7) / 8);
        for (Consumer<Boolean> done : group) {
          try {
            done.accept(ok);
          } catch (RuntimeException e) {
            // that connection's event loop is gone (the server is stopping): nobody to answer
          }
        }
      }
      synchronized (this) {
        if (closed && waiting.isEmpty()) return;
      }
    }
  }

  /**
   * Set by the first failed commit or sync, for good: after a failed fsync the OS may have
   * dropped that chunk's pages while a later fsync succeeds, so a later chunk (which points
   * into it) must never acknowledge a write. Writers get their connection closed until a
   * restart reopens the file at its last complete chunk.
   */
  private volatile boolean failed;

  /** Whether a commit or sync failed (then nothing more is acknowledged until a restart). */
  boolean failed() {
    return failed;
  }

  private boolean commitAndSync() {
    if (failed) return false;
    try {
      long t = System.nanoTime();
      writes.writeLock().lock();
      long locked = System.nanoTime();
      stats.record(CommitStats.Step.LOCK_WAIT, locked - t);
      boolean checkpoint = journal == null || journal.checkpointDue();
      WriteBuffer group = null;
      try {
        if (journal == null) store.commit();
        else if (checkpoint) journal.checkpoint();
        else group = journal.takeGroup();
      } finally {
        writes.writeLock().unlock();
      }
      long committed = System.nanoTime();
      if (checkpoint) {
        stats.record(CommitStats.Step.COMMIT, committed - locked);
        store.sync();
        if (journal != null) journal.restart();
        stats.record(CommitStats.Step.SYNC, System.nanoTime() - committed);
      } else if (group != null) {
        stats.journaled(journal.append(group));
        stats.record(CommitStats.Step.JOURNAL, System.nanoTime() - committed);
      }
      return true;
    } catch (IOException | RuntimeException | Error e) {
      failed = true;
      e.printStackTrace(); // the writers get their connection closed, not an acknowledgement
      return false;
    }
  }
}
