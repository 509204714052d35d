package runhook.embedded;

import de.bwaldvogel.mongo.bson.Document;
import java.time.Instant;
import java.util.Arrays;

/**
 * How long each step of the group commit took since the last reset: waiting for the writes in
 * flight (the exclusive lock), the commit (pages serialized and written), the sync (fsync) and
 * the space-reuse slice before it. Every write waits for one of each, so a slow write is
 * explained by the longest steps and when they ended (to set beside the write's own time).
 * Answered by the command {@code {runhookCommitStats: 1, reset: <bool>}}.
 */
final class CommitStats {
  enum Step {
    LOCK_WAIT("lockWait"),
    COMMIT("commit"),
    SYNC("sync"),
    SLICE("slice");

    /** The step's field in the answer. */
    final String field;

    Step(String field) {
      this.field = field;
    }
  }

  static final String COMMAND = "runhookCommitStats";

  private final long[] count = new long[Step.values().length];
  private final long[] totalNs = new long[Step.values().length];
  private final long[] maxNs = new long[Step.values().length];
  private final long[] maxAtMs = new long[Step.values().length];

  synchronized void record(Step step, long nanos) {
    int i = step.ordinal();
    count[i]++;
    totalNs[i] += nanos;
    if (nanos > maxNs[i]) {
      maxNs[i] = nanos;
      maxAtMs[i] = System.currentTimeMillis();
    }
  }

  /** The figures (ms) of each step, and zero after them when {@code reset}. */
  synchronized Document answer(Document query) {
    Document out = new Document();
    for (Step step : Step.values()) {
      int i = step.ordinal();
      Document figures = new Document("count", count[i]).append("totalMs", totalNs[i] / 1e6).append("maxMs", maxNs[i] / 1e6);
      figures.append("maxAt", maxAtMs[i] == 0 ? null : Instant.ofEpochMilli(maxAtMs[i]).toString());
      out.append(step.field, figures);
    }
    if (Boolean.TRUE.equals(query.get("reset")) || (query.get("reset") instanceof Number n && n.intValue() != 0)) {
      Arrays.fill(count, 0);
      Arrays.fill(totalNs, 0);
      Arrays.fill(maxNs, 0);
      Arrays.fill(maxAtMs, 0);
    }
    return out.append("ok", 1.0);
  }
}
