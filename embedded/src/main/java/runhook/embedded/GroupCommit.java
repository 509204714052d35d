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
 * checkpoint's commit holds the exclusive side of {@link #writes} (writes hold the shared side
 * while they run), so that it holds whole writes: a crash never leaves a document without its
 * index entries. It writes each page changed in that second once, where a commit per group
 * wrote it once per group. Every 100 ms a
 * slice of a sparse chunk's live pages is rewritten ({@link ChunkSlices}) so that the file's
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
  private final Thread thread;
  private List<Consumer<Boolean>> waiting = new ArrayList<>();
  /** One of the writes waiting needs a checkpoint. */
  private boolean checkpointAsked;
  private boolean closed;

  GroupCommit(MVStore store, Journal journal, MVMap<String, String> format) {
    this.store = store;
    this.journal = journal;
    this.format = format;
    slices = new ChunkSlices(store, COMPACT_COLD_MS);
    thread = new Thread(this, "runhook-group-commit");
    thread.setDaemon(true);
    thread.start();
  }

  /**
   * Calls done(true) once the writes finished before this call are on disk (the journal, or
   * with `checkpoint` the store itself), done(false) if that failed.
   */
  void afterNextCommit(Consumer<Boolean> done, boolean checkpoint) {
    synchronized (this) {
      if (!closed) {
        waiting.add(done);
        if (checkpoint) checkpointAsked = true;
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
    long checkpointed = System.nanoTime();
    int expected = 0; // about how many writers there are: a recent group's size, decaying
    long cycleNs = 0; // the last journal write + sync
    for (;;) {
      List<Consumer<Boolean>> group;
      boolean asked;
      boolean closing;
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
      }
      if (!failed && System.nanoTime() - housekept > HOUSEKEEPING_NS) {
        housekept = System.nanoTime();
        boolean idle;
        synchronized (this) {
          idle = waiting.isEmpty();
        }
        try {
          long t = System.nanoTime();
          // the same content in other pages: nothing for the journal
          journal.unrecorded(() -> slices.step(COMPACT_FILL_RATE, idle ? COMPACT_IDLE_SLICE : COMPACT_BUSY_SLICE, idle ? COMPACT_IDLE_NS : COMPACT_BUSY_NS));
          stats.record(CommitStats.Step.SLICE, System.nanoTime() - t);
        } catch (RuntimeException e) {
          e.printStackTrace(); // only space reuse; the next commit reports a broken store
        }
      }
      synchronized (this) {
        group = waiting;
        waiting = new ArrayList<>();
        asked = checkpointAsked;
        checkpointAsked = false;
        closing = closed;
      }
      boolean due = System.nanoTime() - checkpointed > checkpointNs && store.hasUnsavedChanges();
      boolean ok = true;
      if (asked || closing || due || journal.changedOutsideCommands()) {
        ok = checkpoint();
        checkpointed = System.nanoTime();
      } else if (!group.isEmpty() || journal.hasEnded()) {
        long t = System.nanoTime();
        ok = syncJournal();
        cycleNs = System.nanoTime() - t;
      }
      if (!group.isEmpty()) expected = Math.max(group.size(), expected - (expected + 7) / 8);
      for (Consumer<Boolean> done : group) {
        try {
          done.accept(ok);
        } catch (RuntimeException e) {
          // that connection's event loop is gone (the server is stopping): nobody to answer
        }
      }
      synchronized (this) {
        if (closed && waiting.isEmpty()) return;
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
   * generation begun and the store committed, so that the commit holds whole commands: every
   * one of the generations before, none of the next. Then the fsync, while commands go on, and
   * the journal files it made obsolete removed.
   */
  private boolean checkpoint() {
    if (failed) return false;
    try {
      long t = System.nanoTime();
      long generation;
      writes.writeLock().lock();
      long c = System.nanoTime();
      try {
        stats.record(CommitStats.Step.LOCK_WAIT, c - t);
        generation = journal.nextGeneration(format);
        store.commit();
      } finally {
        writes.writeLock().unlock();
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
