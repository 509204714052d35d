package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.bson.Decimal128;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import java.math.BigDecimal;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * FieldPath reads what mongo-java-server's Utils reads at the same path, and IndexOrder's
 * normalization gives what KeyValue's gives, over random nested documents, arrays and values of
 * every kind: the index keys they compute must be the keys the unique indexes and the queries
 * compare with.
 */
class FieldPathTest {
  private static final String[] FIELDS = {"a", "b", "c", "0", "1"};
  private static final List<String> PATHS =
      List.of("a", "b", "a.b", "a.c", "a.b.c", "b.a.c", "a.0", "a.1.b", "a.0.b.c", "c.b.a.0", "x", "a.x.y", "");

  @Test
  void readsWhatUtilsReadsAtEveryPath() {
    Random random = new Random(42);
    int compared = 0;
    for (int i = 0; i < 5_000; i++) {
      Document document = document(random, 3);
      for (String path : PATHS) {
        assertEquals(Utils.getSubdocumentValueCollectionAware(document, path), new FieldPath(path).valueIn(document), path + " in " + document);
        compared++;
      }
    }
    assertEquals(5_000 * PATHS.size(), compared);
  }

  @Test
  void refusesWhatUtilsRefuses() {
    Document document = new Document("a", new Document("b", 1));
    for (String path : List.of("a.", ".a", "a..b")) {
      MongoServerError expected = assertThrows(MongoServerError.class, () -> Utils.getSubdocumentValueCollectionAware(document, path));
      MongoServerError error = assertThrows(MongoServerError.class, () -> new FieldPath(path).valueIn(document));
      assertEquals(expected.getMessage(), error.getMessage());
    }
  }

  @Test
  void normalizesAsKeyValueDoes() {
    List<Object> values = new ArrayList<>(Arrays.asList(
        null, Missing.getInstance(), "s", "", true, false, Instant.ofEpochMilli(1), UUID.randomUUID(),
        0, -0.0, 0.0, 1, -7, 3L, Long.MAX_VALUE, Long.MIN_VALUE, (1L << 53) + 1, 1L << 53, 2.5, Double.NaN,
        Double.NEGATIVE_INFINITY, 1.5f, (short) 4, (byte) 5, new Decimal128(new BigDecimal("1.25")),
        new Document("x", 1).append("y", List.of(2L, "z")), List.of(1, 2.0, List.of(3L)), Collections.emptyList()));
    Random random = new Random(7);
    for (int i = 0; i < 200; i++) values.add(value(random, 2));
    for (Object v : values) {
      Object expected = v instanceof Missing ? null : new KeyValue(Collections.singletonList(v)).normalized().get(0);
      Object actual = IndexOrder.normalize(v);
      assertEquals(expected, actual, String.valueOf(v));
      if (expected != null) assertEquals(expected.getClass(), actual.getClass(), String.valueOf(v));
    }
  }

  private static Document document(Random random, int depth) {
    Document document = new Document();
    for (String field : FIELDS) {
      if (random.nextInt(3) == 0) document.put(field, value(random, depth));
    }
    return document;
  }

  private static Object value(Random random, int depth) {
    int kind = random.nextInt(depth > 0 ? 9 : 6);
    return switch (kind) {
      case 0 -> null;
      case 1 -> random.nextInt(5);
      case 2 -> "v" + random.nextInt(5);
      case 3 -> random.nextLong();
      case 4 -> random.nextBoolean() ? -0.0 : random.nextDouble();
      case 5 -> Instant.ofEpochSecond(random.nextInt(1000));
      case 6, 7 -> document(random, depth - 1);
      default -> {
        List<Object> list = new ArrayList<>();
        int n = random.nextInt(4);
        for (int i = 0; i < n; i++) list.add(random.nextBoolean() ? document(random, depth - 1) : value(random, depth - 1));
        yield list;
      }
    };
  }
}
