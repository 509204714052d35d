package org.h2.mvstore;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;
import org.h2.mvstore.cache.CacheLongKeyLIRS;

/**
 * H2's file store, whose page cache lets go of a page once a write has replaced it. H2 keeps a
 * replaced page's cache entry until its whole chunk is dead: each checkpoint writes the pages
 * its writes changed (the inner pages above them and the last pages of every index that grows
 * at its end, most of them hot in the cache) at new positions, and their old versions stayed
 * hot there, never read again, while the new ones came in cold and were pushed out by the
 * next pages read. A reader of an older version (a cursor's snapshot) reads a replaced page
 * from the file, where it stays as long as that version is in use (or, while its chunk is
 * being written, from the chunk's buffer, as H2 reads any such page). Written against H2 2.3.232.
 *
 * <p>And whose writes (a chunk, the store's header) can be made again when they fail: H2 closes
 * the store at a failed write (MVStore.panic), and every read after it fails. {@link
 * #retryWritesWhile} decides, from the error, whether to make it again (runhook's DiskGuard waits
 * for space on a full disk). A chunk's write is made whole again at the same place; nothing
 * points to a chunk before it is written.
 */
public final class ReplacedPagesUncached extends SingleFileStore {
  private ReplacedPagesUncached(Map<String, Object> config) {
    super(config);
  }

  /** The store's file, opened with a page cache of `cacheMb`, for {@link MVStore.Builder#adoptFileStore}. */
  public static ReplacedPagesUncached open(String fileName, int cacheMb) {
    Map<String, Object> config = new HashMap<>();
    config.put("cacheSize", cacheMb);
    ReplacedPagesUncached store = new ReplacedPagesUncached(config);
    store.open(fileName, false, (char[]) null);
    return store;
  }

  /** Called with the error of a write that failed: true to make it again, false to fail it (H2 then closes the store). */
  private volatile Predicate<IOException> retryWrite = e -> false;

  public void retryWritesWhile(Predicate<IOException> retry) {
    retryWrite = retry;
  }

  @Override
  protected void writeFully(SFChunk chunk, long pos, ByteBuffer src) {
    int start = src.position();
    for (;;) {
      try {
        super.writeFully(chunk, pos, src);
        return;
      } catch (MVStoreException e) {
        if (!(e.getCause() instanceof IOException io) || !retryWrite.test(io)) throw e;
        src.position(start);
      }
    }
  }

  @Override
  public void accountForRemovedPage(long pos, long version, boolean pinned, int pageNo) {
    super.accountForRemovedPage(pos, version, pinned, pageNo);
    // Looked up each time: ScanReads puts its cache in place of H2's after the store opens.
    CacheLongKeyLIRS<?> cache = ScanReads.cacheOf(this);
    if (cache != null) cache.remove(pos);
  }
}
