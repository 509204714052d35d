package org.h2.mvstore;

import java.lang.reflect.Field;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.h2.util.Utils;

/**
 * H2's serialization thread for a store that commits only when told: a commit returns once the
 * changed maps' roots are taken (the pages as they are at that moment, which later writes copy
 * before they change them), and their chunk is serialized and written on this thread. H2's
 * background writer works so (its commits hand the chunk to this executor); runhook keeps that
 * writer off, so that no commit happens but the group commit's, and installs the executor alone.
 * Written against H2 2.3.232, whose FileStore runs a chunk's serialization on its
 * serializationExecutor when it has one (a commit that waits for it waits for the chunk, one
 * that does not, MVStore.tryCommit, returns at once) and flushes and stops it on close.
 */
public final class BackgroundSerialization {
  private static final Field SERIALIZATION_EXECUTOR;

  static {
    try {
      SERIALIZATION_EXECUTOR = FileStore.class.getDeclaredField("serializationExecutor");
      SERIALIZATION_EXECUTOR.setAccessible(true);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final MVStore store;
  private final ThreadPoolExecutor executor;

  private BackgroundSerialization(MVStore store, ThreadPoolExecutor executor) {
    this.store = store;
    this.executor = executor;
  }

  /** Gives the store's file a serialization thread (a store without a file: null). */
  public static BackgroundSerialization install(MVStore store, String threadName) {
    FileStore<?> file = store.getFileStore();
    if (file == null) return null;
    ThreadPoolExecutor executor = Utils.createSingleThreadExecutor(threadName);
    try {
      if (SERIALIZATION_EXECUTOR.get(file) != null) throw new IllegalStateException("the store has a serialization thread already");
      SERIALIZATION_EXECUTOR.set(file, executor);
    } catch (IllegalAccessException e) {
      executor.shutdown();
      throw new IllegalStateException(e);
    }
    return new BackgroundSerialization(store, executor);
  }

  /**
   * Commits: returns once the maps' roots are taken; the chunk is written on the serialization
   * thread. (H2's tryCommit gives up if another thread holds the store's lock for a moment, as a
   * command that drops an unused version does: then a commit that waits for its chunk.)
   */
  public void commit() {
    if (store.tryCommit() < 0) store.commit();
  }

  /** Runs `then` on the serialization thread once the chunks of the commits before this call are written. */
  public void afterWritten(Runnable then) {
    executor.execute(then);
  }

  /**
   * Stops the thread once what was handed to it is done; later commits (none may run meanwhile)
   * write their chunk themselves. (H2 stops the executors of its background writer only.)
   */
  public void close() throws InterruptedException {
    executor.shutdown();
    executor.awaitTermination(1, TimeUnit.DAYS);
    try {
      SERIALIZATION_EXECUTOR.set(store.getFileStore(), null);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }
}
