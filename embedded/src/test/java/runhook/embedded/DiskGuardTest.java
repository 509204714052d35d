package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.mongodb.MongoException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A full disk is an answer ({@link DiskGuard}), on a small file system: a tmpfs mounted for the
 * test, which needs root (CI runs as root; without it the test fails saying so). Writes that add
 * data are refused with OutOfDiskSpace (14031) before they change anything, while reads and
 * deletes go on, and are accepted again once space is freed; a write that finds the disk full
 * anyway (nothing kept free) waits for space instead of failing the store, and is acknowledged
 * once it is on disk. Either way the store opens again with every acknowledged write.
 */
class DiskGuardTest {
  private static final int MOUNT_MB = 12;
  /** Space the test takes from the file system, and frees to give it back (as much as the writes may take). */
  private static final int FILLER_MB = 6;
  private static final int PAYLOAD_BYTES = 16 << 10;

  private Path mount;

  @BeforeEach
  void mountSmallFileSystem() throws Exception {
    mount = Files.createTempDirectory("disk-guard");
    run("mount", "-t", "tmpfs", "-o", "size=" + MOUNT_MB + "m", "tmpfs", mount.toString());
    Files.write(mount.resolve("filler"), new byte[FILLER_MB << 20]);
  }

  @AfterEach
  void unmount() throws Exception {
    System.clearProperty("runhook.h2.minFreeMb");
    run("umount", mount.toString());
    Files.deleteIfExists(mount);
  }

  /** Twice the room, as an operator who frees space gives it. */
  private void growFileSystem() throws Exception {
    run("mount", "-o", "remount,size=" + 2 * MOUNT_MB + "m", mount.toString());
  }

  private static void run(String... command) throws Exception {
    String what = String.join(" ", command);
    Process process;
    try {
      process = new ProcessBuilder(command).redirectErrorStream(true).start();
    } catch (IOException e) {
      throw new AssertionError(what + " could not run (this test mounts a small tmpfs to fill it: it needs root): " + e.getMessage(), e);
    }
    String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    if (process.waitFor() != 0) fail(what + " failed (this test mounts a small tmpfs to fill it: it needs root): " + output);
  }

  /** Document i, whose payload does not compress. */
  private static Document doc(int i) {
    byte[] bytes = new byte[PAYLOAD_BYTES * 3 / 4];
    new Random(i).nextBytes(bytes);
    return new Document("_id", i).append("payload", Base64.getEncoder().encodeToString(bytes));
  }

  private static MongoCollection<Document> docs(FileServer files) {
    return files.client.getDatabase("t").getCollection("docs");
  }

  /** Inserts `d`, retrying while it is refused for space, for up to 5 s (the free space is read every 20 ms). */
  private static void insertOnceAccepted(MongoCollection<Document> docs, Document d) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    for (;;) {
      try {
        docs.insertOne(d);
        return;
      } catch (MongoException e) {
        if (e.getCode() != DiskGuard.OUT_OF_DISK_SPACE || System.nanoTime() > deadline) throw e;
        Thread.sleep(50);
      }
    }
  }

  private static void assertOutOfDiskSpace(MongoException e) {
    assertEquals(DiskGuard.OUT_OF_DISK_SPACE, e.getCode(), e.toString());
    assertTrue(e.getMessage().contains("disk is full") && e.getMessage().contains("writes that add data are refused"), e.getMessage());
  }

  @Test
  void writesThatAddDataAreRefusedBeforeTheDiskIsFullAndAcceptedOnceSpaceIsFreed() throws Exception {
    int acknowledged = 0;
    try (FileServer files = new FileServer(mount, false)) {
      MongoCollection<Document> docs = docs(files);
      // Near the limit a checkpoint gives back its journal's space: the disk is full for good once
      // a write is refused again after one (a checkpoint is due within a second of a write).
      boolean paused = false;
      for (;;) {
        try {
          docs.insertOne(doc(acknowledged));
          acknowledged++;
          paused = false;
        } catch (MongoException e) {
          assertOutOfDiskSpace(e);
          if (paused) break;
          Thread.sleep(1500);
          paused = true;
        }
        assertTrue(acknowledged < 2000, "no refusal after " + acknowledged + " documents of " + PAYLOAD_BYTES + " bytes on " + MOUNT_MB + " MB");
      }
      assertTrue(acknowledged > 10, "refused after " + acknowledged + " documents only");
      // Reads go on and see exactly the acknowledged writes.
      assertEquals(acknowledged, docs.countDocuments());
      assertEquals(doc(0), docs.find(Filters.eq("_id", 0)).first());
      // An update may add data: refused; a delete goes on.
      assertOutOfDiskSpace(assertThrows(MongoException.class, () -> docs.updateOne(Filters.eq("_id", 1), Updates.set("more", "x".repeat(1000)))));
      assertEquals(1, docs.deleteOne(Filters.eq("_id", 0)).getDeletedCount());
      // Space freed: writes are accepted again.
      Files.delete(mount.resolve("filler"));
      insertOnceAccepted(docs, doc(acknowledged));
      assertEquals(acknowledged, docs.countDocuments());
    }
    try (FileServer reopened = new FileServer(mount, false)) {
      assertEquals(acknowledged, docs(reopened).countDocuments());
      assertEquals(doc(acknowledged), docs(reopened).find(Filters.eq("_id", acknowledged)).first());
    }
  }

  /** A writer of documents 1, 2, … (0 is written first) until one is refused or does not come back. */
  private static final class Writer implements AutoCloseable {
    final AtomicInteger acknowledged = new AtomicInteger();
    final AtomicBoolean stop = new AtomicBoolean();
    /** How the writer ended: refused, or its server gone. */
    final AtomicReference<RuntimeException> ended = new AtomicReference<>();
    final ExecutorService thread = Executors.newSingleThreadExecutor();
    final Future<?> writing;
    /** Whether the last write waits (else it was refused). */
    final boolean waiting;

    Writer(MongoCollection<Document> docs) throws Exception {
      docs.insertOne(doc(0)); // the collection is there: the writes that follow are quick
      acknowledged.set(1);
      writing = thread.submit(() -> {
        for (int i = 1; !stop.get(); i++) {
          try {
            docs.insertOne(doc(i));
          } catch (RuntimeException e) {
            ended.set(e);
            return;
          }
          acknowledged.set(i + 1);
        }
      });
      int seen = -1;
      for (long still = 0; !writing.isDone() && still < 1000; still = acknowledged.get() == seen ? still + 100 : 0) {
        seen = acknowledged.get();
        Thread.sleep(100);
      }
      waiting = !writing.isDone();
      // Refused: the disk was full already (a checkpoint's chunk waits for space).
      if (!waiting) assertOutOfDiskSpace(assertInstanceOf(MongoException.class, ended.get(), "the writer ended without a refusal"));
    }

    @Override
    public void close() {
      thread.shutdownNow();
    }
  }

  @Test
  void aWriteThatFindsTheDiskFullWaitsForSpaceAndIsAcknowledgedOnceOnDisk() throws Exception {
    System.setProperty("runhook.h2.minFreeMb", "0"); // nothing kept free: the disk fills under the writes
    int acknowledged;
    try (FileServer files = new FileServer(mount, false); Writer writer = new Writer(docs(files))) {
      MongoCollection<Document> docs = docs(files);
      // The disk is full from then on: another write that adds data is refused at once.
      assertOutOfDiskSpace(assertThrows(MongoException.class, () -> docs.insertOne(doc(-1))));
      // Reads go on (a waiting write is in the maps already, as every write is before its commit).
      long count = docs.countDocuments();
      int before = writer.acknowledged.get();
      assertTrue(count == before || (writer.waiting && count == before + 1), count + " documents, " + before + " acknowledged");
      assertEquals(doc(0), docs.find(Filters.eq("_id", 0)).first());
      // Space freed: the waiting write is acknowledged, and writes are accepted again.
      writer.stop.set(true);
      Files.delete(mount.resolve("filler"));
      writer.writing.get(10, TimeUnit.SECONDS);
      insertOnceAccepted(docs, doc(-1));
      acknowledged = writer.acknowledged.get() + 1;
      assertEquals(acknowledged, docs.countDocuments());
    }
    // Opening replays the journal into the data file, which takes room of its own beside what the
    // filled disk left: the file system grows, as an operator would make room (that a start on a
    // disk still full says so is the next test's).
    growFileSystem();
    try (FileServer reopened = new FileServer(mount, false)) {
      assertEquals(acknowledged, docs(reopened).countDocuments());
      assertEquals(doc(acknowledged - 2), docs(reopened).find(Filters.eq("_id", acknowledged - 2)).first());
    }
  }

  @Test
  void aServerStoppedWhileTheDiskIsFullKeepsEveryAcknowledgedWriteForTheNextStart() throws Exception {
    System.setProperty("runhook.h2.minFreeMb", "0");
    int acknowledged;
    FileServer files = new FileServer(mount, false);
    try (Writer writer = new Writer(docs(files))) {
      int before = writer.acknowledged.get();
      // Stopped with a write (or a checkpoint's chunk) waiting for space: it fails, never
      // acknowledged, and the store closes as it is, its journal kept.
      files.close();
      files = null;
      writer.writing.get(10, TimeUnit.SECONDS);
      acknowledged = writer.acknowledged.get();
      assertEquals(before, acknowledged);
    } finally {
      if (files != null) files.close();
    }
    // The journal is replayed and checkpointed when the store opens: on the full disk that
    // fails, saying so (unless it had next to nothing to replay).
    try {
      FastH2Backend.open(mount.resolve("db.mv").toString()).close();
    } catch (IllegalStateException full) {
      assertTrue(full.getMessage().contains("no space left on the device of") && full.getMessage().contains("free space there and start again"), full.getMessage());
    }
    Files.delete(mount.resolve("filler"));
    growFileSystem();
    try (FileServer reopened = new FileServer(mount, false)) {
      // The write that waited was never acknowledged, nor stored.
      assertEquals(acknowledged, docs(reopened).countDocuments());
      assertEquals(doc(acknowledged - 1), docs(reopened).find(Filters.eq("_id", acknowledged - 1)).first());
    }
  }
}
