package org.h2.mvstore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LeafReadsTest {
  @TempDir Path dir;

  /** Every other key of 0..20,000 in pages of 8 keys (many leaves, three levels), committed. */
  private MVStore storeWithGaps() {
    MVStore store = new MVStore.Builder().fileName(dir.resolve("leaves.mv").toString()).keysPerPage(8).open();
    MVMap<Long, String> map = store.openMap("m");
    for (long k = 0; k <= 20_000; k += 2) map.put(k, "v" + k);
    store.commit();
    return store;
  }

  @Test
  void answersAsTheMapDoesInOrderBackwardsAndAtRandom() {
    MVStore store = storeWithGaps();
    try {
      MVMap<Long, String> map = store.openMap("m");
      LeafReads<Long, String> reads = new LeafReads<>(map);
      // In order (the walk's usual case), present and absent keys, and past both ends.
      for (long k = -3; k <= 20_003; k++) assertEquals(map.get(k), reads.get(k), "key " + k);
      for (long k = 20_003; k >= -3; k--) assertEquals(map.get(k), reads.get(k), "key " + k + " backwards");
      Random random = new Random(7);
      for (int i = 0; i < 20_000; i++) {
        long k = random.nextInt(20_010) - 5;
        assertEquals(map.get(k), reads.get(k), "key " + k + " at random");
      }
    } finally {
      store.close();
    }
  }

  @Test
  void seesWritesMadeAfterItsLastLeaf() {
    MVStore store = storeWithGaps();
    try {
      MVMap<Long, String> map = store.openMap("m");
      LeafReads<Long, String> reads = new LeafReads<>(map);
      assertEquals("v100", reads.get(100L));
      assertNull(reads.get(101L));
      map.put(101L, "new");
      map.put(100L, "changed");
      map.remove(102L);
      assertEquals("new", reads.get(101L));
      assertEquals("changed", reads.get(100L));
      assertNull(reads.get(102L));
    } finally {
      store.close();
    }
  }
}
