package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.mongodb.MongoCommandException;
import com.mongodb.MongoQueryException;
import com.mongodb.MongoWriteException;
import com.mongodb.client.FindIterable;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.CountOptions;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Updates;
import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.bson.Document;
import org.bson.conversions.Bson;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Indexed queries answer exactly what a scan answers (the same documents, in the same order),
 * on both backends, and read only what their index plan needs; the scan guard refuses what no
 * index serves. Every query runs on two collections holding the same documents: one with
 * indexes, one without (which scans).
 */
class IndexedQueriesTest {
  private static final Date T0 = new Date(1_700_000_000_000L);
  private MongoServer server;
  private MongoClient client;
  @TempDir Path dir;

  private MongoDatabase start(String backend) throws Exception {
    MongoBackend b = backend.equals("memory") ? new IndexedMemoryBackend() : FastH2Backend.open(dir.resolve("db.mv").toString());
    server = new MongoServer(b);
    server.bind(new InetSocketAddress("127.0.0.1", 0));
    client = MongoClients.create("mongodb://127.0.0.1:" + server.getLocalAddress().getPort());
    return client.getDatabase("t");
  }

  private void stop() {
    if (client != null) client.close();
    if (server != null) server.shutdownNow();
    client = null;
    server = null;
  }

  @AfterEach
  void tearDown() throws Exception {
    ScanGuard.set(false);
    stop();
  }

  private static List<Document> documents() {
    Random random = new Random(42);
    List<Document> docs = new ArrayList<>();
    String[] states = {"QUEUED", "RUNNING", "SUCCEEDED"};
    for (int i = 0; i < 1500; i++) {
      Document d = new Document("_id", String.format("d%05d", i)).append("env", "e" + (i % 5));
      // numbers of three BSON types, compared by value
      d.append("seq", i % 3 == 0 ? (Object) (double) i : i % 3 == 1 ? (Object) (long) i : (Object) i);
      d.append("ts", new Date(T0.getTime() + random.nextInt(1_000_000)));
      int s = random.nextInt(5);
      if (s < 3) d.append("state", states[s]);
      else if (s == 3) d.append("state", null); // and s == 4: missing
      if (random.nextInt(4) > 0) d.append("user", new Document("id", "u" + random.nextInt(7)).append("email", "u@x"));
      Object[] mixed = {random.nextInt(10), "m" + random.nextInt(30), new Date(T0.getTime() + random.nextInt(100)), null, true, 2.5};
      int m = random.nextInt(mixed.length + 1);
      if (m < mixed.length) d.append("mixed", mixed[m]);
      if (random.nextBoolean()) d.append("tags", random.nextBoolean() ? List.of("t" + random.nextInt(4), "t" + random.nextInt(4)) : List.of());
      docs.add(d);
    }
    return docs;
  }

  private record Q(Bson filter, Bson sort, int skip, int limit) {}

  private static List<Q> queries() {
    return List.of(
        new Q(Filters.eq("env", "e2"), new Document("seq", 1), 0, 10),
        new Q(Filters.and(Filters.eq("env", "e2"), Filters.gt("seq", 100), Filters.lte("seq", 900)), new Document("seq", -1), 3, 7),
        new Q(Filters.in("env", "e1", "e3"), new Document("seq", 1), 0, 0),
        new Q(Filters.and(Filters.eq("state", "QUEUED"), Filters.lt("ts", new Date(T0.getTime() + 500_000))), new Document("ts", 1).append("_id", 1), 0, 25),
        new Q(Filters.eq("state", null), new Document("_id", 1), 0, 0),
        new Q(Filters.eq("user.id", "u3"), new Document("seq", -1), 0, 0),
        new Q(Filters.gt("mixed", 5), new Document("_id", 1), 0, 0),
        new Q(Filters.lt("mixed", "m2"), new Document("_id", 1), 0, 0),
        new Q(Filters.gte("mixed", new Date(T0.getTime() + 50)), new Document("_id", 1), 0, 0),
        new Q(Filters.eq("tags", "t2"), new Document("_id", 1), 0, 0),
        new Q(Filters.in("tags", "t1", "t3"), new Document("_id", -1), 0, 5),
        new Q(new Document(), new Document("_id", -1), 0, 5),
        new Q(Filters.and(Filters.gt("_id", "d01000"), Filters.lt("_id", "d01500")), new Document("_id", 1), 0, 20),
        // Ranges that hold nothing (a lower bound above the upper one): no answer, no error.
        new Q(Filters.and(Filters.eq("env", "e2"), Filters.gte("seq", 500), Filters.lt("seq", 400)), new Document("seq", 1), 0, 0),
        new Q(Filters.and(Filters.gte("_id", "d01500"), Filters.lt("_id", "d01000")), new Document("_id", -1), 0, 0),
        new Q(Filters.and(Filters.eq("state", "QUEUED"), Filters.gte("ts", new Date(T0.getTime() + 9)), Filters.lt("ts", T0)), null, 0, 0),
        new Q(Filters.and(Filters.eq("env", "e1"), Filters.gte("seq", 5.0)), new Document("seq", 1), 0, 0),
        new Q(new Document("$and", List.of(new Document("env", "e4"), new Document("seq", new Document("$lt", 50)))), new Document("seq", 1), 0, 0),
        new Q(Filters.in("seq", List.of()), null, 0, 0),
        new Q(Filters.and(Filters.eq("env", "e1"), Filters.ne("state", "RUNNING")), new Document("seq", -1), 0, 0),
        new Q(Filters.and(Filters.eq("state", "RUNNING"), Filters.exists("user", false)), new Document("ts", -1).append("_id", -1), 0, 0),
        new Q(Filters.eq("seq", 7), null, 0, 0),
        // `_id` pinned: its index, whatever else the query asks (the match decides).
        new Q(Filters.and(Filters.eq("_id", "d00042"), Filters.eq("env", "e2")), new Document("ts", -1), 0, 0),
        new Q(Filters.and(Filters.in("_id", "d00041"), Filters.eq("env", "e2")), null, 0, 0),
        new Q(Filters.and(Filters.eq("_id", "d00043"), Filters.gt("seq", 1)), new Document("seq", 1), 0, 1));
  }

  private static List<Document> run(MongoCollection<Document> c, Q q) {
    // In batches of 7: a query in index order is then read batch by batch (StreamingCursor).
    FindIterable<Document> f = c.find(q.filter()).skip(q.skip()).limit(q.limit()).batchSize(7);
    if (q.sort() != null) f = f.sort(q.sort());
    return f.into(new ArrayList<>());
  }

  private static void assertSameAnswers(MongoCollection<Document> indexed, MongoCollection<Document> plain) {
    for (Q q : queries()) {
      List<Document> expected = run(plain, q);
      List<Document> actual = run(indexed, q);
      if (q.sort() == null) {
        expected.sort((a, b) -> a.getString("_id").compareTo(b.getString("_id")));
        actual.sort((a, b) -> a.getString("_id").compareTo(b.getString("_id")));
      }
      assertEquals(ids(expected), ids(actual), "find " + q);
      assertEquals(plain.countDocuments(q.filter()), indexed.countDocuments(q.filter()), "countDocuments " + q.filter());
      CountOptions page = new CountOptions().skip(q.skip()).limit(q.limit());
      assertEquals(plain.countDocuments(q.filter(), page), indexed.countDocuments(q.filter(), page), "countDocuments " + q.filter() + " " + page);
    }
  }

  private static List<String> ids(List<Document> docs) {
    return docs.stream().map(d -> d.getString("_id")).toList();
  }

  private static MongoCollection<Document> indexed(MongoDatabase db) {
    MongoCollection<Document> c = db.getCollection("indexed");
    c.createIndex(Indexes.ascending("env", "seq"));
    c.createIndex(Indexes.ascending("state", "ts"));
    c.createIndex(Indexes.ascending("user.id", "seq"));
    c.createIndex(Indexes.ascending("mixed"));
    c.createIndex(Indexes.ascending("tags"));
    return c;
  }

  /** A server whose "indexed" collection (with indexes) and "plain" one (without) hold the same documents. */
  private MongoDatabase startWithDocuments(String backend) throws Exception {
    MongoDatabase db = start(backend);
    indexed(db).insertMany(documents());
    db.getCollection("plain").insertMany(documents());
    return db;
  }

  private static Document explain(MongoDatabase db, String collection, Bson filter, Bson sort, int limit) {
    Document find = new Document("find", collection).append("filter", filter.toBsonDocument());
    if (sort != null) find.append("sort", sort);
    if (limit > 0) find.append("limit", limit);
    return db.runCommand(new Document("explain", find));
  }

  private static String indexName(Document explained) {
    Document plan = explained.get("queryPlanner", Document.class).get("winningPlan", Document.class);
    return plan.getString("stage").equals("FETCH") ? plan.get("inputStage", Document.class).getString("indexName") : plan.getString("stage");
  }

  private static long docsExamined(Document explained) {
    return ((Number) explained.get("executionStats", Document.class).get("totalDocsExamined")).longValue();
  }

  @ParameterizedTest
  @ValueSource(strings = {"memory", "file"})
  void indexedQueriesAnswerWhatAScanAnswers(String backend) throws Exception {
    MongoDatabase db = start(backend);
    MongoCollection<Document> indexed = indexed(db);
    MongoCollection<Document> plain = db.getCollection("plain");
    List<Document> docs = documents();
    indexed.insertMany(docs.subList(0, 700)); // some before, some after the index exists
    plain.insertMany(docs.subList(0, 700));
    indexed.insertMany(docs.subList(700, docs.size()));
    plain.insertMany(docs.subList(700, docs.size()));
    assertSameAnswers(indexed, plain);

    for (MongoCollection<Document> c : List.of(indexed, plain)) {
      c.updateMany(Filters.eq("env", "e3"), Updates.combine(Updates.set("env", "e6"), Updates.set("state", "RUNNING")));
      c.updateMany(Filters.eq("state", "QUEUED"), Updates.unset("user"));
      c.updateOne(Filters.eq("_id", "d00010"), Updates.set("tags", List.of("t2", "t9")));
      c.deleteMany(Filters.lt("seq", 100));
    }
    assertSameAnswers(indexed, plain);

    if (backend.equals("file")) {
      stop();
      db = start(backend);
      assertSameAnswers(db.getCollection("indexed"), db.getCollection("plain"));
      Document validate = db.runCommand(new Document("validate", "indexed"));
      long records = ((Number) validate.get("nrecords")).longValue();
      Document keys = validate.get("keysPerIndex", Document.class);
      assertEquals(records, ((Number) keys.get("env_1_seq_1")).longValue(), "one entry per document after a restart");
      assertEquals(records, ((Number) keys.get("_id_")).longValue());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"memory", "file"})
  void explainNamesTheIndexAndALimitStopsTheWalk(String backend) throws Exception {
    MongoDatabase db = startWithDocuments(backend);

    Document page = explain(db, "indexed", Filters.and(Filters.eq("env", "e2"), Filters.gt("seq", 10)), new Document("seq", -1), 10);
    assertEquals("env_1_seq_1", indexName(page));
    assertEquals(10, docsExamined(page), "a sorted page reads what it returns");
    assertEquals("backward", page.get("queryPlanner", Document.class).get("winningPlan", Document.class).get("inputStage", Document.class).get("direction"));

    Document range = explain(db, "indexed", Filters.and(Filters.gt("_id", "d01000"), Filters.lt("_id", "d01500")), new Document("_id", 1), 20);
    assertEquals("_id_", indexName(range));
    assertEquals(20, docsExamined(range));

    Document pinned = explain(db, "indexed", Filters.and(Filters.eq("_id", "d00042"), Filters.eq("env", "e2")), null, 0);
    assertEquals("_id_", indexName(pinned), "a unique index pinned by equality wins");

    Document claim = explain(db, "indexed", Filters.and(Filters.eq("state", "QUEUED"), Filters.lt("ts", new Date(T0.getTime() + 500_000))), new Document("ts", 1), 1);
    assertEquals("state_1_ts_1", indexName(claim));
    assertEquals(1, docsExamined(claim));

    // A time range that the stream's first entries match: the walk in `seq` order finds its page
    // at once, though counting favours the time index (fewer entries in range than in the stream).
    MongoCollection<Document> stream = db.getCollection("stream");
    stream.createIndex(Indexes.ascending("env", "seq"));
    stream.createIndex(Indexes.ascending("env", "ts"));
    List<Document> entries = new ArrayList<>();
    for (int i = 0; i < 1000; i++) entries.add(new Document("_id", i).append("env", "e").append("seq", i).append("ts", new Date(T0.getTime() + (i < 100 || i >= 900 ? 1_000_000 : i))));
    stream.insertMany(entries);
    Bson recent = Filters.and(Filters.eq("env", "e"), Filters.gte("ts", new Date(T0.getTime() + 1_000_000)));
    Document raced = explain(db, "stream", recent, new Document("seq", 1), 10);
    assertEquals("env_1_seq_1", indexName(raced));
    assertTrue(docsExamined(raced) <= 20, "the walk in seq order read " + docsExamined(raced));
    assertEquals(List.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), stream.find(recent).sort(new Document("seq", 1)).limit(10).map(d -> d.getInteger("_id")).into(new ArrayList<>()));
    Document narrow = explain(db, "stream", Filters.and(Filters.eq("env", "e"), Filters.gte("ts", new Date(T0.getTime() + 1_000_000)), Filters.gt("seq", 500)), new Document("seq", 1), 10);
    assertEquals("env_1_ts_1", indexName(narrow), "where the walk in seq order would read past its budget, the time index serves");

    Document scan = explain(db, "plain", Filters.eq("env", "e2"), null, 0);
    assertEquals("COLLSCAN", indexName(scan));
    assertEquals(1500, docsExamined(scan));
  }

  /** explain of the aggregation countDocuments sends for `filter`. */
  private static Document explainCount(MongoDatabase db, String collection, Bson filter) {
    List<Document> pipeline = List.of(new Document("$match", filter.toBsonDocument()), new Document("$group", new Document("_id", 1).append("n", new Document("$sum", 1))));
    return db.runCommand(new Document("explain", new Document("aggregate", collection).append("pipeline", pipeline).append("cursor", new Document())));
  }

  @ParameterizedTest
  @ValueSource(strings = {"memory", "file"})
  void aCountItsIndexCoversReadsNoDocument(String backend) throws Exception {
    MongoDatabase db = startWithDocuments(backend);
    MongoCollection<Document> indexed = db.getCollection("indexed");
    MongoCollection<Document> plain = db.getCollection("plain");

    List<Bson> covered = List.of(
        Filters.and(Filters.eq("env", "e2"), Filters.gt("seq", 100), Filters.lte("seq", 900)),
        Filters.in("env", "e1", "e3"),
        Filters.eq("state", null),
        Filters.and(Filters.eq("state", "QUEUED"), Filters.lt("ts", new Date(T0.getTime() + 500_000))),
        Filters.gt("mixed", 5),
        Filters.lt("mixed", "m2"));
    for (Bson filter : covered) {
      Document explained = explainCount(db, "indexed", filter);
      Document plan = explained.get("queryPlanner", Document.class).get("winningPlan", Document.class);
      assertEquals("IXSCAN", plan.getString("stage"), "covered: " + filter);
      assertEquals(0L, docsExamined(explained), "covered: " + filter);
      assertEquals(plain.countDocuments(filter), indexed.countDocuments(filter), "covered: " + filter);
    }
    List<Bson> fetched = List.of(
        Filters.and(Filters.eq("env", "e1"), Filters.ne("state", "RUNNING")), // a condition the intervals do not hold
        Filters.eq("tags", "t2"), // an index with arrays: a document may have several entries
        new Document("$and", List.of(new Document("seq", 7), new Document("seq", new Document("$gt", 100)))).append("env", "e2"), // equality and range on one field
        Filters.and(Filters.eq("env", "e2"), Filters.eq("ts", T0))); // a field the index does not hold
    for (Bson filter : fetched) {
      Document explained = explainCount(db, "indexed", filter);
      assertEquals("FETCH", explained.get("queryPlanner", Document.class).get("winningPlan", Document.class).getString("stage"), "read: " + filter);
      assertTrue(docsExamined(explained) > 0, "read: " + filter);
      assertEquals(plain.countDocuments(filter), indexed.countDocuments(filter), "read: " + filter);
    }
    // A page of a count (skip and limit) and a count of nothing.
    Bson env = Filters.eq("env", "e2");
    assertEquals(300, indexed.countDocuments(env));
    assertEquals(10, indexed.countDocuments(env, new CountOptions().skip(5).limit(10)));
    assertEquals(5, indexed.countDocuments(env, new CountOptions().skip(295).limit(10)));
    assertEquals(0, indexed.countDocuments(env, new CountOptions().skip(300)));
    assertEquals(0, indexed.countDocuments(Filters.eq("env", "nowhere")));
    assertEquals(0, indexed.countDocuments(Filters.in("env", List.of())));
    // Writes are counted at once, and a document that gains an array makes the index's counts read documents.
    indexed.insertOne(new Document("_id", "new").append("env", "e2").append("seq", 1));
    assertEquals(301, indexed.countDocuments(env));
    indexed.updateOne(Filters.eq("_id", "new"), Updates.set("env", List.of("e2", "e7")));
    assertEquals("FETCH", explainCount(db, "indexed", env).get("queryPlanner", Document.class).get("winningPlan", Document.class).getString("stage"));
    assertEquals(301, indexed.countDocuments(env));
    assertEquals(1, indexed.countDocuments(Filters.eq("env", "e7")));
  }

  @ParameterizedTest
  @ValueSource(strings = {"memory", "file"})
  void theScanGuardRefusesWhatNoIndexServes(String backend) throws Exception {
    MongoDatabase db = start(backend);
    MongoCollection<Document> indexed = indexed(db);
    indexed.insertMany(documents());
    Document was = client.getDatabase("admin").runCommand(new Document("setParameter", 1).append("notablescan", true));
    assertEquals(false, was.get("was"));
    assertEquals(true, client.getDatabase("admin").runCommand(new Document("getParameter", 1).append("notablescan", 1)).get("notablescan"));

    MongoQueryException refused = assertThrows(MongoQueryException.class, () -> indexed.find(Filters.eq("ts", T0)).first());
    assertEquals(291, refused.getErrorCode());
    assertTrue(refused.getErrorMessage().contains("t.indexed") && refused.getErrorMessage().contains("ts"), refused.getErrorMessage());
    Supplier<Long> unindexedCount = () -> indexed.countDocuments(Filters.eq("ts", T0));
    MongoCommandException countRefused = assertThrows(MongoCommandException.class, unindexedCount::get);
    assertEquals(291, countRefused.getErrorCode());
    MongoWriteException updateRefused = assertThrows(MongoWriteException.class, () -> indexed.updateMany(Filters.eq("ts", T0), Updates.set("x", 1)));
    assertEquals(291, updateRefused.getCode());

    assertEquals(300, indexed.countDocuments(Filters.eq("env", "e1")));
    assertEquals(5, indexed.find().sort(new Document("_id", 1)).limit(5).into(new ArrayList<>()).size(), "a sort on an index walks it");
    assertEquals(1, indexed.deleteOne(Filters.eq("_id", "d00001")).getDeletedCount());
  }
}
