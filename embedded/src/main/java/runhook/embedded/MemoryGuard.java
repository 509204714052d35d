package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryNotificationInfo;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.util.Locale;
import java.util.Set;
import javax.management.NotificationEmitter;

/**
 * The heap is bounded, and says so before it is full: once the old generation is still more
 * than {@link #FULL_SHARE} full right after a collection (asked for as soon as it holds that
 * much), writes that add data (insert,
 * update, findAndModify, createIndexes) are refused with a clear error and a line on standard
 * error, instead of the server pausing for seconds in collections and then dropping its
 * connections. Reads and deletes go on, and writes are accepted again once a collection leaves
 * the heap below {@link #CLEAR_SHARE}. Installed on the memory backend only, which keeps every
 * document on the heap; the file backend's heap holds its page cache and work in progress.
 */
final class MemoryGuard {
  private MemoryGuard() {}

  static final double FULL_SHARE = 0.85;
  static final double CLEAR_SHARE = 0.75;
  /** MongoDB's ExceededMemoryLimit. */
  static final int EXCEEDED_MEMORY_LIMIT = 146;

  private static final Set<String> ADDING = Set.of("insert", "update", "findandmodify", "createindexes");

  private static volatile boolean full;
  private static MemoryPoolMXBean oldGeneration;

  /** Watches the heap's tenured pool (where documents live): called once at start. */
  static synchronized void install() {
    if (oldGeneration != null) return;
    for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
      if (pool.getType() == MemoryType.HEAP && pool.isCollectionUsageThresholdSupported() && pool.getUsage().getMax() > 0
          && (oldGeneration == null || pool.getUsage().getMax() > oldGeneration.getUsage().getMax())) {
        oldGeneration = pool;
      }
    }
    if (oldGeneration == null) return;
    long max = oldGeneration.getUsage().getMax();
    // The serial collector collects the old generation only once it is full, so what is live
    // there is known only then. When it holds FULL_SHARE (live or not), one collection is asked
    // for, off the notification's thread, to learn what is live before it is full.
    oldGeneration.setUsageThreshold((long) (max * FULL_SHARE));
    oldGeneration.setCollectionUsageThreshold((long) (max * FULL_SHARE));
    NotificationEmitter emitter = (NotificationEmitter) ManagementFactory.getMemoryMXBean();
    emitter.addNotificationListener((notification, handback) -> {
      if (notification.getType().equals(MemoryNotificationInfo.MEMORY_THRESHOLD_EXCEEDED) && !full) {
        Thread collect = new Thread(System::gc, "runhook-memory-guard");
        collect.setDaemon(true);
        collect.start();
      } else if (notification.getType().equals(MemoryNotificationInfo.MEMORY_COLLECTION_THRESHOLD_EXCEEDED) && !full) {
        full = true;
        System.err.println("runhook embedded database: the heap is " + percent(oldGeneration.getCollectionUsage().getUsed(), max)
            + " full after a collection (" + (max >> 20) + " MB): writes that add data are refused until data is removed; give it more memory"
            + " with RUNHOOK_EMBEDDED_HEAP_MB");
        System.err.flush();
      }
    }, null, null);
  }

  private static String percent(long used, long max) {
    return String.format(Locale.ROOT, "%.0f%%", used * 100.0 / max);
  }

  /** Whether `command` may add data: an insert, an update, a findAndModify that does not remove, an index build. */
  static boolean addsData(String command, Document query) {
    String name = command.toLowerCase(Locale.ROOT);
    return ADDING.contains(name) && !(name.equals("findandmodify") && Boolean.TRUE.equals(query.get("remove")));
  }

  /** Throws when `command` would add data while the heap is full. */
  static void check(String command, Document query) {
    if (!full || oldGeneration == null) return;
    long max = oldGeneration.getUsage().getMax();
    long used = oldGeneration.getCollectionUsage().getUsed();
    if (used < max * CLEAR_SHARE) {
      full = false;
      System.err.println("runhook embedded database: the heap is " + percent(used, max) + " full after a collection: writes are accepted again");
      System.err.flush();
      return;
    }
    if (!addsData(command, query)) return;
    throw new MongoServerError(EXCEEDED_MEMORY_LIMIT, "ExceededMemoryLimit",
        "the embedded database's memory is full (" + percent(used, max) + " of " + (max >> 20) + " MB after a collection): writes are refused"
            + " until data is removed; give it more with RUNHOOK_EMBEDDED_HEAP_MB, or use the file backend or MongoDB");
  }
}
