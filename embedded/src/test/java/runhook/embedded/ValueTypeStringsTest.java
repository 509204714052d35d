package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Random;
import org.h2.mvstore.DataUtils;
import org.h2.mvstore.WriteBuffer;
import org.junit.jupiter.api.Test;

/**
 * Strings are written byte for byte as H2's putStringData writes them (files written before
 * read alike), and read back exactly, whether ASCII (copied whole) or not (a char at a time).
 */
class ValueTypeStringsTest {
  private static final String[] ALPHABETS = {
    "abcXYZ019-_.:@", "\u0000\u007f", "éüß\u00a0\u00ff", "€\u0800\uffff漢字", "\ud83d\ude00\ud800", "\u0080\u07ff",
  };

  private static String randomString(Random random) {
    // Some around the scratch array's 4,096 bytes, on both sides.
    int length = random.nextInt(4) == 0 ? 0 : random.nextInt(50) == 0 ? 4000 + random.nextInt(200) : random.nextInt(80);
    String alphabet = ALPHABETS[0] + (random.nextBoolean() ? "" : ALPHABETS[1 + random.nextInt(ALPHABETS.length - 1)]);
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < length; i++) s.append(alphabet.charAt(random.nextInt(alphabet.length())));
    return s.toString();
  }

  private static byte[] bytes(WriteBuffer buff) {
    ByteBuffer b = buff.getBuffer();
    return Arrays.copyOf(b.array(), b.position());
  }

  @Test
  void writtenAsH2WritesThemAndReadBackExactly() {
    Random random = new Random(5);
    for (int n = 0; n < 20_000; n++) {
      String s = randomString(random);
      WriteBuffer ours = new WriteBuffer();
      ValueType.writeString(ours, s);
      WriteBuffer h2 = new WriteBuffer();
      h2.putVarInt(s.length()).putStringData(s, s.length());
      byte[] written = bytes(ours);
      assertArrayEquals(bytes(h2), written, s);

      // Followed by another value, from a heap buffer at an offset and from a direct one.
      byte[] padded = new byte[written.length + 3];
      System.arraycopy(written, 0, padded, 2, written.length);
      padded[padded.length - 1] = 42;
      ByteBuffer heap = ByteBuffer.wrap(padded, 2, padded.length - 2).slice();
      assertEquals(s, ValueType.readString(heap));
      assertEquals(42, heap.get());
      ByteBuffer direct = ByteBuffer.allocateDirect(written.length + 1).put(written).put((byte) 42).flip();
      assertEquals(s, ValueType.readString(direct));
      assertEquals(42, direct.get());
      assertEquals(s, DataUtils.readString(ByteBuffer.wrap(written)));
    }
  }
}
