package org.h2.mvstore;

import java.lang.reflect.Field;
import java.util.Arrays;
import java.util.BitSet;

/**
 * H2's map of the file's free blocks, allocating exactly as H2's does (the first gap large
 * enough, from the file's start), without walking from the start every time. FreeSpaceBitSet
 * walks every gap from block 0 at each allocation, twice per commit (the chunk, and where the
 * next one will likely go): a file of a million runs (15 GB) has many gaps too small for a
 * chunk, and that walk took a tenth of the committing thread's time. This keeps, for each
 * size, a block before which every gap is smaller than that size, and starts the walk there;
 * freeing blocks moves back, to the start of the gap they join, the hints of the sizes that fit
 * in that gap. Allocations with a
 * reserved area (H2's own compaction, which runhook does not run) walk from the start as before.
 * The one thing not kept is H2's record of failed allocations (isFragmented), which only its
 * background compaction reads. Written against H2 2.3.232; HintedFreeSpaceTest (in this package)
 * checks that it allocates where FreeSpaceBitSet does.
 */
public final class HintedFreeSpace extends FreeSpaceBitSet {
  private static final Field SET;
  private static final Field FREE_SPACE;

  static {
    try {
      SET = FreeSpaceBitSet.class.getDeclaredField("set");
      SET.setAccessible(true);
      FREE_SPACE = RandomAccessStore.class.getDeclaredField("freeSpace");
      FREE_SPACE.setAccessible(true);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /**
   * A hint is kept for each size up to this many blocks (16 MB); a larger allocation (a bulk
   * write's chunk) starts at the largest size's hint, which holds for it too, and moves none.
   */
  private static final int HINTED_BLOCKS = 4096;

  private final int blockSize;
  /** FreeSpaceBitSet's own set of used blocks. */
  private final BitSet used;
  /** hints[n]: every gap with a block before it is smaller than n blocks (never decreasing in n). */
  private final int[] hints = new int[HINTED_BLOCKS + 1];

  public HintedFreeSpace(int firstFreeBlock, int blockSize) {
    super(firstFreeBlock, blockSize);
    this.blockSize = blockSize;
    try {
      used = (BitSet) SET.get(this);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Puts a HintedFreeSpace with the same used blocks in place of the store's map (before the store allocates again). */
  public static void install(MVStore store) {
    if (!(store.getFileStore() instanceof RandomAccessStore)) return;
    RandomAccessStore fileStore = (RandomAccessStore) store.getFileStore();
    try {
      FreeSpaceBitSet current = (FreeSpaceBitSet) FREE_SPACE.get(fileStore);
      if (current instanceof HintedFreeSpace) return;
      HintedFreeSpace hinted = new HintedFreeSpace(2, FileStore.BLOCK_SIZE); // as RandomAccessStore makes its own
      hinted.used.clear();
      hinted.used.or((BitSet) SET.get(current));
      FREE_SPACE.set(fileStore, hinted);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void clear() {
    super.clear();
    if (hints != null) Arrays.fill(hints, 0); // null while the parent's constructor clears
  }

  @Override
  long allocate(int length, long reservedLow, long reservedHigh) {
    if (reservedLow != 0 || reservedHigh != 0) return super.allocate(length, reservedLow, reservedHigh);
    int blocks = (int) ((length + (long) blockSize - 1) / blockSize);
    if (blocks <= 0) return super.allocate(length, reservedLow, reservedHigh);
    int start = firstFit(blocks);
    used.set(start, start + blocks);
    return (long) start * blockSize;
  }

  @Override
  long predictAllocation(int blocks, long reservedLow, long reservedHigh) {
    if (reservedLow != 0 || reservedHigh != 0 || blocks <= 0) return super.predictAllocation(blocks, reservedLow, reservedHigh);
    return firstFit(blocks);
  }

  @Override
  public void free(long pos, int length) {
    super.free(pos, length);
    int block = (int) (pos / blockSize);
    int gapStart = block == 0 ? 0 : used.previousSetBit(block - 1) + 1;
    // Only the sizes that fit in the gap this joins can start earlier; a larger size's hint
    // still holds (the gap is smaller than it). Lowering every size's hint made each chunk's
    // allocation walk again over the small gaps of a large file.
    int gapEnd = used.nextSetBit(gapStart);
    int fits = gapEnd < 0 ? HINTED_BLOCKS : Math.min(gapEnd - gapStart, HINTED_BLOCKS);
    for (int n = 0; n <= fits; n++) hints[n] = Math.min(hints[n], gapStart);
  }

  /** The first gap of at least `blocks` blocks (the free space after the last used block if none), as FreeSpaceBitSet finds it. */
  private int firstFit(int blocks) {
    int from = hints[Math.min(blocks, HINTED_BLOCKS)];
    for (int i = from;;) {
      int start = used.nextClearBit(i);
      int end = used.nextSetBit(start + 1);
      if (end < 0 || end - start >= blocks) {
        // Every gap before `start` is smaller than `blocks`, so smaller than any larger size too.
        if (blocks <= HINTED_BLOCKS) {
          for (int n = blocks; n <= HINTED_BLOCKS && hints[n] < start; n++) hints[n] = start;
        }
        return start;
      }
      i = end;
    }
  }
}
