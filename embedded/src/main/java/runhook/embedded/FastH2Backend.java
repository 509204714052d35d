package runhook.embedded;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.exception.MongoServerException;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.bson.Document;
import io.netty.channel.Channel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.HintedFreeSpace;
import org.h2.mvstore.ScanReads;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.MVStoreTool;
import org.h2.mvstore.ReplacedPagesUncached;

/** H2Backend on an MVStore opened with runhook's settings and {@link FastH2Database}s. */
final class FastH2Backend extends H2Backend {
  /**
   * Marks files written with {@link ValueType}: no other reader can read them. (No
   * database name contains "$", so H2Database.drop, by name prefix, never removes it.)
   */
  private static final String FORMAT_MAP = "$runhook-format";
  /**
   * 4: the keys of a non-unique index end with the document's position, then its `_id`
   * ({@link SecondaryIndex}). Since 3, documents are stored under a position that grows with
   * each insert (as MongoDB's record ids), not under their `_id` ({@link FastH2Database}), and
   * index pages leave out what a key shares with the key before ({@link
   * H2IndexEntries.KeyType}). A file of an older format gets its indexes rebuilt once ({@link
   * #rebuildIndexes}): format 3 (non-unique keys ending with the `_id`), 2 (documents under
   * their `_id`, which they keep as their position) and 1 (unique indexes in {@link
   * ValueType}'s order, no others).
   */
  private static final String FORMAT = "runhook-h2-4";
  private static final Set<String> FORMATS_REBUILT = Set.of("runhook-h2-1", "runhook-h2-2", "runhook-h2-3");
  /** Most live data compacted on close: ~0.5 s on a quiet machine, 3 s on a very busy one. */
  private static final long COMPACT_MAX_LIVE_MB = Long.getLong("runhook.h2.compactMaxLiveMb", 32);

  /**
   * The store's settings, as every opening of the file uses them (the rebuild's with H2's
   * auto-commit on, the server's without).
   */
  private static MVStore.Builder storeBuilder(String fileName) {
    // 32 MB, now that a replaced page leaves it at once (ReplacedPagesUncached): every page it
    // holds is one in use, and the same 64 MB took 15-25 MB more heap than before. Bench --grow,
    // Java RSS at a million: 64 MB 316.7 MB (one run), 48 MB 272.1-326.4 MB (five runs, one of
    // them disturbed); 32 MB 237.3 and 250.2 MB (two runs; the sweep's longest write 267 ms, one
    // journal fsync, then 57.6 ms; 48 MB: 36-68 ms). See bench/results/2026-11-29-embedded-tuning-notes.md, "A smaller page cache".
    int cacheMb = Integer.getInteger("runhook.h2.cacheMb", 32);
    // 16 keys a page, not H2's 48: every commit rewrites each page it changed and the path to its
    // map's root, and a run's `_id` and its log entries' `runId` (random UUIDs) each land on a
    // page of an index as large as the stored runs, read from the file at a million runs. Pages
    // of 16 keys are a third of the bytes to write, read and decode for each; deeper trees add a
    // small page per path. Bench --grow: accepts at a million 0.83-0.91x empty (two runs), 0.77-0.80x with 48.
    int keysPerPage = Integer.getInteger("runhook.h2.keysPerPage", 16);
    // H2's file store, whose cache lets go of a page as soon as a write replaces it.
    return new MVStore.Builder().adoptFileStore(ReplacedPagesUncached.open(fileName, cacheMb)).keysPerPage(keysPerPage);
  }

  /** The journal beside the store's file ({@link Journal}); runhook.h2.journal=false: every group commit writes the pages. */
  private static final boolean JOURNAL = Boolean.parseBoolean(System.getProperty("runhook.h2.journal", "true"));
  static final String JOURNAL_SUFFIX = ".journal";

  static FastH2Backend open(String fileName) {
    int commitMs = Integer.getInteger("runhook.h2.commitMs", 0);
    Journal journal = null;
    Supplier<MVStore> opening = () -> {
      MVStore.Builder builder = storeBuilder(fileName);
      // Durable: only the group commit stores (no background writer, no store triggered by a
      // writer's unsaved memory), so that every chunk in the file holds whole writes.
      if (commitMs <= 0) builder.autoCommitDisabled().autoCommitBufferSize(0);
      return builder.open();
    };
    // Opening reads the store's chunk metadata, which grows with the file: it is opened once,
    // and again only after a rebuild (which needs H2's auto-commit).
    MVStore store = opening.get();
    try {
      String opened = store.<String, String>openMap(FORMAT_MAP).get("format");
      if (opened != null && FORMATS_REBUILT.contains(opened)) {
        store.closeImmediately(); // nothing written
        rebuildIndexes(fileName);
        store = opening.get();
      }
      HintedFreeSpace.install(store); // first-fit allocation without a walk from the file's start per commit
      ScanReads.install(store); // a cursor's later batches do not push the pages in use out of the cache
      if (commitMs > 0) store.setAutoCommitDelay(commitMs);
      // H2 keeps dead chunks 45 s in case the OS has not written the newer ones yet; every
      // group commit is synced, and a command in flight holds its version (handleCommand),
      // so 1 s is ample. With 45 s the file held ~5× its live data under steady writes.
      String retentionMs = System.getProperty("runhook.h2.retentionMs", commitMs > 0 ? null : "1000");
      if (retentionMs != null) store.setRetentionTime(Integer.parseInt(retentionMs));
      MVMap<String, String> format = store.openMap(FORMAT_MAP);
      String found = format.get("format");
      if (found == null && store.getMapNames().stream().anyMatch(n -> n.startsWith("databases."))) {
        throw new IllegalStateException(fileName + " was written by another H2 backend (no " + FORMAT + " marker); move it away to start afresh");
      }
      if (found == null) { // a new file
        format.put("format", FORMAT);
        store.commit();
      } else if (!FORMAT.equals(found)) {
        throw new IllegalStateException(fileName + " has format " + found + ", this server reads " + FORMAT);
      }
      // The group commit's writes are durable in the journal; checkpoints write the pages.
      // (Opened, replayed and checkpointed whatever the settings: a crash may have left one.)
      journal = Journal.open(store, format, Path.of(fileName + JOURNAL_SUFFIX), commitMs <= 0 && JOURNAL);
      if (!(commitMs <= 0 && JOURNAL)) {
        journal.close();
        journal = null;
      }
      MVStore unsaved = store;
      DiskGuard disk = DiskGuard.watch(Path.of(fileName), Long.getLong("runhook.h2.minFreeMb"), unsaved::getUnsavedMemory);
      FastH2Backend backend = new FastH2Backend(store, commitMs <= 0 ? new GroupCommit(store, journal) : null, journal, disk);
      // Indexes created while the databases opened (none on a file of this format) are stored now.
      if (store.hasUnsavedChanges()) backend.checkpoint();
      // From now on a write that finds the disk full waits for space (a start on a full disk fails at once, saying so).
      ((ReplacedPagesUncached) store.getFileStore()).retryWritesWhile(disk::awaitSpace);
      if (journal != null) journal.retryAppendsWhile(disk::awaitSpace);
      return backend;
    } catch (IOException | RuntimeException e) {
      closeQuietly(journal);
      store.closeImmediately();
      if (DiskGuard.isNoSpace(e)) {
        // The journal is replayed into the file and checkpointed before the server answers: that needs room.
        throw new IllegalStateException("no space left on the device of " + fileName + " to open it: free space there and start again"
            + " (what was acknowledged is kept, in the file and its journal)", e);
      }
      if (e instanceof IOException io) throw new UncheckedIOException("the journal of " + fileName + ": " + io.getMessage(), io);
      throw (RuntimeException) e;
    }
  }

  /**
   * A file of an older format: its index maps are removed and filled again from the collections,
   * with H2's auto-commit on (so that a large rebuild is stored as it goes, not held in
   * memory), then the file is marked with the current format. A kill during this leaves the older format,
   * and the next start rebuilds again.
   */
  private static void rebuildIndexes(String fileName) {
    MVStore store = storeBuilder(fileName).open();
    try {
      MVMap<String, String> format = store.openMap(FORMAT_MAP);
      System.out.println("rebuilding the indexes of " + fileName + " (once, for the indexed format " + FORMAT + ")");
      System.out.flush();
      // A line every few seconds: the launcher waits for the server as long as it hears from it.
      long started = System.nanoTime();
      ScheduledExecutorService progress = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "rebuild-progress");
        t.setDaemon(true);
        return t;
      });
      progress.scheduleAtFixedRate(() -> {
        System.out.println("still rebuilding the indexes (" + TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started) + " s)");
        System.out.flush();
      }, 5, 5, TimeUnit.SECONDS);
      try {
        for (String name : store.getMapNames()) {
          if (name.contains("._index_")) store.removeMap(name);
        }
        new FastH2Backend(store, null, null, null); // opening the databases fills the empty indexes
        format.put("format", FORMAT);
        store.commit();
      } finally {
        progress.shutdownNow();
      }
      System.out.println("rebuilt the indexes in " + TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started) + " s");
      System.out.flush();
    } finally {
      store.close();
    }
  }

  /** null: acknowledge before commit (runhook.h2.commitMs > 0, for benchmarks). */
  private final GroupCommit groupCommit;
  /** null: no journal (runhook.h2.journal=false, or acknowledged before commit). */
  private final Journal journal;
  /** null: while the indexes are rebuilt. */
  private final DiskGuard disk;

  private FastH2Backend(MVStore store, GroupCommit groupCommit, Journal journal, DiskGuard disk) {
    super(store);
    this.groupCommit = groupCommit;
    this.journal = journal;
    this.disk = disk;
  }

  /** A commit of the store: with a journal, a checkpoint, synced. */
  private void checkpoint() throws IOException {
    if (groupCommit == null) {
      getMvStore().commit();
      return;
    }
    try {
      groupCommit.checkpointSynced();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while checkpointing", e);
    }
  }

  private static void closeQuietly(Journal journal) {
    if (journal == null) return;
    try {
      journal.close();
    } catch (IOException e) {
      // closing after a failure: the failure is what is reported
    }
  }

  /**
   * Every command but a known read runs under the shared side of the commit lock, and its
   * reply is held until a commit after it is on disk. (Both wire paths, OP_MSG and the legacy
   * OP_QUERY $cmd, come through here.) A command that throws gets its error reply at once:
   * an error acknowledges nothing.
   */
  @Override
  public Document handleCommand(Channel channel, String databaseName, String command, Document query) {
    Document parameter = ServerParameters.handle(command, query);
    if (parameter != null) return parameter;
    if (groupCommit != null && command.equalsIgnoreCase(CommitStats.COMMAND)) return groupCommit.stats.answer(query, getMvStore().getFileStore());
    MemoryGuard.check(command, query);
    if (disk != null) disk.check(command, query);
    return WholeReads.handle(command, () -> durably(channel, databaseName, command, query));
  }

  private Document durably(Channel channel, String databaseName, String command, Document query) {
    if (groupCommit == null) return super.handleCommand(channel, databaseName, command, query);
    // The version the command reads stays on disk while it runs, however short the retention.
    MVStore.TxCounter version = getMvStore().registerVersionUsage();
    try {
      if (isRead(command, query)) {
        long t = System.nanoTime();
        try {
          return super.handleCommand(channel, databaseName, command, query);
        } finally {
          groupCommit.readRan(System.nanoTime() - t);
        }
      }
      MongoCollection<?> collection = null;
      if (!databaseName.equals("admin")) {
        MongoDatabase database = resolveDatabase(databaseName);
        ReadAhead.before(database, command, query);
        collection = collectionWritten(database, command, query);
      }
      Document reply = underCommitLock(collection, () -> super.handleCommand(channel, databaseName, command, query));
      DurableReplies.of(channel).holdNextReply(groupCommit);
      return reply;
    } finally {
      getMvStore().deregisterVersionUsage(version);
    }
  }

  /** Writes to the one collection their command names. */
  private static final Set<String> COLLECTION_WRITES = Set.of("insert", "update", "delete", "findandmodify");

  /** The existing collection a write changes, if it changes one only. */
  private static MongoCollection<?> collectionWritten(MongoDatabase database, String command, Document query) {
    if (!COLLECTION_WRITES.contains(command.toLowerCase(Locale.ROOT)) || !(query.get(command) instanceof String name)) return null;
    try {
      return database.resolveCollection(name, false);
    } catch (RuntimeException e) {
      return null; // an invalid name: the command answers why
    }
  }

  /**
   * Runs a write under the shared side of the commit lock. A write to one collection takes
   * that collection's lock first: a write waiting for its collection (behind a long read of
   * it, or a sweep's delete) then waits without the commit lock, so commits, and every write
   * to another collection, go on. Taken the other way round (inside the command, as
   * mongo-java-server does), one slow read of `runs` held up every commit and so every write.
   * The commit lock is only tried for a while under the collection's lock: a command that holds
   * the commit lock and waits for this collection (an index build) gets it in between.
   */
  private Document underCommitLock(MongoCollection<?> collection, Supplier<Document> write) {
    Lock shared = groupCommit.writes.readLock();
    if (collection == null) {
      shared.lock();
      try {
        return write.get();
      } finally {
        shared.unlock();
      }
    }
    try {
      for (;;) {
        synchronized (collection) {
          if (shared.tryLock(COLLECTION_FIRST_WAIT_MS, TimeUnit.MILLISECONDS)) {
            try {
              return write.get();
            } finally {
              shared.unlock();
            }
          }
        }
        // A commit is due and waits for a write that waits for this collection: let both by.
        shared.lock();
        shared.unlock();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new MongoServerException("interrupted while waiting to write");
    }
  }

  private static final long COLLECTION_FIRST_WAIT_MS = 20;

  private static final Set<String> READS = Set.of("find", "getmore", "count", "distinct", "listcollections", "listindexes",
      "listdatabases", "hello", "ismaster", "ping", "buildinfo", "killcursors", "endsessions", "serverstatus", "dbstats",
      "collstats", "whatsmyuri", "getlasterror", "reseterror", "getparameter", "connectionstatus", "hostinfo",
      "getcmdlineopts", "getlog", "validate", "explain", "currentop", "saslstart", "saslcontinue", "logout");

  static boolean isRead(String command, Document query) {
    String name = command.toLowerCase(java.util.Locale.ROOT);
    if (name.equals("aggregate")) {
      return !(query.get("pipeline") instanceof List<?> stages)
          || stages.stream().noneMatch(s -> s instanceof Document d && (d.containsKey("$out") || d.containsKey("$merge")));
    }
    return READS.contains(name);
  }

  @Override
  protected MongoDatabase openOrCreateDatabase(String databaseName) {
    return new FastH2Database(databaseName, getMvStore(), getCursorRegistry());
  }

  /**
   * Commits, syncs and closes the store. Under a stream of random-key writes an MVStore
   * file grows far beyond its live data (every commit rewrites the touched leaf pages as a
   * new chunk, and old chunks are only reused after the retention time), so when the file
   * is mostly garbage and the live data small enough to copy well within the 5 s the
   * launcher grants for stopping, it is then compacted into a fresh file (written beside it
   * and renamed over it: a kill during that loses nothing, the old file was closed and synced).
   */
  @Override
  public void close() {
    MVStore store = getMvStore();
    String fileName = store.getFileStore().getFileName();
    if (disk != null) disk.stop(); // a write waiting for space fails: this does not wait for an operator
    if (groupCommit != null) groupCommit.close(); // the last group: committed and answered
    if (groupCommit != null && groupCommit.failed()) {
      store.closeImmediately(); // no chunk on top of one that may be lost: reopen at the last complete one
      closeQuietly(journal); // as it is: the next start replays it
      super.close();
      return;
    }
    // The last commits between two writes, as every group commit's: a write still running now
    // (its reply is refused, the group commit is closed) is never stored half.
    Lock exclusive = groupCommit != null ? groupCommit.writes.writeLock() : null;
    if (exclusive != null) exclusive.lock();
    boolean compact = false;
    try {
      try {
        if (journal != null) journal.checkpoint();
        else store.commit();
        long size = store.getFileStore().size();
        // the file's used blocks × the live share of their chunks
        long live = size * store.getFillRate() / 100 * store.getFileStore().getChunksFillRate() / 100;
        compact = size > (32L << 20) && live * 2 < size && live < (COMPACT_MAX_LIVE_MB << 20);
      } catch (RuntimeException e) {
        // a failed checkpoint or estimate: close(0) commits what is there, and no compaction
      }
      store.close(0); // commit, clean-shutdown mark, sync, unlock
      // A write that failed (a full disk, say) closed the store without its last commit, and
      // close(0) then does nothing: the journal holds what the file lacks, for the next start.
      if (journal != null && store.getPanicException() == null) {
        try {
          journal.retire(); // the checkpoint is synced: the generation before it is not replayed
        } catch (IOException e) {
          // then the next start finds it of another generation, and leaves it
        }
      }
    } finally {
      if (exclusive != null) exclusive.unlock();
      closeQuietly(journal);
    }
    super.close(); // the store is closed already: this only forgets the databases
    if (compact) {
      // What MVStore.close(-1) does, without compressing every page (CPU).
      MVStoreTool.compact(fileName, false);
    }
  }
}
