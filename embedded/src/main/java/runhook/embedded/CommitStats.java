package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import java.time.Instant;
import java.util.Arrays;
import java.util.Map;
import org.h2.mvstore.FileStore;

/**
 * How long each step of the group commit took since the last reset: waiting for the writes in
 * flight (the exclusive lock), the commit under it (pages serialized and written; for a
 * checkpoint written in the background, only the snapshot of the maps' roots), the sync (fsync),
 * the journal's append and sync of a group, the space-reuse slice, and a background checkpoint
 * from its snapshot until its chunk is written and synced (which no write waits for). A write
 * waits for the steps of its group, so a slow write is
 * explained by the longest steps and when they ended (to set beside the write's own time).
 * Beside them, the file's counters since it was opened (never reset): reads and bytes read
 * (pages the page cache did not hold), writes and bytes written, the page cache's hit ratio, so
 * that the cost of a write at one size can be set beside another's; and the space reuse's: the
 * chunks' live share (%) and the bytes of live pages its slices moved, so that a benchmark can
 * wait until the reuse has caught up with a bulk load.
 * Answered by the command {@code {runhookCommitStats: 1, reset: <bool>}}.
 */
final class CommitStats {
  enum Step {
    LOCK_WAIT("lockWait"),
    COMMIT("commit"),
    SYNC("sync"),
    JOURNAL("journal"),
    SLICE("slice"),
    CHECKPOINT("checkpoint");

    /** The step's field in the answer. */
    final String field;

    Step(String field) {
      this.field = field;
    }
  }

  static final String COMMAND = "runhookCommitStats";

  /** The file's counters answered, by H2's names for them. */
  private static final Map<String, String> FILE_COUNTERS = Map.of(
      "info.FILE_READ", "reads",
      "info.FILE_READ_BYTES", "readBytes",
      "info.FILE_WRITE", "writes",
      "info.FILE_WRITE_BYTES", "writeBytes",
      "info.CACHE_HIT_RATIO", "cacheHitPercent",
      "info.CACHE_SIZE", "cacheUsedMb",
      "info.CHUNK_COUNT", "chunks");

  private final long[] count = new long[Step.values().length];
  private final long[] totalNs = new long[Step.values().length];
  private final long[] maxNs = new long[Step.values().length];
  private final long[] maxAtMs = new long[Step.values().length];
  /** Bytes of live pages the space reuse moved since the file was opened. */
  private long movedBytes;
  /** Bytes appended to the journal since the file was opened. */
  private long journalBytes;

  synchronized void moved(long bytes) {
    movedBytes += bytes;
  }

  synchronized void journaled(long bytes) {
    journalBytes += bytes;
  }

  synchronized void record(Step step, long nanos) {
    int i = step.ordinal();
    count[i]++;
    totalNs[i] += nanos;
    if (nanos > maxNs[i]) {
      maxNs[i] = nanos;
      maxAtMs[i] = System.currentTimeMillis();
    }
  }

  /** The figures (ms) of each step and the file's counters, and the steps' zeroed after them when {@code reset}. */
  synchronized Document answer(Document query, FileStore<?> file) {
    Document out = new Document();
    for (Step step : Step.values()) {
      int i = step.ordinal();
      Document figures = new Document("count", count[i]).append("totalMs", totalNs[i] / 1e6).append("maxMs", maxNs[i] / 1e6);
      figures.append("maxAt", maxAtMs[i] == 0 ? null : Instant.ofEpochMilli(maxAtMs[i]).toString());
      out.append(step.field, figures);
    }
    Document counters = new Document();
    file.populateInfo((name, value) -> {
      String field = FILE_COUNTERS.get(name);
      if (field != null) counters.append(field, Long.parseLong(value));
    });
    counters.append("movedBytes", movedBytes).append("liveChunkPercent", (long) file.getChunksFillRate()).append("journalBytes", journalBytes);
    out.append("file", counters);
    if (Boolean.TRUE.equals(query.get("reset")) || (query.get("reset") instanceof Number n && n.intValue() != 0)) {
      Arrays.fill(count, 0);
      Arrays.fill(totalNs, 0);
      Arrays.fill(maxNs, 0);
      Arrays.fill(maxAtMs, 0);
    }
    return out.append("ok", 1.0);
  }
}
