package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * The file backend's disk is bounded, and says so before it is full: while the file system that
 * holds the store has less free than {@link #reserve} and what the next checkpoint writes (the
 * store's unsaved pages), writes that add data (those {@link MemoryGuard#addsData} names) are
 * refused before they change anything, with MongoDB's OutOfDiskSpace. What is kept free takes
 * the journal's groups and the checkpoints of the writes already made; reads and deletes go on,
 * and writes are accepted again once a quarter of the reserve more is free. (A checkpoint is
 * written before it empties the journal, so space comes and goes near the limit: a line on
 * standard error tells the change at most once a minute.)
 *
 * <p>Should the disk fill anyway (another process took what was kept free), a write of the
 * store's file or of the journal that fails with "No space left on device" waits for space and
 * is made again ({@link #awaitSpace}), instead of failing the store for good: the writes of its
 * group are in the maps already, so they are acknowledged once they are on disk, never refused
 * after the fact (their replies wait meanwhile), and writes that add data are refused from then
 * on. When the server stops, a write still waiting fails: its writes are not acknowledged, and
 * the next start opens the file at its last complete chunk and replays the journal.
 */
final class DiskGuard {
  /** MongoDB's OutOfDiskSpace. */
  static final int OUT_OF_DISK_SPACE = 14031;
  /** What is kept free by default: an eighth of the file system, at most this. */
  static final long MAX_DEFAULT_RESERVE = 64L << 20;
  /** Writes are accepted again once at least this much is free, whatever the reserve (after a write failed for space). */
  private static final long MIN_CLEAR = 1L << 20;
  /** The free space is read at most this often (a statfs call). */
  private static final long CHECK_EVERY_NS = 20_000_000;
  /** A write that failed for space is made again after this long. */
  private static final long RETRY_MS = 100;
  /** At most one line a minute about each: the disk full or not, and writes waiting for space. */
  private static final long LINE_EVERY_NS = 60_000_000_000L;

  private final Path dir;
  private final FileStore fileSystem;
  private final long reserve;
  /** What the next checkpoint may write, in bytes (the store's unsaved pages). */
  private final LongSupplier pending;
  private volatile boolean full;
  private volatile boolean stopped;
  private volatile long checkedNs = System.nanoTime() - CHECK_EVERY_NS;
  /** The state the last line told, and when (guarded by this). */
  private boolean toldFull;
  private long toldNs = System.nanoTime() - LINE_EVERY_NS;
  private long toldWaitingNs = System.nanoTime() - LINE_EVERY_NS;

  private DiskGuard(Path dir, FileStore fileSystem, long reserve, LongSupplier pending) {
    this.dir = dir;
    this.fileSystem = fileSystem;
    this.reserve = reserve;
    this.pending = pending;
  }

  /**
   * Watches the file system of `file`'s directory, keeping `reserveMb` free (null: an eighth of
   * the file system, at most {@link #MAX_DEFAULT_RESERVE}) beside the `pending` bytes of the next
   * checkpoint; 0: nothing, only a write that fails for space makes the disk full (tests).
   */
  static DiskGuard watch(Path file, Long reserveMb, LongSupplier pending) {
    Path dir = file.toAbsolutePath().getParent();
    try {
      FileStore fileSystem = Files.getFileStore(dir);
      long reserve = reserveMb != null ? reserveMb << 20 : Math.min(MAX_DEFAULT_RESERVE, fileSystem.getTotalSpace() / 8);
      return new DiskGuard(dir, fileSystem, reserve, pending);
    } catch (IOException e) {
      throw new UncheckedIOException("the file system of " + dir + ": " + e.getMessage(), e);
    }
  }

  long reserve() {
    return reserve;
  }

  /** Throws when `command` would add data while the disk is full. */
  void check(String command, Document query) {
    if (!MemoryGuard.addsData(command, query) || !isFull()) return;
    throw new MongoServerError(OUT_OF_DISK_SPACE, "OutOfDiskSpace",
        "the embedded database's disk is full (" + mb(free()) + " free on " + dir + ", " + mb(needed()) + " needed for the writes under way):"
            + " writes that add data are refused until space is freed there");
  }

  /** Whether writes that add data are refused: by the free space, read at most every {@link #CHECK_EVERY_NS}. */
  boolean isFull() {
    if (System.nanoTime() - checkedNs < CHECK_EVERY_NS) return full;
    return recheck();
  }

  private synchronized boolean recheck() {
    if (System.nanoTime() - checkedNs < CHECK_EVERY_NS) return full;
    checkedNs = System.nanoTime();
    long free = free();
    long needed = needed();
    if (!full && free < needed) full = true;
    else if (full && free >= Math.max(needed + reserve / 4, MIN_CLEAR)) full = false;
    if (full != toldFull && checkedNs - toldNs >= LINE_EVERY_NS) {
      toldFull = full;
      toldNs = checkedNs;
      say(full
          ? "the disk is full (" + mb(free) + " free on " + dir + ", " + mb(needed) + " needed for the writes under way):"
              + " writes that add data are refused until space is freed there"
          : mb(free) + " free on " + dir + ": writes are accepted again");
    }
    return full;
  }

  /** What is kept free: the reserve and the next checkpoint's pages (nothing with no reserve). */
  private long needed() {
    return reserve == 0 ? 0 : reserve + Math.max(0, pending.getAsLong());
  }

  /**
   * Called by a write of the store's file or journal that failed with `e`: if it failed for want
   * of space (and the server is not stopping), the disk is full from now on; waits a moment and
   * returns true: the write is to be made again. Otherwise false: the write fails.
   */
  boolean awaitSpace(IOException e) {
    if (stopped || !isNoSpace(e)) return false;
    synchronized (this) {
      full = true;
      checkedNs = System.nanoTime();
      if (checkedNs - toldWaitingNs >= LINE_EVERY_NS) {
        toldFull = true;
        toldNs = toldWaitingNs = checkedNs;
        say("no space left on the device of " + dir + ": the writes under way wait for space (their callers wait for an answer),"
            + " and writes that add data are refused until space is freed there");
      }
    }
    try {
      Thread.sleep(RETRY_MS);
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      return false;
    }
    return !stopped;
  }

  /** The server stops: a write that waits for space fails (within {@link #RETRY_MS}), and so does any later one. */
  void stop() {
    stopped = true;
  }

  /** Whether `e` (or its cause) says the device is full (ENOSPC). */
  static boolean isNoSpace(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      String message = t.getMessage();
      if (message != null && message.contains("No space left on device")) return true;
    }
    return false;
  }

  private long free() {
    try {
      return fileSystem.getUsableSpace();
    } catch (IOException e) {
      return full ? 0 : Long.MAX_VALUE; // unknown: as it was
    }
  }

  private static String mb(long bytes) {
    return String.format(Locale.ROOT, "%.1f MB", bytes / 1048576.0);
  }

  private static void say(String line) {
    System.err.println("runhook embedded database: " + line);
    System.err.flush();
  }
}
