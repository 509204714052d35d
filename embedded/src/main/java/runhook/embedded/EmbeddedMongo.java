package runhook.embedded;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicBoolean;

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
 * <p>A full database is an answer: writes that add data are refused with MongoDB's
 * ExceededMemoryLimit when the memory backend's heap is nearly full ({@link MemoryGuard}), with
 * its OutOfDiskSpace when the file backend's disk is ({@link DiskGuard}); reads and deletes go on.
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
 * chunks are kept (default 1 s; H2's 45 s with commitMs); {@code runhook.h2.compactFillRate} (default 50) see {@link
 * GroupCommit}; {@code runhook.h2.compactMaxLiveMb} (default 32) see {@link
 * FastH2Backend#close}; {@code runhook.h2.minFreeMb} (default an eighth of the file system, at most 64) see
 * {@link DiskGuard}.
 */
public final class EmbeddedMongo {
  private EmbeddedMongo() {}

  /**
   * Connections are spread over this many threads (netty event loops; mongo-java-server's
   * default: twice the cores), each running its connections' commands one at a time. MongoDB
   * gives every connection a thread of its own: with four loops, a command waiting for its
   * collection (behind a retention sweep's delete, or a long read) held up every other
   * connection of its loop, a single write to another collection included (up to 235 ms).
   * runhook's pools (50 connections each) mostly get a loop each. Cost: 16 MB more RSS than
   * four loops under 100 busy connections.
   */
  private static final int EVENT_LOOPS = Integer.getInteger("runhook.eventLoops", 128);

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
    server.bind(new InetSocketAddress("127.0.0.1", port), 1, EVENT_LOOPS);
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
}
