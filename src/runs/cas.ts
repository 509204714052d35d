// Conditional updates of one run by id, atomic on MongoDB and on FerretDB.
//
// MongoDB: one findOneAndUpdate({_id, …conditions}). FerretDB (v1, SQLite) neither isolates
// updates (db/atomic.ts) nor uses an index for anything but a bare `{_id}` filter, so a
// conditional filter scans the whole runs collection. There the run is locked under the same
// lock id as atomicUpdate uses (`runs:<id>`), read by _id, checked here, and updated by _id:
// every query stays on the primary key.
import type { UpdateFilter } from "mongodb";
import { tryLock } from "../db/atomic.js";
import type { Database } from "../db/mongo.js";
import type { RunDoc, RunState } from "../db/types.js";

export interface RunCondition {
  state?: RunState[];
  leaseOwner?: string;
  stepIndex?: number;
  version?: number;
  /** The lease expired before this time. */
  leaseExpiredBefore?: Date;
}

export function conditionFilter(id: string, c: RunCondition): Record<string, unknown> {
  const f: Record<string, unknown> = { _id: id };
  if (c.state) f.state = c.state.length === 1 ? c.state[0] : { $in: c.state };
  if (c.leaseOwner !== undefined) f["lease.owner"] = c.leaseOwner;
  if (c.stepIndex !== undefined) f.stepIndex = c.stepIndex;
  if (c.version !== undefined) f.version = c.version;
  if (c.leaseExpiredBefore) f["lease.expiresAt"] = { $lt: c.leaseExpiredBefore };
  return f;
}

export function matches(run: RunDoc, c: RunCondition): boolean {
  if (c.state && !c.state.includes(run.state)) return false;
  if (c.leaseOwner !== undefined && run.lease?.owner !== c.leaseOwner) return false;
  if (c.stepIndex !== undefined && run.stepIndex !== c.stepIndex) return false;
  if (c.version !== undefined && run.version !== c.version) return false;
  if (c.leaseExpiredBefore && !(run.lease && run.lease.expiresAt.getTime() < c.leaseExpiredBefore.getTime())) return false;
  return true;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class RunBusyError extends Error {}

/**
 * Applies `update` to run `id` if it meets `cond`; the run after the update, or null when it
 * does not. With `skipIfBusy` (claims), a run another writer holds right now counts as not
 * meeting the condition instead of being waited for.
 */
export async function updateRun(
  db: Database,
  id: string,
  cond: RunCondition,
  update: UpdateFilter<RunDoc>,
  opts: { skipIfBusy?: boolean } = {},
): Promise<RunDoc | null> {
  if (!db.serializedUpdates) {
    return db.runs.findOneAndUpdate(conditionFilter(id, cond), update, { returnDocument: "after" });
  }
  const lockId = `runs:${id}`;
  const giveUpAt = Date.now() + 15_000;
  for (let attempt = 0; Date.now() < giveUpAt; attempt++) {
    const token = await tryLock(db, lockId);
    if (!token) {
      if (opts.skipIfBusy) return null;
      await sleep(1 + Math.random() * Math.min(25, 2 ** attempt));
      continue;
    }
    try {
      const cur = await db.runs.findOne({ _id: id });
      if (!cur || !matches(cur, cond)) return null;
      return await db.runs.findOneAndUpdate({ _id: id }, update, { returnDocument: "after" });
    } finally {
      await db.locks.deleteOne({ _id: lockId, token });
    }
  }
  throw new RunBusyError(`run ${id} stayed locked`);
}
