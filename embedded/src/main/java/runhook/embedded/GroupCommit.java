package runhook.embedded;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import org.h2.mvstore.BackgroundSerialization;
import org.h2.mvstore.ChunkSlices;
import org.h2.mvstore.MVStore;

/**
 * Group commit: a write is answered once a group that holds it is on disk: its changes appended
 * to the {@link Journal} and synced, or (without a journal, or a checkpoint after a map was
 * created) an MVStore commit and FileStore.sync() (the fsync; MVStore.commit() only writes the
 * chunk, which the OS may keep in its cache). One group serves every write that finished before
 * it was taken, so while one is in flight the next gathers. Writes hold the shared side of
 * {@link #writes} while they run, and taking a group or a commit's snapshot of the maps the
 * exclusive side, so a group or a chunk never holds half of a write (a unique index entry
 * without its document, say) for a crash to leave behind. A checkpoint (about once a second)
 * holds it only for that snapshot: its chunk is serialized and written on H2's serialization
 * thread ({@link BackgroundSerialization}) while the writes go on, their groups journaled in the
 * next generation; then this thread syncs it between two groups. (Held for the whole checkpoint,
 * as it was, it stopped every write for 10-30 ms each second at a million runs, and larger
 * checkpoints longer. Synced on the serialization thread, beside the journal's syncs, a sync of
 * the data file during a retention sweep held a journal's for 500 ms: ext4 orders them.) Every
 * 100 ms (one after another while the store is quiet), a slice of a sparse chunk's live pages is
 * rewritten ({@link ChunkSlices}) so that the file's space is reused; the next checkpoint stores it.
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
   * While the commits and reads take under a twentieth of the time (a server's own polling
   * takes ~1 %), slices of at most this long follow one another whenever no write waits, not
   * one per 100 ms: after a bulk load, a quiet server with runhook polling beside it moved a
   * slice per 100 ms (its polls' writes made most of them the small ones) and a million runs'
   * chunks were still 44 % live after 15 minutes. A write that comes meanwhile waits for one
   * such slice.
   */
  private static final long COMPACT_QUIET_NS = 10_000_000;
  /** Chunks younger than this are left to empty themselves (their pages are being written). */
  private static final long COMPACT_COLD_MS = 10_000;
  /** The chunks are surveyed for sparse ones once a second, not before every slice (a walk over all of them). */
  private static final long COMPACT_SURVEY_MS = 1000;
  private static final long GATHER_MAX_NS = 5_000_000;

  final ReentrantReadWriteLock writes = new ReentrantReadWriteLock();
  /**
   * How long reads ran since the last housekeeping, summed over connections. Reads count as
   * load too: with only the commits counted, slices followed one another beside a caller's
   * reads (120-250 MB of pages moved in the minute of reads after the accept trials of
   * bench:snapshot), and its log pages took up to twice as long. (Not the writes' own time: a
   * bulk load's inserts run long between its commits, and its sparse chunks are emptied
   * meanwhile.)
   */
  private final LongAdder readNs = new LongAdder();
  final CommitStats stats = new CommitStats();
  private final MVStore store;
  /** The writes' journal (null: every group is a commit of the store). */
  private final Journal journal;
  private final ChunkSlices slices;
  /** Writes the chunks of checkpoints (with a journal). */
  private final BackgroundSerialization serialization;
  /** Where the last checkpoint written in the background is. */
  private enum Checkpoint { NONE, WRITING, WRITTEN }

  /** Guarded by {@link #checkpointLock}. */
  private Checkpoint checkpoint = Checkpoint.NONE;
  /** When the snapshot of the checkpoint being written was taken. */
  private long checkpointSnapshotNs;
  private final Object checkpointLock = new Object();
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
    serialization = journal == null ? null : BackgroundSerialization.install(store, "runhook-checkpoint");
    thread = new Thread(this, "runhook-group-commit");
    thread.setDaemon(true);
    thread.start();
  }

  /** Counts a read's running time (from any connection's thread). */
  void readRan(long ns) {
    readNs.add(ns);
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

  /** Commits and answers what is waiting, then stops once the checkpoint being written is synced. */
  void close() {
    synchronized (this) {
      closed = true;
      notifyAll();
    }
    try {
      thread.join();
      if (!failed) finishCheckpoint(true);
      if (serialization != null) serialization.close();
    } catch (IOException | RuntimeException e) {
      failed = true; // the store closes as after a failed commit: both journal files are kept
      e.printStackTrace();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * A checkpoint, synced, between two writes and after the one being written (a start's, for the
   * indexes it created). Without a journal, a commit.
   */
  void checkpointSynced() throws IOException, InterruptedException {
    for (;;) {
      finishCheckpoint(true);
      writes.writeLock().lock();
      try {
        if (journal == null) {
          store.commit();
        } else if (journal.nextReady()) {
          journal.checkpoint();
        } else {
          continue; // this thread's checkpoint began meanwhile
        }
      } finally {
        writes.writeLock().unlock();
      }
      store.sync();
      if (journal != null) journal.retire();
      return;
    }
  }

  private Checkpoint checkpoint() {
    synchronized (checkpointLock) {
      return checkpoint;
    }
  }

  /**
   * Syncs the checkpoint whose chunk the serialization thread has written, and retires the
   * generation before it (waiting first for the chunk if `wait`); a no-op if none.
   */
  private void finishCheckpoint(boolean wait) throws IOException, InterruptedException {
    synchronized (checkpointLock) {
      while (wait && checkpoint == Checkpoint.WRITING) checkpointLock.wait();
      if (checkpoint != Checkpoint.WRITTEN) return;
      long t = System.nanoTime();
      store.sync(); // fails if writing the chunk failed and H2 closed the store
      // H2 closes the store at the commit after a chunk that failed in the background: until
      // then only its panic says so, and the journal must keep what that chunk lacks.
      if (store.getPanicException() != null) throw store.getPanicException();
      journal.retire();
      long synced = System.nanoTime();
      stats.record(CommitStats.Step.SYNC, synced - t);
      stats.record(CommitStats.Step.CHECKPOINT, synced - checkpointSnapshotNs);
      checkpoint = Checkpoint.NONE;
    }
  }

  @Override
  public void run() {
    long housekept = System.nanoTime();
    int expected = 0; // about how many writers there are: a recent group's size, decaying
    long cycleNs = 0; // the last commit + sync
    long committingNs = 0; // the writes' commits + syncs in this window (100 ms or more)
    boolean quiet = false; // the commits and reads took under a twentieth of the last window
    boolean reading = false; // the reads took a twentieth or more of it
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
      // Not beside a checkpoint's chunk being written (pages moved meanwhile are stored by the next).
      if (!failed && (due || (quiet && moving && idle)) && checkpoint() == Checkpoint.NONE) {
        boolean loaded = false;
        if (due) {
          // Under load: the commits took a quarter of the window or more; quiet: they and the
          // reads took under a twentieth (a caller reading gets the small slices).
          long window = System.nanoTime() - housekept;
          loaded = committingNs * 4 > window;
          reading = readNs.sumThenReset() * 20 >= window;
          quiet = committingNs * 20 < window && !reading;
          housekept = System.nanoTime();
          committingNs = 0;
        }
        try {
          long t = System.nanoTime();
          long moved = loaded
              ? slices.step(COMPACT_FILL_RATE, COMPACT_LOADED_CHUNK_FILL_RATE, COMPACT_BUSY_SLICE, COMPACT_BUSY_NS)
              : !idle || reading
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
      // With a journal, a checkpoint may be due with no write waiting (the changes of the last
      // second), or written, to sync.
      if (!group.isEmpty() || compacted || journal != null && (store.hasUnsavedChanges() || checkpoint() == Checkpoint.WRITTEN)) {
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
      finishCheckpoint(false); // its sync goes before this group's (never beside it)
      Journal.Group group = null;
      boolean synced = false; // a commit whose chunk is written: sync it before answering
      boolean background = false; // a checkpoint whose chunk the serialization thread writes
      long t;
      long locked;
      for (;;) {
        t = System.nanoTime();
        writes.writeLock().lock();
        locked = System.nanoTime();
        boolean wait = false;
        try {
          if (journal == null) {
            store.commit();
            synced = true;
          } else if (!journal.checkpointDue()) {
            group = journal.takeGroup();
          } else if (!journal.nextReady()) {
            // The last checkpoint's chunk is still being written: its groups go on, unless the
            // pages changed since pile up (a sweep) or a map changed (see below).
            if (journal.mapsChanged() || journal.checkpointOverdue()) wait = true;
            else group = journal.takeGroup();
          } else if (journal.mapsChanged()) {
            // Synced before anything after it is acknowledged (a replay opens only the maps the file names).
            journal.checkpoint();
            synced = true;
          } else {
            group = journal.checkpoint(serialization::commit);
            background = true;
            synchronized (checkpointLock) { // with the generation it starts: nothing sees one without the other
              checkpoint = Checkpoint.WRITING;
              checkpointSnapshotNs = System.nanoTime();
            }
            serialization.afterWritten(this::checkpointWritten); // queued behind its chunk
          }
        } finally {
          writes.writeLock().unlock();
        }
        if (!wait) break;
        finishCheckpoint(true);
      }
      stats.record(CommitStats.Step.LOCK_WAIT, locked - t);
      long committed = System.nanoTime();
      if (synced || background) stats.record(CommitStats.Step.COMMIT, committed - locked);
      if (synced) {
        store.sync();
        if (journal != null) journal.retire();
        stats.record(CommitStats.Step.SYNC, System.nanoTime() - committed);
      }
      if (group != null) {
        long appending = System.nanoTime();
        stats.journaled(journal.append(group));
        stats.record(CommitStats.Step.JOURNAL, System.nanoTime() - appending);
      }
      return true;
    } catch (IOException | RuntimeException | Error e) {
      failed = true;
      e.printStackTrace(); // the writers get their connection closed, not an acknowledgement
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** On the serialization thread, once a checkpoint's chunk is written: this thread syncs it. */
  private void checkpointWritten() {
    synchronized (checkpointLock) {
      checkpoint = Checkpoint.WRITTEN;
      checkpointLock.notifyAll();
    }
    synchronized (this) {
      notifyAll(); // a quiet store syncs it now, not after its wait
    }
  }
}
