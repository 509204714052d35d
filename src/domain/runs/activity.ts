// Activity log entries about a run, attributed to the run's user (the token's user), each one
// fact with the change of the run it describes.
//
// An entry takes its position in the log first (a number of the environment's stream), then
// rides in the run's own write: the insert that stores the run, the update that ends a step or
// the run (RunDoc.pendingLog). Once that write applied, the entry is put at its position, an
// insert keyed by the position, so a second put is a no-op. Whoever finds the entry still pending
// puts it: the writer right after its change, a reader that finds the position empty past its
// grace (domain/logs/reader.ts), the sweep for what a dead process left (sweepPendingEntries).
// So a stored change always gets its entry, once, and a change that was not stored never does
// (its position is given up: a tombstone). A position a reader gave up before the change was
// stored (a writer slower than the grace) moves to a new number, recorded in the run first.
import type { Logger } from "pino";
import type { Store } from "../../store/index.js";
import { activityStream, streamKey } from "../../store/logs.js";
import type { ActivityLogDoc, PendingLogEntry, RunDoc } from "../../store/types.js";

/** An entry about `run`, at a position of its environment's stream reserved for it (not yet in the log). */
export async function runEntry(
  store: Store,
  run: RunDoc,
  action: string,
  details: Record<string, unknown>,
  via: ActivityLogDoc["via"] = "workflow",
): Promise<PendingLogEntry> {
  const stream = activityStream(run.environmentId);
  const [env, taken] = await Promise.all([store.immutable.environment(run.environmentId), store.logs.take(stream)]);
  return {
    key: streamKey(stream, taken.value),
    seq: taken.value,
    micros: taken.micros,
    entry: {
      projectId: run.projectId,
      environmentId: run.environmentId,
      environment: env?.name ?? "",
      rendering: run.renderingId,
      user: { id: run.userId, email: run.userEmail },
      action,
      via,
      collection: run.collection,
      recordId: run.recordId,
      runId: run._id,
      workflowId: run.workflowId,
      details,
    },
  };
}

/**
 * Puts `p`, held by run `runId`, at its position; if a reader gave that position up, at a new
 * one recorded in the run first. The key it ends at, or null when another process moved it.
 */
async function settle(store: Store, runId: string, p: PendingLogEntry): Promise<string | null> {
  for (;;) {
    if ((await store.logs.putPending(p)) === "written") return p.key;
    const stream = activityStream(p.entry.environmentId);
    const taken = await store.logs.take(stream);
    const moved = { ...p, key: streamKey(stream, taken.value), seq: taken.value, micros: taken.micros };
    if (!(await store.runs.relocatePending(runId, p.key, moved))) {
      await store.logs.tombstone("activity", stream, taken.value);
      return null;
    }
    p = moved;
  }
}

/** Puts a run's pending entries in the log (see above), then clears them from the run (not waited for: the sweep clears what this does not). */
export async function putEntries(store: Store, runId: string, entries: readonly PendingLogEntry[]): Promise<void> {
  const keys = (await Promise.all(entries.map((p) => settle(store, runId, p)))).filter((k): k is string => k !== null);
  if (keys.length > 0) void store.runs.clearPending(runId, keys).catch(() => {});
}

/** The positions of entries whose change did not apply: given up at once, so that readers never wait for them. */
export function releaseEntries(store: Store, entries: readonly PendingLogEntry[], log: Pick<Logger, "warn">): void {
  for (const p of entries) {
    void store.logs
      .tombstone("activity", activityStream(p.entry.environmentId), p.seq)
      .catch((err: unknown) => log.warn({ err }, "could not release an activity log position"));
  }
}

/** Runs whose pending entries are older than this are a dead process's: the sweep puts them. */
export const PENDING_ENTRY_AGE_MS = 5_000;
/** Runs the sweep reads at a time. */
const SWEEP_BATCH = 100;

/** Puts the entries that processes which died left pending in their runs; how many it put. */
export async function sweepPendingEntries(store: Store, now = Date.now()): Promise<number> {
  let put = 0;
  for (const run of await store.runs.withPending(SWEEP_BATCH)) {
    const left = (run.pendingLog ?? []).filter((p) => p.micros / 1000 < now - PENDING_ENTRY_AGE_MS);
    if (left.length === 0) continue; // in flight: its writer puts it
    await putEntries(store, run._id, left);
    put += left.length;
  }
  return put;
}
