package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.bson.Document;
import java.nio.ByteBuffer;
import java.time.Instant;
import org.h2.mvstore.WriteBuffer;
import org.junit.jupiter.api.Test;

/**
 * A page of index keys is written with the values each key shares with the one before it
 * left out, and read back exactly (the same classes: an Integer never comes back as a Long);
 * a page written before, of whole keys, is read as it was.
 */
class IndexKeyPagesTest {
  private static final KeyValue[] KEYS = {
    new KeyValue("env-1", "SUCCEEDED", Instant.ofEpochSecond(1, 5), "run-a"),
    new KeyValue("env-1", "SUCCEEDED", Instant.ofEpochSecond(1, 5), "run-b"),
    new KeyValue("env-1", "SUCCEEDED", 7, "run-c"),
    new KeyValue("env-1", "SUCCEEDED", 7L, "run-d"),
    new KeyValue("env-1", null, new Document("a", 1), "run-e"),
    new KeyValue("env-1", null, new Document("a", 1), "run-e", "more"),
    new KeyValue("env-1"),
    new KeyValue("env-2", -0.0, "x"),
    new KeyValue("env-2", 0.0, "x"),
  };

  private static KeyValue[] readBack(ByteBuffer buff) {
    KeyValue[] back = new KeyValue[KEYS.length];
    H2IndexEntries.KeyType.INSTANCE.read(buff, back, back.length);
    assertFalse(buff.hasRemaining());
    return back;
  }

  private static void assertSameKeys(KeyValue[] back) {
    assertArrayEquals(KEYS, back);
    for (int i = 0; i < KEYS.length; i++) {
      for (int j = 0; j < KEYS[i].size(); j++) {
        Object expected = KEYS[i].get(j), actual = back[i].get(j);
        assertEquals(expected == null ? null : expected.getClass(), actual == null ? null : actual.getClass(), "key " + i + " value " + j);
        assertEquals(expected, actual);
      }
    }
  }

  @Test
  void aPageOfKeysLeavesOutWhatEachSharesWithTheOneBefore() {
    WriteBuffer shared = new WriteBuffer();
    H2IndexEntries.KeyType.INSTANCE.write(shared, KEYS, KEYS.length);
    WriteBuffer whole = new WriteBuffer();
    for (KeyValue key : KEYS) ValueType.INSTANCE.write(whole, key);
    assertTrue(shared.position() < whole.position() * 3 / 4, shared.position() + " bytes against " + whole.position() + " whole");

    ByteBuffer written = shared.getBuffer();
    written.flip();
    assertSameKeys(readBack(written));
    Double negativeZero = (Double) readBackAgain(KEYS)[7].get(1);
    assertEquals(Double.doubleToRawLongBits(-0.0), Double.doubleToRawLongBits(negativeZero));
  }

  private static KeyValue[] readBackAgain(KeyValue[] keys) {
    WriteBuffer buff = new WriteBuffer();
    H2IndexEntries.KeyType.INSTANCE.write(buff, keys, keys.length);
    ByteBuffer written = buff.getBuffer();
    written.flip();
    return readBack(written);
  }

  @Test
  void aPageOfWholeKeysWrittenBeforeIsReadAsItWas() {
    WriteBuffer whole = new WriteBuffer();
    for (KeyValue key : KEYS) ValueType.INSTANCE.write(whole, key);
    ByteBuffer written = whole.getBuffer();
    written.flip();
    assertSameKeys(readBack(written));
  }

  @Test
  void stringsOfEveryWidthComeBackExactly() {
    // ASCII, Latin-1, two-byte and three-byte chars, a surrogate pair, a lone surrogate (which
    // UTF-8 would replace by '?'), and field names of each.
    String[] strings = {"", "run-0f3c", "a?b", "café", "Ωmega", "日本語", "\uD83D\uDE00", "x\uD800y", "\u007F\u0080"};
    for (String s : strings) {
      Document document = new Document(s, s).append("k" + s, new KeyValue(s, "id"));
      WriteBuffer buff = new WriteBuffer();
      ValueType.INSTANCE.write(buff, s);
      ValueType.INSTANCE.write(buff, document);
      H2IndexEntries.KeyType.INSTANCE.write(buff, new KeyValue[] {new KeyValue(s, 1), new KeyValue(s, 2)}, 2);
      ByteBuffer written = buff.getBuffer();
      written.flip();
      assertEquals(s, ValueType.INSTANCE.read(written));
      assertEquals(document, ValueType.INSTANCE.read(written));
      KeyValue[] keys = new KeyValue[2];
      H2IndexEntries.KeyType.INSTANCE.read(written, keys, 2);
      assertArrayEquals(new KeyValue[] {new KeyValue(s, 1), new KeyValue(s, 2)}, keys);
      assertFalse(written.hasRemaining());
    }
  }

  @Test
  void anEmptyPageWritesNothing() {
    WriteBuffer buff = new WriteBuffer();
    H2IndexEntries.KeyType.INSTANCE.write(buff, new KeyValue[0], 0);
    assertEquals(0, buff.position());
  }
}
