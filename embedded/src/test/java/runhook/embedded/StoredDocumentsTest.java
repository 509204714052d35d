package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.ReturnDocument;
import com.mongodb.client.model.Updates;
import java.util.List;
import org.bson.Document;
import org.h2.mvstore.MVMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The file backend never changes a stored document: an update (update, findAndModify) stores a
 * new one in its place, so that a checkpoint can serialize the stored documents while writes go
 * on, and a read holds a document that no write changes under it.
 */
class StoredDocumentsTest {
  private FileServer files;
  private MongoCollection<Document> runs;
  private MVMap<Object, de.bwaldvogel.mongo.bson.Document> stored;

  @BeforeEach
  void start() throws Exception {
    files = new FileServer("stored-documents");
    runs = files.client.getDatabase("t").getCollection("runs");
    runs.insertOne(new Document("_id", "a").append("state", "queued").append("tries", 0).append("meta", new Document("k", 1)));
    runs.insertOne(new Document("_id", "b").append("state", "queued").append("tries", 0));
    stored = JournaledMap.open(files.backend.getMvStore(), "databases.t.runs");
  }

  @AfterEach
  void stop() throws Exception {
    files.close();
  }

  private de.bwaldvogel.mongo.bson.Document storedOf(String id) {
    for (var d : stored.values()) {
      if (d.get("_id").equals(id)) return d;
    }
    throw new AssertionError("no stored document " + id);
  }

  @Test
  void anUpdateStoresANewDocumentAndLeavesTheOldOneAsItWas() {
    var before = storedOf("a");
    runs.updateOne(Filters.eq("_id", "a"), Updates.combine(Updates.set("state", "running"), Updates.inc("tries", 1), Updates.set("meta.k", 2), Updates.unset("missing")));
    var after = storedOf("a");
    assertNotSame(before, after);
    assertEquals("queued", before.get("state"));
    assertEquals(0, before.get("tries"));
    assertEquals(1, ((de.bwaldvogel.mongo.bson.Document) before.get("meta")).get("k"));
    assertEquals("running", after.get("state"));
    assertEquals(1, after.get("tries"));
    assertEquals(2, ((de.bwaldvogel.mongo.bson.Document) after.get("meta")).get("k"));
    assertEquals(List.of("_id", "state", "tries", "meta"), List.copyOf(after.keySet()));
  }

  @Test
  void findAndModifyAndMultiUpdatesDoTheSame() {
    var a = storedOf("a");
    var b = storedOf("b");
    Document answered = runs.findOneAndUpdate(Filters.eq("state", "queued"), Updates.set("state", "claimed"),
        new FindOneAndUpdateOptions().sort(new Document("_id", 1)).returnDocument(ReturnDocument.AFTER));
    assertEquals("claimed", answered.get("state"));
    assertEquals("queued", a.get("state"));
    runs.updateMany(Filters.exists("state"), Updates.unset("tries"));
    assertEquals(0, a.get("tries"));
    assertEquals(0, b.get("tries"));
    assertEquals(List.of("_id", "state", "meta"), List.copyOf(storedOf("a").keySet()));
    assertEquals(List.of("_id", "state"), List.copyOf(storedOf("b").keySet()));
    assertEquals("claimed", storedOf("a").get("state"));
    assertEquals(2L, runs.countDocuments(Filters.exists("tries", false)));
  }
}
