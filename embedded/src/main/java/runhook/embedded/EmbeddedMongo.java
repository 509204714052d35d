package runhook.embedded;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.h2.H2Collection;
import de.bwaldvogel.mongo.backend.h2.H2Database;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import de.bwaldvogel.mongo.oplog.Oplog;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.MVStoreTool;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.BasicDataType;
import org.h2.mvstore.type.ObjectDataType;

/**
 * runhook's embedded MongoDB-wire server.
 *
 * <pre>java -jar runhook-embedded-mongo.jar --port N [--file path.mv] [--notablescan]</pre>
 *
 * Without --file the data lives in memory. Prints "listening PORT" once it accepts
 * connections. It stops (committing and closing the H2 file cleanly) when its standard input
 * ends, so it never outlives the runhook process that started it, even after kill -9 of
 * that process.
 *
 * <p>The file backend is mongo-java-server's H2Backend on an MVStore we open ourselves, with
 * {@link FastH2Database}: its maps use {@link ValueType} instead of H2's default
 * ObjectDataType, which stores every document and index key with Java serialization and,
 * for keys that are not Comparable (every index key is a KeyValue), serializes both sides of
 * each comparison of a B-tree search. See bench/results/2026-11-23-embedded-backends.md.
 *
 * <p>Durability (file backend): a write is answered only once the MVStore commit that holds it
 * is on disk, fsync included ({@link GroupCommit}, {@link DurableReplies}), so a kill -9 or a
 * power cut loses no acknowledged write; reads are answered at once. A kill in the middle of a
 * commit leaves a torn last chunk, which H2 skips when it opens the file (it falls back to the
 * last complete one, which holds everything acknowledged).
 *
 * <p>Reads see a document whole ({@link WholeReads}), on both backends.
 *
 * <p>Indexes, on both backends: every index is kept sorted in MongoDB's order, unique ones
 * ({@link UniqueIndex}) and the non-unique ones mongo-java-server does not keep
 * ({@link SecondaryIndex}); queries are answered through them ({@link QueryPlanner},
 * {@link IndexedQueries}), and so are aggregations that begin with $match and explain
 * ({@link QueryCommands}). {@code --notablescan} refuses a query no index serves
 * ({@link ScanGuard}).
 *
 * <p>System properties (for benchmarks): {@code runhook.h2=stock} uses the unmodified
 * {@code new H2Backend(file)}; {@code runhook.h2.commitMs} (default 0) above 0 turns the
 * durability off and commits every that many ms instead (H2's auto-commit, as before: a kill
 * -9 can lose that much acknowledged data; the benchmarks' "before"); {@code
 * runhook.h2.cacheMb} (default 32) its page cache; {@code runhook.h2.retentionMs} how long dead
 * chunks are kept (default 1 s; H2's 45 s with commitMs); {@code runhook.h2.compactFillRate} (default 60) see {@link
 * GroupCommit}; {@code runhook.h2.compactMaxLiveMb} (default 32) see {@link
 * FastH2Backend#close}.
 */
public final class EmbeddedMongo {
  private EmbeddedMongo() {}

  public static void main(String[] args) throws Exception {
    int port = 0;
    String file = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--port" -> port = Integer.parseInt(args[++i]);
        case "--file" -> file = args[++i];
        case "--notablescan" -> ScanGuard.set(true);
        default -> {
          System.err.println("unknown argument " + args[i]);
          System.exit(2);
        }
      }
    }
    MongoBackend backend;
    if (file == null) {
      backend = new IndexedMemoryBackend();
    } else if ("stock".equals(System.getProperty("runhook.h2"))) {
      backend = new H2Backend(file);
    } else {
      backend = FastH2Backend.open(file);
    }
    // The memory backend's documents live on the heap; the file backend's heap holds work in
    // progress, whose peaks (a large insert while a long read pins older pages) pass.
    if (file == null) MemoryGuard.install();
    MongoServer server = new MongoServer(backend);
    server.bind(new InetSocketAddress("127.0.0.1", port));
    InetSocketAddress bound = server.getLocalAddress();
    AtomicBoolean stopped = new AtomicBoolean();
    Runnable stop = () -> {
      if (stopped.compareAndSet(false, true)) {
        // closes the clients, then the backend: the MVStore commits, syncs and closes.
        server.shutdownNow();
      }
    };
    Runtime.getRuntime().addShutdownHook(new Thread(stop)); // SIGTERM, SIGINT
    System.out.println("listening " + bound.getPort());
    System.out.flush();
    InputStream in = System.in;
    byte[] buf = new byte[256];
    while (in.read(buf) >= 0) {
      // runhook never writes here; EOF means it is gone (or wants us to stop).
    }
    int status = 0;
    try {
      stop.run();
    } catch (Throwable t) {
      t.printStackTrace();
      status = 1;
    }
    System.exit(status);
  }

  /**
   * MongoDB reads a document whole. mongo-java-server updates a stored document in place, field
   * by field, and answers find, aggregate and findAndModify with the stored objects themselves,
   * encoded after the collection's lock is released: a reply encoded while another connection
   * updates that document could hold half of the update (a run already finished, its slot not
   * yet freed). So those replies carry copies, taken under the collection's lock: query results
   * are collected there (only for a command that answers with them: updates and deletes work on
   * the stored objects through the same path), and findAndModify holds it.
   */
  static final class WholeReads {
    private WholeReads() {}

    private static final ThreadLocal<Boolean> ANSWERS_WITH_DOCUMENTS = ThreadLocal.withInitial(() -> false);

    /** Runs a command; its query results are copied if it answers with documents. */
    static Document handle(String command, java.util.function.Supplier<Document> handler) {
      String name = command.toLowerCase(java.util.Locale.ROOT);
      ANSWERS_WITH_DOCUMENTS.set(name.equals("find") || name.equals("aggregate"));
      try {
        return handler.get();
      } finally {
        ANSWERS_WITH_DOCUMENTS.set(false);
      }
    }

    static List<Document> copies(List<Document> documents) {
      if (!ANSWERS_WITH_DOCUMENTS.get()) return documents;
      List<Document> out = new ArrayList<>(documents.size());
      for (Document d : documents) out.add(d.cloneDeeply());
      return out;
    }

    static Document copyValue(Document reply) {
      if (reply.get("value") instanceof Document value) reply.put("value", value.cloneDeeply());
      return reply;
    }
  }

  /**
   * MemoryBackend whose collections read whole documents ({@link WholeReads}) and keep every
   * index sorted ({@link UniqueIndex}, {@link SecondaryIndex} on {@link MemoryIndexEntries}),
   * answering queries through them ({@link IndexedQueries}, {@link QueryCommands}).
   */
  static final class IndexedMemoryBackend extends MemoryBackend {
    @Override
    public Document handleCommand(Channel channel, String databaseName, String command, Document query) {
      Document parameter = ServerParameters.handle(command, query);
      if (parameter != null) return parameter;
      MemoryGuard.check(command, query);
      return WholeReads.handle(command, () -> super.handleCommand(channel, databaseName, command, query));
    }

    @Override
    public MemoryDatabase openOrCreateDatabase(String databaseName) {
      return new MemoryDatabase(databaseName, getCursorRegistry()) {
        @Override
        public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver resolver, Oplog oplog) {
          Document answer = QueryCommands.handle(this, command, query, resolver, oplog);
          return answer != null ? answer : super.handleCommand(channel, command, query, resolver, oplog);
        }

        @Override
        protected Index<Integer> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
          return new UniqueIndex<>(indexName, keys, sparse, new MemoryIndexEntries());
        }

        @Override
        protected Index<Integer> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
          return new SecondaryIndex<>(indexName, keys, sparse, new MemoryIndexEntries());
        }

        @Override
        protected MemoryCollection openOrCreateCollection(String collectionName, CollectionOptions options) {
          return new MemoryCollection(this, collectionName, options, cursorRegistry) {
            @Override
            protected QueryResult queryDocuments(Document query, Document orderBy, int skip, int limit, int batchSize, Document fieldSelector) {
              IndexWalk<Integer> walk = IndexedQueries.candidates(this, getIndexes(), query, orderBy, skip, limit, this::getDocument);
              if (walk == null) return super.queryDocuments(query, orderBy, skip, limit, batchSize, fieldSelector);
              if (IndexedQueries.streams(walk, batchSize, fieldSelector)) return StreamingCursor.firstBatch(walk, this, cursorRegistry, query, skip, limit, batchSize);
              return matchDocumentsFromStream(query, walk.stream(), skip, limit, batchSize, walk.plan().sortServed() ? null : deriveComparator(orderBy), fieldSelector);
            }

            @Override
            protected QueryResult createQueryResult(List<Document> matched, int batchSize) {
              return super.createQueryResult(WholeReads.copies(matched), batchSize);
            }

            @Override
            public synchronized Document findAndModify(Document query) {
              return WholeReads.copyValue(super.findAndModify(query));
            }
          };
        }
      };
    }
  }

  /** H2Backend on an MVStore opened with runhook's settings and {@link FastH2Database}s. */
  static final class FastH2Backend extends H2Backend {
    /**
     * Marks files written with {@link ValueType}: no other reader can read them. (No
     * database name contains "$", so H2Database.drop, by name prefix, never removes it.)
     */
    private static final String FORMAT_MAP = "$runhook-format";
    /**
     * 2: index keys in {@link IndexOrder} (MongoDB's order) and non-unique indexes kept. A file
     * of format 1 (unique indexes in {@link ValueType}'s order, no others) gets its indexes
     * rebuilt once ({@link #rebuildIndexes}).
     */
    private static final String FORMAT = "runhook-h2-2";
    private static final String FORMAT_WITHOUT_SECONDARY_INDEXES = "runhook-h2-1";
    /** Most live data compacted on close: ~0.5 s on a quiet machine, 3 s on a very busy one. */
    private static final long COMPACT_MAX_LIVE_MB = Long.getLong("runhook.h2.compactMaxLiveMb", 32);

    static FastH2Backend open(String fileName) {
      int commitMs = Integer.getInteger("runhook.h2.commitMs", 0);
      int cacheMb = Integer.getInteger("runhook.h2.cacheMb", 32);
      rebuildIndexesIfOld(fileName, cacheMb);
      MVStore.Builder builder = new MVStore.Builder().fileName(fileName).cacheSize(cacheMb);
      // Durable: only the group commit stores (no background writer, no store triggered by a
      // writer's unsaved memory), so that every chunk in the file holds whole writes.
      if (commitMs <= 0) builder.autoCommitDisabled().autoCommitBufferSize(0);
      MVStore store = builder.open();
      try {
        if (commitMs > 0) store.setAutoCommitDelay(commitMs);
        // H2 keeps dead chunks 45 s in case the OS has not written the newer ones yet; every
        // group commit is synced, and a command in flight holds its version (handleCommand),
        // so 1 s is ample. With 45 s the file held ~5× its live data under steady writes.
        String retentionMs = System.getProperty("runhook.h2.retentionMs", commitMs > 0 ? null : "1000");
        if (retentionMs != null) store.setRetentionTime(Integer.parseInt(retentionMs));
        MVMap<String, String> format = store.openMap(FORMAT_MAP);
        String found = format.get("format");
        if (found == null) {
          boolean hasData = store.getMapNames().stream().anyMatch(n -> n.startsWith("databases."));
          if (hasData) {
            throw new IllegalStateException(fileName + " was written by another H2 backend (no " + FORMAT + " marker); move it away to start afresh");
          }
          format.put("format", FORMAT);
          store.commit();
        } else if (!FORMAT.equals(found)) {
          throw new IllegalStateException(fileName + " has format " + found + ", this server reads " + FORMAT);
        }
        FastH2Backend backend = new FastH2Backend(store, commitMs <= 0 ? new GroupCommit(store) : null);
        // Indexes created while the databases opened (none on a file of this format) are stored now.
        if (store.hasUnsavedChanges()) store.commit();
        return backend;
      } catch (RuntimeException e) {
        store.closeImmediately();
        throw e;
      }
    }

    /**
     * A file of format 1: its index maps are removed and filled again from the collections,
     * with H2's auto-commit on (so that a large rebuild is stored as it goes, not held in
     * memory), then the file is marked as format 2. A kill during this leaves format 1, and
     * the next start rebuilds again.
     */
    private static void rebuildIndexesIfOld(String fileName, int cacheMb) {
      if (!new java.io.File(fileName).exists()) return;
      MVStore store = new MVStore.Builder().fileName(fileName).cacheSize(cacheMb).open();
      try {
        MVMap<String, String> format = store.openMap(FORMAT_MAP);
        if (!FORMAT_WITHOUT_SECONDARY_INDEXES.equals(format.get("format"))) return;
        System.out.println("rebuilding the indexes of " + fileName + " (once, for the indexed format " + FORMAT + ")");
        System.out.flush();
        for (String name : store.getMapNames()) {
          if (name.contains("._index_")) store.removeMap(name);
        }
        new FastH2Backend(store, null); // opening the databases fills the empty indexes
        format.put("format", FORMAT);
        store.commit();
      } finally {
        store.close();
      }
    }

    /** null: acknowledge before commit (runhook.h2.commitMs > 0, for benchmarks). */
    private final GroupCommit groupCommit;

    private FastH2Backend(MVStore store, GroupCommit groupCommit) {
      super(store);
      this.groupCommit = groupCommit;
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
      MemoryGuard.check(command, query);
      return WholeReads.handle(command, () -> durably(channel, databaseName, command, query));
    }

    private Document durably(Channel channel, String databaseName, String command, Document query) {
      if (groupCommit == null) return super.handleCommand(channel, databaseName, command, query);
      // The version the command reads stays on disk while it runs, however short the retention.
      MVStore.TxCounter version = getMvStore().registerVersionUsage();
      try {
        if (isRead(command, query)) return super.handleCommand(channel, databaseName, command, query);
        Document reply;
        groupCommit.writes.readLock().lock();
        try {
          reply = super.handleCommand(channel, databaseName, command, query);
        } finally {
          groupCommit.writes.readLock().unlock();
        }
        DurableReplies.of(channel).holdNextReply(groupCommit);
        return reply;
      } finally {
        getMvStore().deregisterVersionUsage(version);
      }
    }

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
      boolean compact = false;
      try {
        if (groupCommit != null && groupCommit.failed) throw new IllegalStateException("no commit after a failed one");
        store.commit();
        long size = store.getFileStore().size();
        // the file's used blocks × the live share of their chunks
        long live = size * store.getFillRate() / 100 * store.getFileStore().getChunksFillRate() / 100;
        compact = size > (32L << 20) && live * 2 < size && live < (COMPACT_MAX_LIVE_MB << 20);
      } catch (RuntimeException e) {
        // only an estimate; close normally
      }
      String fileName = store.getFileStore().getFileName();
      if (groupCommit != null) groupCommit.close(); // the last group: committed and answered
      if (groupCommit != null && groupCommit.failed) {
        store.closeImmediately(); // no chunk on top of one that may be lost: reopen at the last complete one
        super.close();
        return;
      }
      store.close(0); // commit, clean-shutdown mark, sync, unlock
      super.close(); // the store is closed already: this only forgets the databases
      if (compact) {
        // What MVStore.close(-1) does, without compressing every page (CPU).
        MVStoreTool.compact(fileName, false);
      }
    }
  }

  /**
   * Group commit: a write is answered once an MVStore commit that holds it is on disk.
   * MVStore.commit() only writes the chunk (the OS may keep it in its cache); FileStore.sync()
   * is the fsync. One commit + sync serves every write that finished before it began, so while
   * one is in flight the next group gathers. Writes hold the shared side of {@link #writes}
   * while they run and a commit the exclusive side (not the sync), so a chunk never holds half
   * of a write (a unique index entry without its document, say) for a crash to leave behind.
   * Every 100 ms, before a commit, a small step of sparse chunks is rewritten (what H2's
   * background writer would do) so that the file's space is reused; the commit after it stores
   * it with the writes waiting, which wait for one small step at most.
   */
  static final class GroupCommit implements Runnable {
    private static final long HOUSEKEEPING_NS = 100_000_000L;
    /**
     * Rewrite chunks while their live share is below this (%), about this many bytes a step: a
     * step and its commit take ~10-20 ms at 256 KB (a step of 4 MB once a second held the
     * writes waiting for ~150 ms).
     */
    private static final int COMPACT_FILL_RATE = Integer.getInteger("runhook.h2.compactFillRate", 60);
    private static final int COMPACT_WRITE = 256 << 10;
    private static final long GATHER_MAX_NS = 5_000_000;

    final ReentrantReadWriteLock writes = new ReentrantReadWriteLock();
    private final MVStore store;
    private final Thread thread;
    private List<Consumer<Boolean>> waiting = new ArrayList<>();
    private boolean closed;

    GroupCommit(MVStore store) {
      this.store = store;
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
      for (;;) {
        List<Consumer<Boolean>> group;
        synchronized (this) {
          try {
            if (waiting.isEmpty() && !closed) wait(HOUSEKEEPING_NS / 1_000_000);
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
        // A step of space reuse goes before the commit, which then stores it with the writes.
        boolean compacted = false;
        if (!failed && System.nanoTime() - housekept > HOUSEKEEPING_NS) {
          housekept = System.nanoTime();
          try {
            compacted = store.compact(COMPACT_FILL_RATE, COMPACT_WRITE);
          } catch (RuntimeException e) {
            e.printStackTrace(); // only space reuse; the next commit reports a broken store
          }
        }
        synchronized (this) {
          group = waiting;
          waiting = new ArrayList<>();
        }
        if (!group.isEmpty() || compacted) {
          long t = System.nanoTime();
          boolean ok = commitAndSync();
          cycleNs = System.nanoTime() - t;
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

    private boolean commitAndSync() {
      if (failed) return false;
      try {
        writes.writeLock().lock();
        try {
          store.commit();
        } finally {
          writes.writeLock().unlock();
        }
        store.sync();
        return true;
      } catch (RuntimeException | Error e) {
        failed = true;
        e.printStackTrace(); // the writers get their connection closed, not an acknowledgement
        return false;
      }
    }
  }

  /**
   * Holds a write's reply until its group commit is on disk, without blocking the event loop:
   * the backend marks the channel's next reply, and this handler (last in the pipeline, so the
   * first one a reply passes on its way out) parks it and sends it from the channel's event
   * loop once the commit is synced. A reply that follows a held one waits behind it. If the
   * commit failed the connection is closed: the client sees a network error, never an answer.
   */
  static final class DurableReplies extends ChannelOutboundHandlerAdapter {
    private record Held(Object message, ChannelPromise promise, boolean[] ready) {}

    private final ArrayDeque<Held> queue = new ArrayDeque<>();
    private GroupCommit holdNext;

    static DurableReplies of(Channel channel) {
      DurableReplies h = channel.pipeline().get(DurableReplies.class);
      if (h == null) {
        h = new DurableReplies();
        channel.pipeline().addLast(h);
      }
      return h;
    }

    void holdNextReply(GroupCommit commit) {
      holdNext = commit;
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object message, ChannelPromise promise) {
      GroupCommit commit = holdNext;
      holdNext = null;
      if (commit == null && queue.isEmpty()) {
        ctx.write(message, promise);
        return;
      }
      Held held = new Held(message, promise, new boolean[] {commit == null});
      queue.add(held);
      if (commit != null) {
        commit.afterNextCommit(ok -> ctx.executor().execute(() -> {
          if (!ok) {
            ctx.close();
            return;
          }
          held.ready()[0] = true;
          while (!queue.isEmpty() && queue.peek().ready()[0]) {
            Held h = queue.poll();
            ctx.write(h.message(), h.promise());
          }
          ctx.flush();
        }));
      }
    }

    @Override
    public void flush(ChannelHandlerContext ctx) {
      if (queue.isEmpty()) ctx.flush(); // else the release above flushes
    }
  }

  /** H2Database whose collection and index maps use {@link ValueType} for keys and values. */
  static final class FastH2Database extends H2Database {
    private static final Field MV_STORE;

    static {
      try {
        MV_STORE = H2Database.class.getDeclaredField("mvStore");
        MV_STORE.setAccessible(true);
      } catch (ReflectiveOperationException e) {
        throw new ExceptionInInitializerError(e);
      }
    }

    FastH2Database(String databaseName, MVStore mvStore, CursorRegistry cursorRegistry) {
      super(databaseName, mvStore, cursorRegistry);
    }

    // H2Database's constructor opens the existing collections (calling the methods below)
    // before a subclass field could be set, so read its own field.
    private MVStore store() {
      try {
        return (MVStore) MV_STORE.get(this);
      } catch (IllegalAccessException e) {
        throw new IllegalStateException(e);
      }
    }

    private static <K, V> MVMap.Builder<K, V> builder() {
      return new MVMap.Builder<K, V>().keyType(ValueType.INSTANCE).valueType(ValueType.INSTANCE);
    }

    private IndexEntries entries(String collectionName, String indexName) {
      String namespace = getFullCollectionNamespace(collectionName);
      return new H2IndexEntries(store(), namespace + "._index_" + indexName, store().openMap("meta." + namespace), indexName);
    }

    @Override
    protected Index<Object> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
      return new UniqueIndex<>(indexName, keys, sparse, entries(collectionName, indexName));
    }

    @Override
    protected Index<Object> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
      return new SecondaryIndex<>(indexName, keys, sparse, entries(collectionName, indexName));
    }

    @Override
    public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver resolver, Oplog oplog) {
      Document answer = QueryCommands.handle(this, command, query, resolver, oplog);
      return answer != null ? answer : super.handleCommand(channel, command, query, resolver, oplog);
    }

    @Override
    protected MongoCollection<Object> openOrCreateCollection(String collectionName, CollectionOptions options) {
      String fullName = getFullCollectionNamespace(collectionName);
      MVMap<Object, Document> dataMap = store().openMap("databases." + fullName, builder());
      MVMap<String, Object> metaMap = store().openMap("meta." + fullName);
      return new H2Collection(this, collectionName, options, dataMap, metaMap, cursorRegistry) {
        @Override
        protected QueryResult queryDocuments(Document query, Document orderBy, int skip, int limit, int batchSize, Document fieldSelector) {
          IndexWalk<Object> walk = IndexedQueries.candidates(this, getIndexes(), query, orderBy, skip, limit, this::getDocument);
          if (walk == null) return super.queryDocuments(query, orderBy, skip, limit, batchSize, fieldSelector);
          if (IndexedQueries.streams(walk, batchSize, fieldSelector)) return StreamingCursor.firstBatch(walk, this, cursorRegistry, query, skip, limit, batchSize);
          return matchDocumentsFromStream(query, walk.stream(), skip, limit, batchSize, walk.plan().sortServed() ? null : deriveComparator(orderBy), fieldSelector);
        }

        @Override
        protected QueryResult createQueryResult(List<Document> matched, int batchSize) {
          return super.createQueryResult(WholeReads.copies(matched), batchSize);
        }

        @Override
        public synchronized Document findAndModify(Document query) {
          return WholeReads.copyValue(super.findAndModify(query));
        }
      };
    }
  }

  /**
   * Keys and values of the collection and index maps: documents, _id values, index
   * KeyValues and positions. A compact tagged binary form (exact: Integer stays Integer,
   * Instant keeps its nanoseconds), Java serialization only for rare BSON types, and a
   * comparison that never serializes.
   *
   * <p>The order defined by {@link #compare} is the on-disk order of every B-tree: never
   * change it for an existing format (bump {@link FastH2Backend#FORMAT} instead). Values of
   * different kinds order by kind; within a kind by natural order, containers element by
   * element. compare() == 0 exactly when equals() (documents: same fields in the same order,
   * as BSON and as H2's serialized-bytes comparison had it).
   */
  static final class ValueType extends BasicDataType<Object> {
    static final ValueType INSTANCE = new ValueType();

    private static final int NULL = 0, MISSING = 1, FALSE = 2, TRUE = 3, INT = 4, LONG = 5, DOUBLE = 6, STRING = 7,
        OBJECT_ID = 8, UUID_ = 9, INSTANT = 10, DOCUMENT = 11, LIST = 12, KEY_VALUE = 13, SERIALIZED = 14;

    private static int kind(Object o) {
      if (o == null) return NULL;
      if (o instanceof String) return STRING;
      if (o instanceof KeyValue) return KEY_VALUE; // every index key
      if (o instanceof Document) return DOCUMENT;
      if (o instanceof Integer) return INT;
      if (o instanceof Long) return LONG;
      if (o instanceof Double) return DOUBLE;
      if (o instanceof Boolean b) return b ? TRUE : FALSE;
      if (o instanceof ObjectId) return OBJECT_ID;
      if (o instanceof Instant) return INSTANT;
      if (o instanceof UUID) return UUID_;
      if (o instanceof Missing) return MISSING;
      if (o instanceof List<?>) return LIST; // read back as an ArrayList
      return SERIALIZED;
    }

    @Override
    public Object[] createStorage(int size) {
      return new Object[size];
    }

    @Override
    public int compare(Object a, Object b) {
      if (a == b) return 0;
      if (a instanceof String x && b instanceof String y) return x.compareTo(y); // most keys
      int ka = kind(a), kb = kind(b);
      if (ka != kb) return Integer.compare(ka, kb);
      switch (ka) {
        case NULL, MISSING, FALSE, TRUE:
          return 0;
        case INT:
          return ((Integer) a).compareTo((Integer) b);
        case LONG:
          return ((Long) a).compareTo((Long) b);
        case DOUBLE:
          return ((Double) a).compareTo((Double) b);
        case STRING:
          return ((String) a).compareTo((String) b);
        case OBJECT_ID:
          return ((ObjectId) a).compareTo((ObjectId) b);
        case UUID_:
          return ((UUID) a).compareTo((UUID) b);
        case INSTANT:
          return ((Instant) a).compareTo((Instant) b);
        case DOCUMENT: {
          Iterator<Map.Entry<String, Object>> ia = ((Document) a).entrySet().iterator();
          Iterator<Map.Entry<String, Object>> ib = ((Document) b).entrySet().iterator();
          while (ia.hasNext() && ib.hasNext()) {
            Map.Entry<String, Object> ea = ia.next(), eb = ib.next();
            int c = ea.getKey().compareTo(eb.getKey());
            if (c == 0) c = compare(ea.getValue(), eb.getValue());
            if (c != 0) return c;
          }
          return Boolean.compare(ia.hasNext(), ib.hasNext());
        }
        case LIST:
          return compareSequences(((List<?>) a).iterator(), ((List<?>) b).iterator());
        case KEY_VALUE: {
          KeyValue x = (KeyValue) a, y = (KeyValue) b;
          int n = Math.min(x.size(), y.size());
          for (int i = 0; i < n; i++) {
            int c = compare(x.get(i), y.get(i));
            if (c != 0) return c;
          }
          return Integer.compare(x.size(), y.size());
        }
        default: {
          int c = a.getClass().getName().compareTo(b.getClass().getName());
          if (c != 0 || a.equals(b)) return c;
          return Arrays.compareUnsigned(ObjectDataType.serialize(a), ObjectDataType.serialize(b));
        }
      }
    }

    private int compareSequences(Iterator<?> ia, Iterator<?> ib) {
      while (ia.hasNext() && ib.hasNext()) {
        int c = compare(ia.next(), ib.next());
        if (c != 0) return c;
      }
      return Boolean.compare(ia.hasNext(), ib.hasNext());
    }

    /** Rough heap size, for H2's page splitting, cache and auto-commit accounting. */
    @Override
    public int getMemory(Object o) {
      switch (kind(o)) {
        case NULL, MISSING, FALSE, TRUE:
          return 8;
        case INT, LONG, DOUBLE:
          return 24;
        case STRING:
          return 48 + ((String) o).length();
        case OBJECT_ID, UUID_, INSTANT:
          return 40;
        case DOCUMENT: {
          int size = 80;
          for (Map.Entry<String, Object> e : ((Document) o).entrySet()) {
            size += 40 + 48 + e.getKey().length() + getMemory(e.getValue());
          }
          return size;
        }
        case LIST: {
          int size = 40;
          for (Object v : (List<?>) o) size += 8 + getMemory(v);
          return size;
        }
        case KEY_VALUE: {
          int size = 56;
          for (Object v : (KeyValue) o) size += 8 + getMemory(v);
          return size;
        }
        default:
          return 256;
      }
    }

    @Override
    public void write(WriteBuffer buff, Object o) {
      int kind = kind(o);
      buff.put((byte) kind);
      switch (kind) {
        case NULL, MISSING, FALSE, TRUE -> {}
        case INT -> buff.putVarInt((Integer) o);
        case LONG -> buff.putLong((Long) o);
        case DOUBLE -> buff.putDouble((Double) o);
        case STRING -> writeString(buff, (String) o);
        case OBJECT_ID -> buff.put(((ObjectId) o).toByteArray());
        case UUID_ -> buff.putLong(((UUID) o).getMostSignificantBits()).putLong(((UUID) o).getLeastSignificantBits());
        case INSTANT -> buff.putLong(((Instant) o).getEpochSecond()).putInt(((Instant) o).getNano());
        case DOCUMENT -> {
          Document d = (Document) o;
          buff.putVarInt(d.size());
          for (Map.Entry<String, Object> e : d.entrySet()) {
            writeString(buff, e.getKey());
            write(buff, e.getValue());
          }
        }
        case LIST -> {
          List<?> list = (List<?>) o;
          buff.putVarInt(list.size());
          for (Object v : list) write(buff, v);
        }
        case KEY_VALUE -> {
          KeyValue kv = (KeyValue) o;
          buff.putVarInt(kv.size());
          for (Object v : kv) write(buff, v);
        }
        default -> {
          byte[] bytes = ObjectDataType.serialize(o);
          buff.putVarInt(bytes.length).put(bytes);
        }
      }
    }

    private static void writeString(WriteBuffer buff, String s) {
      buff.putVarInt(s.length()).putStringData(s, s.length());
    }

    @Override
    public Object read(ByteBuffer buff) {
      int kind = buff.get();
      switch (kind) {
        case NULL:
          return null;
        case MISSING:
          return Missing.getInstance();
        case FALSE:
          return Boolean.FALSE;
        case TRUE:
          return Boolean.TRUE;
        case INT:
          return DataUtils.readVarInt(buff);
        case LONG:
          return buff.getLong();
        case DOUBLE:
          return buff.getDouble();
        case STRING:
          return DataUtils.readString(buff, DataUtils.readVarInt(buff));
        case OBJECT_ID: {
          byte[] bytes = new byte[12];
          buff.get(bytes);
          return new ObjectId(bytes);
        }
        case UUID_:
          return new UUID(buff.getLong(), buff.getLong());
        case INSTANT:
          return Instant.ofEpochSecond(buff.getLong(), buff.getInt());
        case DOCUMENT: {
          int n = DataUtils.readVarInt(buff);
          Document d = new Document();
          for (int i = 0; i < n; i++) {
            String key = DataUtils.readString(buff, DataUtils.readVarInt(buff));
            d.put(key, read(buff));
          }
          return d;
        }
        case LIST: {
          int n = DataUtils.readVarInt(buff);
          List<Object> list = new ArrayList<>(n);
          for (int i = 0; i < n; i++) list.add(read(buff));
          return list;
        }
        case KEY_VALUE: {
          int n = DataUtils.readVarInt(buff);
          List<Object> values = new ArrayList<>(n);
          for (int i = 0; i < n; i++) values.add(read(buff));
          return new KeyValue(values);
        }
        case SERIALIZED: {
          byte[] bytes = new byte[DataUtils.readVarInt(buff)];
          buff.get(bytes);
          return ObjectDataType.deserialize(bytes);
        }
        default:
          throw new IllegalStateException("unknown value tag " + kind + " in the H2 file");
      }
    }
  }
}
