package org.h2.mvstore;

import java.lang.reflect.Field;
import java.util.function.Supplier;
import org.h2.mvstore.cache.CacheLongKeyLIRS;

/**
 * Leaf pages that a long read (a cursor's later batches: an export, a large result) reads from
 * the file are used and dropped, not put in the store's page cache, as databases read a scan
 * through a small ring instead of their buffer pool. Cached, every such page pushed out one in
 * use and lived on in the cache for a second or two (an export reads some 30 MB of pages a
 * second): the collector moved each to the old generation before it was evicted, and three
 * exports of 3 s at a million runs held the heap at 253-285 MB committed (104-180 MB used after
 * each collection), where now it stays at 128 MB (16-33 MB). A walk reads the leaf its next
 * documents share once ({@link LeafReads}; an index's leaves through MVMap's cursors), so a
 * walk in the documents' order reads nothing twice (the export: a stream's entries are stored
 * in about the order of their numbers); one that comes back to a leaf it left reads it again
 * from the file. Inner pages are cached as before. Installed by replacing the file store's
 * cache (its field is final: set by reflection, at open; the few pages opening read are read
 * again when next asked for), with H2's own settings (it sets only the size). Written against
 * H2 2.3.232.
 */
public final class ScanReads {
  private ScanReads() {}

  private static final ThreadLocal<Boolean> SCANNING = ThreadLocal.withInitial(() -> false);
  private static final Field CACHE;

  static {
    try {
      CACHE = FileStore.class.getDeclaredField("cache");
      CACHE.setAccessible(true);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Gives the store's file a page cache that leaves out the leaves of scans (a store without a cache: unchanged). */
  public static void install(MVStore store) {
    CacheLongKeyLIRS<Page<?, ?>> cache = cacheOf(store);
    if (cache == null || cache instanceof ScanResistantCache) return;
    CacheLongKeyLIRS.Config config = new CacheLongKeyLIRS.Config();
    config.maxMemory = cache.getMaxMemory();
    try {
      CACHE.set(store.getFileStore(), new ScanResistantCache(config));
    } catch (IllegalAccessException e) {
      throw new IllegalStateException("H2's FileStore.cache is not where ScanReads expects it", e);
    }
  }

  /** The page cache of the store's file (null: none). */
  static CacheLongKeyLIRS<Page<?, ?>> cacheOf(MVStore store) {
    return cacheOf(store.getFileStore());
  }

  /** The page cache of a file store (null: none). */
  @SuppressWarnings("unchecked")
  static CacheLongKeyLIRS<Page<?, ?>> cacheOf(FileStore<?> file) {
    try {
      return (CacheLongKeyLIRS<Page<?, ?>>) CACHE.get(file);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException("H2's FileStore.cache is not where ScanReads expects it", e);
    }
  }

  /** Runs a long read's step: the leaves it reads from the file are not cached. */
  public static <T> T during(Supplier<T> read) {
    if (SCANNING.get()) return read.get();
    SCANNING.set(true);
    try {
      return read.get();
    } finally {
      SCANNING.set(false);
    }
  }

  private static final class ScanResistantCache extends CacheLongKeyLIRS<Page<?, ?>> {
    ScanResistantCache(Config config) {
      super(config);
    }

    @Override
    public Page<?, ?> put(long key, Page<?, ?> value, long memory) {
      if (SCANNING.get() && value.isLeaf()) return null;
      return super.put(key, value, memory);
    }
  }
}
