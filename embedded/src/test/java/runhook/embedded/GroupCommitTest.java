package runhook.embedded;

import static org.junit.jupiter.api.Assertions.assertTrue;

import de.bwaldvogel.mongo.bson.Document;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The group commit's space reuse: while its commits take little of the time, slices of sparse
 * chunks follow one another (not one per 100 ms); while writes keep it committing, one per 100
 * ms at most, and every write is still acknowledged.
 */
class GroupCommitTest {
  private static final long WINDOW_MS = 1500;

  /** Removed after each test (each store's file is some 170 MB). */
  @TempDir Path dir;

  /** A store whose chunks are mostly dead, with tens of MB of live pages in them to move. */
  private MVStore sparseStore() {
    MVStore store = new MVStore.Builder().fileName(dir.resolve("db.mv").toString()).autoCommitDisabled().autoCommitBufferSize(0).cacheSize(16).open();
    store.setRetentionTime(0);
    store.setVersionsToKeep(0);
    MVMap<Long, String> map = store.openMap("data");
    Random random = new Random(11);
    String pad = "x".repeat(2000);
    for (int round = 0; round < 20; round++) {
      for (int i = 0; i < 2000; i++) map.put((long) random.nextInt(20_000), round + ":" + i + pad);
      store.commit();
    }
    int live = store.getFileStore().getChunksFillRate();
    assertTrue(live < 50, "the test needs sparse chunks to start with: " + live + "%");
    return store;
  }

  /** The slices counted since the last call. */
  private static long slices(GroupCommit commit, MVStore store) {
    Document steps = commit.stats.answer(new Document("reset", true), store.getFileStore());
    return ((Number) ((Document) steps.get("slice")).get("count")).longValue();
  }

  @Test
  void aQuietStoreMovesSliceAfterSlice() throws Exception {
    MVStore store = sparseStore();
    GroupCommit commit = new GroupCommit(store, null, 0);
    try {
      slices(commit, store);
      Thread.sleep(WINDOW_MS);
      long n = slices(commit, store);
      // One slice per 100 ms would be 15 at most.
      assertTrue(n >= 20, n + " slices in " + WINDOW_MS + " ms");
    } finally {
      commit.close();
      store.close();
    }
  }

  @Test
  void aBusyStoreSlicesOncePer100Ms() throws Exception {
    MVStore store = sparseStore();
    MVMap<Long, String> map = store.openMap("data");
    GroupCommit commit = new GroupCommit(store, null, 0);
    AtomicBoolean stop = new AtomicBoolean();
    // A writer that writes again as soon as its last write is on disk: commits all the time.
    CompletableFuture<Long> writer = CompletableFuture.supplyAsync(() -> {
      long acknowledged = 0;
      for (long i = 0; !stop.get(); i++) {
        commit.writes.readLock().lock();
        try {
          map.put(1_000_000 + i, "w" + i);
        } finally {
          commit.writes.readLock().unlock();
        }
        CompletableFuture<Boolean> done = new CompletableFuture<>();
        commit.afterNextCommit(done::complete);
        if (done.join()) acknowledged++;
      }
      return acknowledged;
    });
    try {
      Thread.sleep(300);
      slices(commit, store);
      Thread.sleep(WINDOW_MS);
      long n = slices(commit, store);
      assertTrue(n <= WINDOW_MS / 100 + 2, n + " slices in " + WINDOW_MS + " ms");
      stop.set(true);
      assertTrue(writer.get(10, TimeUnit.SECONDS) > 0, "writes acknowledged");
    } finally {
      stop.set(true);
      commit.close();
      store.close();
    }
  }
}
