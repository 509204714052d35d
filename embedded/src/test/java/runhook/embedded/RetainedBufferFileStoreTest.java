package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.h2.mvstore.WriteBuffer;
import org.junit.jupiter.api.Test;

/** The chunk serialization buffer is kept at the largest size a chunk needed, up to a bound; the store works as H2's own. */
class RetainedBufferFileStoreTest {
  private static RetainedBufferFileStore store() {
    return new RetainedBufferFileStore(new HashMap<>(Map.of("cacheSize", 1)));
  }

  private static WriteBuffer filled(WriteBuffer buffer, int bytes) {
    buffer.put(new byte[bytes]);
    return buffer;
  }

  @Test
  void aBufferThatGrewPastWhatH2KeepsIsKeptAtThatSize() {
    RetainedBufferFileStore file = store();
    WriteBuffer first = filled(file.getWriteBuffer(), 6 << 20);
    int grown = first.capacity();
    assertTrue(grown >= 6 << 20, "grew to " + grown);
    file.releaseWriteBuffer(first);
    WriteBuffer next = file.getWriteBuffer();
    assertEquals(0, next.position(), "handed out empty");
    assertEquals(grown, next.capacity(), "kept at the size the chunk needed");
    // Filled again to the same size: no new array.
    java.nio.ByteBuffer array = next.getBuffer();
    filled(next, 6 << 20);
    assertSame(array, next.getBuffer());
    file.releaseWriteBuffer(next);
    assertEquals(grown, file.getWriteBuffer().capacity(), "still kept after a clear");
  }

  @Test
  void aBufferLargerThanTheBoundIsNotKept() {
    RetainedBufferFileStore file = store();
    WriteBuffer small = file.getWriteBuffer();
    WriteBuffer huge = filled(file.getWriteBuffer(), RetainedBufferFileStore.MAX_RETAINED_BYTES + 1);
    file.releaseWriteBuffer(small);
    file.releaseWriteBuffer(huge);
    assertSame(small, file.getWriteBuffer(), "the one before stays");
  }

  @Test
  void theStoreWritesAndReadsAsH2sOwn() throws Exception {
    Path dir = Files.createTempDirectory("retained-buffer");
    String name = dir.resolve("db.mv").toString();
    Random random = new Random(7);
    byte[] value = new byte[4096];
    for (int round = 0; round < 2; round++) {
      RetainedBufferFileStore file = store();
      file.open(name, false, null);
      MVStore store = new MVStore.Builder().adoptFileStore(file).autoCommitDisabled().open();
      MVMap<Integer, byte[]> map = store.openMap("m");
      if (round == 0) {
        // A chunk of some 8 MB: serialized into a grown buffer, which is then kept.
        for (int i = 0; i < 2000; i++) {
          random.nextBytes(value);
          value[0] = (byte) i;
          map.put(i, value.clone());
        }
        store.commit();
        assertTrue(file.getWriteBuffer().capacity() > 4 << 20, "kept after the chunk");
      } else {
        assertEquals(2000, map.size());
        for (int i = 0; i < 2000; i++) assertEquals((byte) i, map.get(i)[0]);
      }
      store.close();
    }
  }
}
