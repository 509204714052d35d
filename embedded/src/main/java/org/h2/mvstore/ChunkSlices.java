package org.h2.mvstore;

import java.lang.reflect.Field;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * Empties sparse chunks of an MVStore a slice at a time: each step rewrites the live pages of
 * the sparsest old chunk, up to a number of bytes, and the next step goes on where it stopped,
 * so a chunk of any size is emptied (and its space reused) in steps of bounded cost. H2's own
 * MVStore.compact rewrites whole chunks only, and never a chunk whose live pages exceed the
 * step's write limit: under bulk writes, whose chunks are tens of MB, the file grew to ten
 * times its live data. It does what H2's FileStore.rewriteChunks does for a set of chunks
 * (leaves first, then the inner pages their rewrites left), with MVMap.rewritePage and the
 * chunks' tables of contents, which H2 keeps to its package: hence this package. Written
 * against H2 2.3.232; runhook.embedded.ChunkSlicesTest checks it. Called only from the thread
 * that commits (the group commit), between commits.
 */
public final class ChunkSlices {
  private static final Field LAYOUT;

  static {
    try {
      LAYOUT = FileStore.class.getDeclaredField("layout");
      LAYOUT.setAccessible(true);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final MVStore store;
  /** The chunk being emptied (-1: none), its table of contents, the pass (0: leaves, 1: all) and the next page. */
  private int chunkId = -1;
  private long[] toc;
  private int pass;
  private int nextPage;
  /**
   * Chunks walked to their end, by the store's version then: skipped until no version in use
   * is that old, since a page rewritten is counted dead only then (walked again before, every
   * page would be read for nothing). A chunk walked WALKS_MAX times still live holds pages no
   * rewrite moves (a closed map's): left alone.
   */
  private final Map<Integer, long[]> walked = new HashMap<>();
  private static final int WALKS_MAX = 3;

  /**
   * A chunk younger than coldMs is left alone: its pages are the ones being written (a counter,
   * the runs of the last minutes), whose next writes empty it for free.
   */
  private final long coldMs;

  /**
   * How often the chunks are surveyed (their live share, the sparsest ones): a walk over every
   * chunk, which a file of a million runs holds tens of thousands of. Walked before every step
   * (every 100 ms), it took a fifth of the committing thread's time at a million runs.
   */
  private final long surveyNs;
  private long surveyedAt;
  private boolean surveyed;
  /** The chunks' live share (%) at the last survey. */
  private int fillRate;
  /** The sparsest rewritable chunks at the last survey, sparsest first (checked again when taken). */
  private final ArrayDeque<Integer> candidates = new ArrayDeque<>();
  private static final int CANDIDATES_MAX = 256;
  /** Survey entries {live share in ‰, version, id}: the sparsest first, the oldest among equals. */
  private static final Comparator<long[]> SPARSEST_FIRST = Comparator.<long[]>comparingLong(c -> c[0]).thenComparingLong(c -> c[1]);

  public ChunkSlices(MVStore store, long coldMs, long surveyMs) {
    this.store = store;
    this.coldMs = coldMs;
    this.surveyNs = surveyMs * 1_000_000;
  }

  /**
   * Rewrites live pages of chunks whose live share is below targetFillRate (%), sparsest
   * first, until about maxBytes of pages were read (rewritten or found moved already: either
   * way read from the file, so the step's cost is bounded by maxBytes) or maxNanos passed
   * (pages read from the disk, not the OS's cache, take far longer per byte). Returns the
   * bytes rewritten (0: nothing was).
   */
  public long step(int targetFillRate, long maxBytes, long maxNanos) {
    return step(targetFillRate, targetFillRate, maxBytes, maxNanos);
  }

  /**
   * As {@link #step(int, long, long)}, moving pages only out of chunks whose live share is below
   * chunkFillRate (%): a chunk a fifth live frees five bytes for each byte moved, one half live
   * two. A chunk at or above it (the current one included) is left where the walk stands, for a
   * later step with a higher chunkFillRate.
   */
  public long step(int targetFillRate, int chunkFillRate, long maxBytes, long maxNanos) {
    deadline = System.nanoTime() + maxNanos;
    FileStore<?> fileStore = store.getFileStore();
    if (fileStore == null) return 0;
    if (!surveyed || System.nanoTime() - surveyedAt >= surveyNs) survey(fileStore, targetFillRate);
    if (fillRate >= targetFillRate) return 0;
    MVStore.TxCounter version = store.registerVersionUsage();
    try {
      long read = 0;
      rewritten = 0;
      while (read < maxBytes && System.nanoTime() < deadline) {
        Chunk<?> chunk = chunkId < 0 ? null : fileStore.getChunks().get(chunkId);
        if (chunk != null && chunk.isLive() && pass <= 1 && livePermille(chunk) >= chunkFillRate * 10L) break;
        if (chunk == null || !chunk.isLive() || pass > 1) {
          if (chunkId >= 0 && pass > 1) {
            long[] walk = walked.computeIfAbsent(chunkId, id -> new long[2]);
            walk[0] = store.getCurrentVersion();
            walk[1]++;
          }
          chunkId = -1;
          chunk = nextCandidate(fileStore, targetFillRate, chunkFillRate);
          if (chunk == null) break;
          start(chunk, fileStore);
          read += toc.length * 8L;
        }
        read += rewrite(chunk, maxBytes - read);
      }
      return rewritten;
    } finally {
      store.deregisterVersionUsage(version);
    }
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private void start(Chunk chunk, FileStore fileStore) {
    chunkId = chunk.id;
    toc = chunk.tocPos == 0 ? new long[0] : chunk.readToC(fileStore);
    pass = 0;
    nextPage = 0;
  }

  /** Bytes rewritten by the current step, and when it stops. */
  private long rewritten;
  private long deadline;

  /**
   * Rewrites live pages of `chunk` from where the last call stopped, until about `budget` bytes
   * of pages were read; returns the bytes read (adding those rewritten to `rewritten`).
   */
  private long rewrite(Chunk<?> chunk, long budget) {
    long read = 0;
    MVMap<String, String> layout = layout();
    MVMap<String, String> meta = store.getMetaMap();
    while (read < budget && pass <= 1 && System.nanoTime() < deadline) {
      if (nextPage >= toc.length) {
        pass++;
        nextPage = 0;
        continue;
      }
      int pageNo = nextPage++;
      if (chunk.occupancy != null && chunk.occupancy.get(pageNo)) continue; // dead already
      long element = toc[pageNo];
      if (pass == 0 && !DataUtils.isLeafPosition(element)) continue;
      int mapId = DataUtils.getPageMapId(element);
      MVMap<?, ?> map = mapId == layout.getId() ? layout : mapId == meta.getId() ? meta : store.getMap(mapId);
      if (map == null || map.isClosed()) continue;
      int length = DataUtils.getPageMaxLength(element);
      read += length;
      if (map.rewritePage(DataUtils.composePagePos(chunk.id, element))) {
        rewritten += length;
        if (map == meta) store.markMetaChanged();
      }
    }
    return read;
  }

  /**
   * One walk over the chunks: their live share, and the rewritable ones below targetFillRate,
   * sparsest first (the oldest among equals), at most CANDIDATES_MAX of them.
   */
  private void survey(FileStore<?> fileStore, int targetFillRate) {
    surveyed = true;
    surveyedAt = System.nanoTime();
    walked.keySet().retainAll(fileStore.getChunks().keySet());
    candidates.clear();
    long maxLenSum = 1;
    long maxLenLiveSum = 1;
    PriorityQueue<long[]> sparsest = new PriorityQueue<>(SPARSEST_FIRST.reversed()); // the least sparse on top, polled first
    for (Chunk<?> c : fileStore.getChunks().values()) {
      maxLenSum += c.maxLen;
      maxLenLiveSum += c.maxLenLive;
      if (!rewritable(c, fileStore, targetFillRate)) continue;
      sparsest.add(new long[] {livePermille(c), c.version, c.id});
      if (sparsest.size() > CANDIDATES_MAX) sparsest.poll();
    }
    fillRate = (int) (100 * maxLenLiveSum / maxLenSum); // as FileStore.getChunksFillRate
    ArrayList<long[]> order = new ArrayList<>(sparsest);
    order.sort(SPARSEST_FIRST);
    for (long[] c : order) candidates.add((int) c[2]);
  }

  /**
   * The next candidate of the last survey that is still a cold rewritable chunk below
   * targetFillRate, or null; null too, leaving the candidates as they are, when the sparsest
   * left is at or above chunkFillRate (they are sparsest first, and a chunk only gets sparser).
   */
  private Chunk<?> nextCandidate(FileStore<?> fileStore, int targetFillRate, int chunkFillRate) {
    for (Integer id; (id = candidates.peek()) != null; ) {
      Chunk<?> c = fileStore.getChunks().get(id);
      if (c != null && rewritable(c, fileStore, targetFillRate)) {
        if (livePermille(c) >= chunkFillRate * 10L) return null;
        candidates.poll();
        return c;
      }
      candidates.poll();
    }
    return null;
  }

  /** The chunk's live share, in ‰ (as the survey ranks it). */
  private static long livePermille(Chunk<?> c) {
    return c.maxLen <= 0 ? 1000 : c.maxLenLive * 1000 / c.maxLen;
  }

  /** Whether `c` is cold, rewritable, not walked in vain lately, and below targetFillRate. */
  private boolean rewritable(Chunk<?> c, FileStore<?> fileStore, int targetFillRate) {
    long[] walk = walked.get(c.id);
    if (walk != null && (walk[0] >= store.getOldestVersionToKeep() || walk[1] >= WALKS_MAX)) return false;
    long now = store.getTimeAbsolute() - fileStore.getCreationTime();
    long cold = Math.max(fileStore.getRetentionTime(), coldMs);
    if (!c.isLive() || !c.isRewritable() || c.version >= store.getCurrentVersion() - 1 || c.time + cold > now || c.maxLen <= 0) return false;
    return livePermille(c) < targetFillRate * 10L;
  }

  @SuppressWarnings("unchecked")
  private MVMap<String, String> layout() {
    try {
      return (MVMap<String, String>) LAYOUT.get(store.getFileStore());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }
}
