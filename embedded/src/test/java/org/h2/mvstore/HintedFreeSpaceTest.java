package org.h2.mvstore;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** In H2's package: allocate(length, low, high) and predictAllocation are package-private. */
class HintedFreeSpaceTest {
  private static final int BLOCK = FileStore.BLOCK_SIZE;

  @Test
  void allocatesWhereFreeSpaceBitSetDoesThroughManyAllocationsAndFrees() {
    FreeSpaceBitSet plain = new FreeSpaceBitSet(2, BLOCK);
    HintedFreeSpace hinted = new HintedFreeSpace(2, BLOCK);
    Random random = new Random(11);
    List<long[]> allocated = new ArrayList<>(); // position, length
    for (int op = 0; op < 50_000; op++) {
      int kind = random.nextInt(10);
      if (kind < 5 || allocated.isEmpty()) {
        // Mostly chunk-sized (a few blocks to a few hundred), now and then a bulk write's chunk.
        int length = random.nextInt(20) == 0 ? (5000 + random.nextInt(3000)) * BLOCK : 1 + random.nextInt(random.nextBoolean() ? 8 * BLOCK : 300 * BLOCK);
        long at = plain.allocate(length, 0, 0);
        assertEquals(at, hinted.allocate(length, 0, 0), "allocation " + op + " of " + length + " bytes");
        allocated.add(new long[] {at, length});
      } else if (kind < 9) {
        long[] a = allocated.remove(random.nextInt(allocated.size()));
        plain.free(a[0], (int) a[1]);
        hinted.free(a[0], (int) a[1]);
      } else {
        int blocks = 1 + random.nextInt(400);
        assertEquals(plain.predictAllocation(blocks, 0, 0), hinted.predictAllocation(blocks, 0, 0), "prediction " + op + " of " + blocks + " blocks");
      }
      if (op % 1000 == 0) {
        assertEquals(plain.getFillRate(), hinted.getFillRate());
        assertEquals(plain.getFirstFree(), hinted.getFirstFree());
        assertEquals(plain.getLastFree(), hinted.getLastFree());
      }
    }
    // A reserved area (H2's compaction) is kept out of as before.
    long low = 10;
    long high = 5000;
    assertEquals(plain.allocate(3 * BLOCK, low, high), hinted.allocate(3 * BLOCK, low, high));
    assertEquals(plain.predictAllocation(7, low, -1), hinted.predictAllocation(7, low, -1));
  }

  @Test
  void installedInAStoreKeepsEveryValueAcrossCommitsAndAReopen(@TempDir Path dir) throws Exception {
    String file = dir.resolve("db.mv").toString();
    Map<Integer, String> expected = new HashMap<>();
    Random random = new Random(5);
    MVStore store = new MVStore.Builder().fileName(file).autoCommitDisabled().autoCommitBufferSize(0).cacheSize(8).open();
    store.setRetentionTime(0);
    store.setVersionsToKeep(0);
    MVMap<Integer, String> map = store.openMap("data");
    for (int i = 0; i < 2000; i++) map.put(i, "before" + i);
    store.commit();
    HintedFreeSpace.install(store);
    assertTrue(((RandomAccessStore) store.getFileStore()).freeSpace instanceof HintedFreeSpace);
    for (int i = 0; i < 2000; i++) expected.put(i, "before" + i);
    // Many small commits over older data: chunks die and their space is allocated again.
    for (int round = 0; round < 400; round++) {
      for (int i = 0; i < 20; i++) {
        int key = random.nextInt(3000);
        String value = round + ":" + i + "x".repeat(random.nextInt(400));
        map.put(key, value);
        expected.put(key, value);
      }
      store.commit();
    }
    store.close();
    MVStore again = new MVStore.Builder().fileName(file).open();
    MVMap<Integer, String> reopened = again.openMap("data");
    assertEquals(expected.size(), reopened.size());
    for (Map.Entry<Integer, String> e : expected.entrySet()) assertEquals(e.getValue(), reopened.get(e.getKey()));
    again.close();
  }
}
