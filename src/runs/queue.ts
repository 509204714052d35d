// Hints that keep the hot paths on primary-key operations, on MongoDB and on FerretDB alike.
//
// FerretDB v1 (SQLite) serves only a bare `{_id: <string>}` filter from an index, and
// `find({}).limit(n)` (no filter, no sort) as a scan that stops after n rows; every other
// query decodes the whole collection. So:
//
// - `run_queue` (`_id` = run id): inserted right after a run is stored QUEUED; executors list
//   its head (cheap: no filter) and claim each run by id (runs/cas.ts), then delete the entry.
//   An entry is only a hint: the claim re-checks the run's state and lease, so a stale or
//   duplicate entry never runs a step twice. A lost entry (crash between the two inserts) or
//   a RUNNING run whose executor died is put back by the executors' periodic sweep.
// - `active_runs` (`_id` = activeKey, `runId`): written right after a run insert, read by the
//   webhook's 409 answer and confirmed against the run by id. The unique index on
//   runs.activeKey stays the only enforcement; a missing or stale hint falls back to a query.
// - `running_runs` (`_id` = run id): inserted when an executor claims a run, dropped once it
//   is finished. The lease sweep reads this short list and each run by id to find the
//   RUNNING runs whose lease expired, instead of querying runs by state.
import type { Database } from "../db/mongo.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { RunQueueDoc } from "../db/types.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Puts run `runId` on the work queue (no-op when it is already there). */
export async function enqueueRun(db: Database, runId: string, at = new Date()): Promise<void> {
  try {
    await db.runQueue.insertOne({ _id: runId, at });
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
  }
}

/** Removes run `runId`'s queue entry (claimed, finished or gone). */
export async function dequeueRun(db: Database, runId: string): Promise<void> {
  await db.runQueue.deleteOne({ _id: runId });
}

/** The oldest `limit` queue entries: a primary-key ordered read on FerretDB, an indexed one on MongoDB. */
export async function listQueue(db: Database, limit: number): Promise<RunQueueDoc[]> {
  // FerretDB v1: with no filter and no sort the limit is pushed down to SQLite, a table scan
  // that stops after `limit` rows in rowid (insertion) order — 6 ms at 20,000 entries, while
  // any sort (even on _id; `$natural` is refused on non-capped collections) reads them all.
  // MongoDB: natural order is not promised to be insertion order; the {at} index is.
  if (db.serializedUpdates) return db.runQueue.find({}, { limit }).toArray();
  return db.runQueue.find({}, { sort: { at: 1 }, limit }).toArray();
}

/** Records that `runId` is the ongoing run of `activeKey` (a hint for the 409 answer). */
export async function noteActiveRun(db: Database, activeKey: string, runId: string): Promise<void> {
  await db.activeRuns.replaceOne({ _id: activeKey }, { runId, at: new Date() }, { upsert: true });
}

/**
 * The id of the ongoing run of `activeKey`, or null when there is none. Reads the hint by
 * _id and confirms it against the run (by _id); only an unconfirmed hint costs a query on
 * runs.activeKey (indexed on MongoDB, a scan on FerretDB), and then repairs the hint.
 */
export async function findOngoingRunId(db: Database, activeKey: string): Promise<string | null> {
  // A call that lost the insert race by a few milliseconds may read before the winner has
  // written its hint: look twice more, briefly, before querying runs.
  for (let attempt = 0; attempt < 3; attempt++) {
    if (attempt > 0) await sleep(5 * attempt);
    const hint = await db.activeRuns.findOne({ _id: activeKey });
    if (!hint) continue;
    const run = await db.runs.findOne({ _id: hint.runId }, { projection: { activeKey: 1 } });
    // activeKey equals the (workflow, record) key exactly while the run is ongoing.
    if (run && run.activeKey === activeKey) return run._id;
  }
  const ongoing = await db.runs.findOne({ activeKey }, { projection: { _id: 1 } });
  if (ongoing) await noteActiveRun(db, activeKey, ongoing._id).catch(() => {});
  return ongoing?._id ?? null;
}

/** Records that run `runId` was claimed (the lease sweep's list; no-op when already there). */
export async function markRunning(db: Database, runId: string): Promise<void> {
  try {
    await db.runningRuns.insertOne({ _id: runId, at: new Date() });
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
  }
}

/** Drops run `runId` from the lease sweep's list (only once it is finished: it never runs again). */
export async function unmarkRunning(db: Database, runId: string): Promise<void> {
  await db.runningRuns.deleteOne({ _id: runId });
}

/** Every claimed, unfinished run (and a few just finished): unfiltered, so a cheap read on FerretDB too. */
export async function listRunning(db: Database, limit: number): Promise<string[]> {
  return (await db.runningRuns.find({}, { limit, projection: { _id: 1 } }).toArray()).map((e) => e._id);
}
