package org.h2.mvstore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ScanReadsTest {
  @TempDir Path dir;

  /** A file of 5,000 entries in pages of 16 keys, reopened so that every page is only in the file. */
  private MVStore reopened() {
    String file = dir.resolve("scan.mv").toString();
    MVStore first = new MVStore.Builder().fileName(file).keysPerPage(16).open();
    MVMap<Long, String> map = first.openMap("m");
    for (long k = 0; k < 5_000; k++) map.put(k, "value " + k);
    first.close();
    MVStore store = new MVStore.Builder().fileName(file).keysPerPage(16).open();
    ScanReads.install(store);
    return store;
  }

  private static long cachedPages(MVStore store) {
    return ScanReads.cacheOf(store).size();
  }

  @Test
  void leavesReadDuringAScanAreNotCachedButTheSameReadsOutsideOneAre() {
    MVStore store = reopened();
    try {
      MVMap<Long, String> map = store.openMap("m");
      long before = cachedPages(store);
      String read = ScanReads.during(() -> {
        StringBuilder all = new StringBuilder();
        for (long k = 0; k < 5_000; k += 16) all.append(map.get(k));
        return all.toString();
      });
      assertTrue(read.startsWith("value 0value 16"), read.substring(0, 20));
      long byScan = cachedPages(store) - before;
      for (long k = 0; k < 5_000; k += 16) assertEquals("value " + k, map.get(k));
      long byReads = cachedPages(store) - before - byScan;
      // Appended in order, the leaves hold 8 keys (H2 splits a full one in half): the scan's
      // path to them caches some 70 inner pages, the same reads outside a scan the ~620 leaves too.
      assertTrue(byScan < 100, "pages cached by the scan: " + byScan);
      assertTrue(byReads > 300, "pages cached by the same reads outside a scan: " + byReads);
    } finally {
      store.close();
    }
  }

  @Test
  void installingTwiceKeepsOneCache() {
    MVStore store = reopened();
    try {
      Object cache = ScanReads.cacheOf(store);
      ScanReads.install(store);
      assertEquals(cache, ScanReads.cacheOf(store));
    } finally {
      store.close();
    }
  }
}
