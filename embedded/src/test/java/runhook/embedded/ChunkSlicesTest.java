package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.h2.mvstore.ChunkSlices;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sparse chunks written by large commits are emptied by slices of bounded size, each followed
 * by a commit, and what the maps hold is unchanged: the latest value of every key, on reopen too.
 */
class ChunkSlicesTest {
  private static MVStore open(String file) {
    MVStore store = new MVStore.Builder().fileName(file).autoCommitDisabled().autoCommitBufferSize(0).cacheSize(8).open();
    store.setRetentionTime(0);
    store.setVersionsToKeep(0); // a dead chunk is freed at the next commit
    return store;
  }

  @Test
  void slicesOfBoundedSizeEmptySparseChunksAndKeepEveryValue(@TempDir Path dir) throws Exception {
    String file = dir.resolve("db.mv").toString();
    Random random = new Random(7);
    Map<Long, String> expected = new HashMap<>();
    MVStore store = open(file);
    MVMap<Long, String> map = store.openMap("data");
    String pad = "x".repeat(200);
    // Large commits of random keys: chunks of several MB, then mostly overwritten (sparse).
    for (int round = 0; round < 20; round++) {
      for (int i = 0; i < 2000; i++) {
        long key = random.nextInt(20_000);
        String value = round + ":" + i + pad;
        map.put(key, value);
        expected.put(key, value);
      }
      store.commit();
    }
    int before = store.getFileStore().getChunksFillRate();
    assertTrue(before < 50, "the test needs sparse chunks to start with: " + before + "%");

    ChunkSlices slices = new ChunkSlices(store, 0, 0);
    long slice = 64 << 10;
    // A step out of time does nothing (writes wait for a step: it stops at its time limit too).
    assertEquals(0, slices.step(50, slice, 0));
    // Nor does a step limited to chunks less live than any is (the one writes wait for moves
    // only nearly dead chunks' pages); the chunk it stopped at is left for the next step.
    assertEquals(0, slices.step(50, 0, slice, Long.MAX_VALUE / 4));
    assertTrue(slices.step(50, 50, slice, Long.MAX_VALUE / 4) > 0, "a step up to 50 % moves pages");
    store.commit();
    long most = 0;
    int steps = 0;
    // (A chunk just walked is skipped until the versions that still hold its pages are gone:
    // a step can find nothing to do for a commit or two.)
    for (; store.getFileStore().getChunksFillRate() < 50 && steps < 1000; steps++) {
      most = Math.max(most, slices.step(50, slice, Long.MAX_VALUE / 4));
      store.commit();
      store.getFileStore().dropUnusedChunks(); // what the next commit of a busy store does
    }
    int after = store.getFileStore().getChunksFillRate();
    assertTrue(after >= 50, "chunks' live share after " + steps + " slices: " + after + "% (before: " + before + "%)");
    // A slice stops once over its size: by one page at most (a page here is well under 64 KB).
    assertTrue(most < 2 * slice, "largest slice: " + most + " bytes");
    assertEquals(expected.size(), map.size());
    for (Map.Entry<Long, String> e : expected.entrySet()) assertEquals(e.getValue(), map.get(e.getKey()));
    store.close();

    MVStore again = open(file);
    MVMap<Long, String> reopened = again.openMap("data");
    assertEquals(expected.size(), reopened.size());
    for (Map.Entry<Long, String> e : expected.entrySet()) assertEquals(e.getValue(), reopened.get(e.getKey()));
    again.close();
  }
}
