package org.h2.mvstore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReplacedPagesUncachedTest {
  @TempDir Path dir;

  /** 5,000 entries in pages of 16 keys, committed: every page is saved and in the cache. */
  private static MVMap<Long, String> filled(MVStore store) {
    MVMap<Long, String> map = store.openMap("m");
    for (long k = 0; k < 5_000; k++) map.put(k, "value " + k);
    store.commit();
    return map;
  }

  /** The saved positions of the leaves that hold every 100th key. */
  private static List<Long> leavesOfEvery100th(MVMap<Long, String> map) {
    List<Long> positions = new ArrayList<>();
    for (long k = 0; k < 5_000; k += 100) positions.add(CursorPos.traverseDown(map.getRootPage(), k).page.getPos());
    return positions;
  }

  private static void rewriteEvery100th(MVMap<Long, String> map) {
    for (long k = 0; k < 5_000; k += 100) map.put(k, "changed " + k);
  }

  @Test
  void aPageReplacedByAWriteLeavesTheCacheAtOnce() {
    MVStore store = new MVStore.Builder().adoptFileStore(ReplacedPagesUncached.open(dir.resolve("a.mv").toString(), 8)).keysPerPage(16).open();
    try {
      MVMap<Long, String> map = filled(store);
      List<Long> replaced = leavesOfEvery100th(map);
      for (long pos : replaced) assertTrue(ScanReads.cacheOf(store).containsKey(pos), "a saved leaf is cached");
      rewriteEvery100th(map);
      for (long pos : replaced) assertFalse(ScanReads.cacheOf(store).containsKey(pos), "a replaced leaf is cached: " + pos);
      store.commit();
      for (long k = 0; k < 5_000; k += 100) assertEquals("changed " + k, map.get(k));
      assertEquals("value 1", map.get(1L));
    } finally {
      store.close();
    }
  }

  @Test
  void h2sOwnFileStoreKeepsThem() {
    MVStore store = new MVStore.Builder().fileName(dir.resolve("b.mv").toString()).cacheSize(8).keysPerPage(16).open();
    try {
      MVMap<Long, String> map = filled(store);
      List<Long> replaced = leavesOfEvery100th(map);
      rewriteEvery100th(map);
      for (long pos : replaced) assertTrue(ScanReads.cacheOf(store).containsKey(pos), "H2 dropped a replaced leaf: " + pos);
    } finally {
      store.close();
    }
  }

  @Test
  void theCacheThatScanReadsPutsInPlaceIsTheOneItDropsFrom() {
    MVStore store = new MVStore.Builder().adoptFileStore(ReplacedPagesUncached.open(dir.resolve("c.mv").toString(), 8)).keysPerPage(16).open();
    try {
      ScanReads.install(store);
      MVMap<Long, String> map = filled(store);
      List<Long> replaced = leavesOfEvery100th(map);
      for (long pos : replaced) assertTrue(ScanReads.cacheOf(store).containsKey(pos), "a saved leaf is cached");
      rewriteEvery100th(map);
      for (long pos : replaced) assertFalse(ScanReads.cacheOf(store).containsKey(pos), "a replaced leaf is cached: " + pos);
    } finally {
      store.close();
    }
  }
}
