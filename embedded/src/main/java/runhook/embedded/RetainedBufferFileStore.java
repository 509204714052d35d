package runhook.embedded;

import java.util.Map;
import org.h2.mvstore.SingleFileStore;
import org.h2.mvstore.WriteBuffer;

/**
 * H2's single-file store, but the buffer a checkpoint's chunk is serialized into is kept at the
 * largest size a chunk has needed (up to {@link #MAX_RETAINED_BYTES}). H2 grows that buffer by
 * half at a time as a chunk fills it and drops it afterwards once over 4 MB, so that every chunk
 * larger than 4 MB (checkpoints of several MB of pages, bulk inserts, a retention sweep) allocated
 * a series of ever larger arrays, each of them a humongous object for G1, and the heap grew to
 * hold them: the Java process's RSS reached 398 MB at a million runs with checkpoints of 8 MB
 * (bench --grow), 261 MB with 2 MB. Kept, the buffer costs its size once.
 */
final class RetainedBufferFileStore extends SingleFileStore {
  static final int MAX_RETAINED_BYTES = 32 << 20;
  /** H2's WriteBuffer keeps the array it was made with through clear(), and drops a grown one if over this. */
  private static final int H2_REUSED_BYTES = 4 << 20;

  private WriteBuffer spare;

  RetainedBufferFileStore(Map<String, Object> config) {
    super(config);
  }

  @Override
  public synchronized WriteBuffer getWriteBuffer() {
    WriteBuffer buffer = spare;
    spare = null;
    return buffer == null ? new WriteBuffer() : buffer.clear();
  }

  @Override
  public synchronized void releaseWriteBuffer(WriteBuffer buffer) {
    int capacity = buffer.capacity();
    if (capacity > H2_REUSED_BYTES && capacity <= MAX_RETAINED_BYTES) {
      // It grew past what its clear() keeps: made again at this size, its first array is the one it keeps.
      buffer = new WriteBuffer(capacity);
    } else if (capacity > MAX_RETAINED_BYTES && spare != null) {
      return; // larger than is kept: the one before stays
    }
    spare = buffer;
  }
}
