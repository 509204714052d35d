package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.mongodb.MongoException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Updates;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Reading ahead of a write (the file backend) reads what its index plan finds, at most
 * MAX_DOCUMENTS and never more than the write's limit, never scans, and changes nothing: the
 * writes that follow it answer what they would without it.
 */
class ReadAheadTest {
  private FileServer files;
  private MongoCollection<Document> runs;

  @BeforeEach
  void start() throws Exception {
    files = new FileServer("read-ahead");
    runs = files.client.getDatabase("t").getCollection("runs");
    runs.createIndex(Indexes.ascending("finishedAt"));
    runs.createIndex(Indexes.ascending("env", "recordId"));
    List<Document> docs = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      docs.add(new Document("_id", "run-" + i).append("finishedAt", i).append("env", "e" + (i % 3)).append("recordId", "r" + i).append("note", "n"));
    }
    runs.insertMany(docs);
  }

  @AfterEach
  void stop() throws Exception {
    ScanGuard.set(false);
    files.close();
  }

  private FastH2Database database() {
    return (FastH2Database) files.backend.resolveDatabase("t");
  }

  @Test
  void readsWhatThePlanFindsUpToTheWritesLimitAndNeverScans() {
    FastH2Database db = database();
    var expired = new de.bwaldvogel.mongo.bson.Document("finishedAt", new de.bwaldvogel.mongo.bson.Document("$lt", 40));
    assertEquals(40, db.readAhead("runs", expired, 0, ReadAhead.MAX_DOCUMENTS));
    assertEquals(1, db.readAhead("runs", expired, 1, ReadAhead.MAX_DOCUMENTS)); // deleteOne, update without multi
    var all = new de.bwaldvogel.mongo.bson.Document("finishedAt", new de.bwaldvogel.mongo.bson.Document("$gte", 0));
    assertEquals(ReadAhead.MAX_DOCUMENTS, db.readAhead("runs", all, 0, ReadAhead.MAX_DOCUMENTS));
    assertEquals(0, db.readAhead("runs", new de.bwaldvogel.mongo.bson.Document("note", "n"), 0, ReadAhead.MAX_DOCUMENTS)); // no index: no scan
    assertEquals(0, db.readAhead("missing", expired, 0, ReadAhead.MAX_DOCUMENTS));
  }

  @Test
  void writesAfterItAnswerWhatTheyWouldWithoutIt() {
    assertEquals(40, runs.deleteMany(Filters.lt("finishedAt", 40)).getDeletedCount());
    assertEquals(1, runs.deleteOne(Filters.and(Filters.eq("_id", "run-40"), Filters.gte("finishedAt", 40))).getDeletedCount());
    assertEquals(259, runs.countDocuments());
    assertEquals(0, runs.countDocuments(Filters.lt("finishedAt", 40)));
    assertEquals(1, runs.updateOne(Filters.eq("_id", "run-100"), Updates.set("finishedAt", 1000)).getModifiedCount());
    assertEquals(1, runs.countDocuments(Filters.eq("finishedAt", 1000)));
    assertEquals(87, runs.updateMany(Filters.eq("env", "e2"), Updates.set("note", "m")).getModifiedCount());
    Document found = runs.findOneAndUpdate(Filters.gte("finishedAt", 40), Updates.set("note", "first"), new com.mongodb.client.model.FindOneAndUpdateOptions().sort(new Document("finishedAt", 1)));
    assertEquals(41, found.get("finishedAt")); // run-40 is gone
    runs.insertOne(new Document("_id", "run-new").append("finishedAt", 5));
    assertEquals(1, runs.countDocuments(Filters.lt("finishedAt", 40)));
    // The write's own refusal, not the read ahead's, reaches the caller.
    ScanGuard.set(true);
    MongoException refused = assertThrows(MongoException.class, () -> runs.deleteMany(Filters.eq("note", "n")));
    assertEquals(ScanGuard.NO_QUERY_EXECUTION_PLANS, refused.getCode());
  }
}
