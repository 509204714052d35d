// Run batches as stored, and what each did with each run. A batch is worked through like a run
// is: claimed under a lease by one process at a time, and every change is one conditional
// single-document update, so a batch whose lease moved on (its process died, or it was
// cancelled) changes nothing more.
import { createHash } from "node:crypto";
import type { Database } from "./connection.js";
import type { RunKey } from "./run-search.js";
import { isDuplicateKey } from "./errors.js";
import type { Lease } from "./runs.js";
import { ONGOING_STATES, type RunBatchDoc, type RunBatchItemDoc, type RunBatchReasonDoc, type RunDoc } from "./types.js";

/** How many runs of one reason a batch names (RunBatchReason.run_ids). */
export const REASON_RUN_IDS = 20;

/** Where a list page of batches starts: after (newest first) the batch with this creation time and id. */
/** A batch's place in the list order (createdAt, _id): the runs' own kind of position. */
export type RunBatchKey = RunKey;

/** One run handled: what the batch's counters and cursor move by. */
export interface RunBatchStep {
  run: Pick<RunDoc, "_id" | "createdAt">;
  outcome: RunBatchItemDoc["outcome"];
  reason: string;
}

export interface RunBatchStore {
  create(batch: RunBatchDoc): Promise<void>;
  get(id: string): Promise<RunBatchDoc | null>;
  /** Claims the RUNNING batch whose lease expired first (a new batch's lease has expired from the start); null when none. */
  claim(lease: Lease, now: Date): Promise<RunBatchDoc | null>;
  /** Extends `owner`'s lease; null when the batch is no longer `owner`'s. */
  renew(id: string, owner: string, until: Date): Promise<RunBatchDoc | null>;
  /** Lets another process take the batch at once. */
  release(id: string, owner: string): Promise<void>;
  /**
   * The walk moves past `step.run` (from the cursor `afterId`, null at the start), its outcome
   * counted, in one update under `owner`'s lease (extended to `leaseUntil`): null when the
   * lease moved on or another update moved the cursor first. A cancelled batch still counts the
   * run in flight when it was cancelled (its state is in the answer).
   */
  progress(id: string, owner: string, afterId: string | null, step: RunBatchStep, leaseUntil: Date): Promise<RunBatchDoc | null>;
  /** RUNNING → SUCCEEDED (every run handled) or FAILED with `error`, under `owner`'s lease; null when it does not apply. */
  finish(id: string, owner: string, state: "SUCCEEDED" | "FAILED", error: string): Promise<RunBatchDoc | null>;
  /** RUNNING → CANCELLED, whoever holds it; null when it is not RUNNING. */
  cancel(id: string): Promise<RunBatchDoc | null>;
  /** An environment's batches (only `createdById`'s when given), newest first, after `after`. */
  list(environmentId: string, createdById: string | undefined, after: RunBatchKey | undefined, limit: number): Promise<RunBatchDoc[]>;
  /** What batch `batchId` did with run `runId`, if it did anything yet. */
  item(batchId: string, runId: string): Promise<RunBatchItemDoc | null>;
  /** Stores what the batch did with a run; the one stored first when there is one already. */
  putItem(item: RunBatchItemDoc): Promise<RunBatchItemDoc>;
  /** Whether the batch has `limit` runs ongoing or more (reads at most `limit`). */
  ongoingAtLeast(batchId: string, limit: number): Promise<boolean>;
}

/** The key of a reason in RunBatchDoc.reasons: a field name free of dots and dollars. */
export function reasonKey(outcome: string, reason: string): string {
  return createHash("sha256").update(`${outcome}\n${reason}`).digest("hex").slice(0, 24);
}

/** The update that counts one run's outcome (and its reason, when skipped or failed). */
function counting(step: RunBatchStep): { $inc: Record<string, number>; $set: Record<string, unknown>; $push?: Record<string, unknown> } {
  const inc: Record<string, number> = { matched: 1, [step.outcome]: 1 };
  if (step.outcome === "done") return { $inc: inc, $set: {} };
  const key = `reasons.${reasonKey(step.outcome, step.reason)}`;
  inc[`${key}.count`] = 1;
  const outcome: RunBatchReasonDoc["outcome"] = step.outcome;
  return {
    $inc: inc,
    $set: { [`${key}.outcome`]: outcome, [`${key}.reason`]: step.reason },
    $push: { [`${key}.runIds`]: { $each: [step.run._id], $slice: REASON_RUN_IDS } },
  };
}

export function runBatchStore(d: Database): RunBatchStore {
  const owned = (id: string, owner: string) => ({ _id: id, state: "RUNNING" as const, "lease.owner": owner });
  return {
    async create(batch) {
      await d.runBatches.insertOne(batch);
    },
    get: (id) => d.runBatches.findOne({ _id: id }),
    claim: (lease, now) =>
      d.runBatches.findOneAndUpdate(
        { state: "RUNNING", "lease.expiresAt": { $lt: now } },
        { $set: { lease } },
        { sort: { "lease.expiresAt": 1 }, returnDocument: "after" },
      ),
    renew: (id, owner, until) => d.runBatches.findOneAndUpdate(owned(id, owner), { $set: { "lease.expiresAt": until } }, { returnDocument: "after" }),
    async release(id, owner) {
      await d.runBatches.updateOne(owned(id, owner), { $set: { lease: { owner: `${owner}/released`, expiresAt: new Date(0) } } });
    },
    progress(id, owner, afterId, step, leaseUntil) {
      const now = new Date();
      const count = counting(step);
      return d.runBatches.findOneAndUpdate(
        { _id: id, "lease.owner": owner, ...(afterId === null ? { cursor: null } : { "cursor.id": afterId }) },
        {
          $set: { ...count.$set, cursor: { createdAt: step.run.createdAt, id: step.run._id }, updatedAt: now, "lease.expiresAt": leaseUntil },
          $inc: count.$inc,
          ...(count.$push ? { $push: count.$push } : {}),
        },
        { returnDocument: "after" },
      );
    },
    finish(id, owner, state, error) {
      const now = new Date();
      return d.runBatches.findOneAndUpdate(
        owned(id, owner),
        { $set: { state, error, finishedAt: now, updatedAt: now, lease: null } },
        { returnDocument: "after" },
      );
    },
    cancel(id) {
      const now = new Date();
      // The lease stays: a run in flight when it was cancelled is still counted (progress).
      return d.runBatches.findOneAndUpdate(
        { _id: id, state: "RUNNING" },
        { $set: { state: "CANCELLED", finishedAt: now, updatedAt: now } },
        { returnDocument: "after" },
      );
    },
    list(environmentId, createdById, after, limit) {
      const base = { environmentId, ...(createdById === undefined ? {} : { "createdBy.id": createdById }) };
      const filter = after ? { ...base, $or: [{ createdAt: { $lt: after.createdAt } }, { createdAt: after.createdAt, _id: { $lt: after.id } }] } : base;
      return d.runBatches.find(filter).sort({ createdAt: -1, _id: -1 }).limit(limit).toArray();
    },
    item: (batchId, runId) => d.runBatchItems.findOne({ _id: `${batchId}:${runId}` }),
    async putItem(item) {
      try {
        await d.runBatchItems.insertOne(item);
        return item;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        return (await d.runBatchItems.findOne({ _id: item._id })) ?? item;
      }
    },
    async ongoingAtLeast(batchId, limit) {
      return (await d.runs.countDocuments({ batchId, state: { $in: ONGOING_STATES } }, { limit })) >= limit;
    },
  };
}
