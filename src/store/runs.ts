// Runs as stored. Every change of a run is one conditional single-document update; the
// unique index on `activeKey` allows one ongoing run per (workflow, record).
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";
import type { RunDoc, RunState } from "./types.js";

export interface Lease {
  owner: string;
  expiresAt: Date;
}

/** What a run must be for a transition to apply. */
export interface RunCondition {
  state?: RunState[];
  leaseOwner?: string;
  stepIndex?: number;
  version?: number;
}

export interface Claim {
  run: RunDoc;
  /** The run was RUNNING under an expired lease, not QUEUED. */
  takeover: boolean;
  /** The run was parked on a wait step that is now due. */
  resumed: boolean;
}

/** Which runs a claim may take, for fairness between projects. */
export interface ClaimScope {
  /** Only QUEUED runs (a queued-run event: it has one to claim). */
  queuedOnly?: boolean;
  /** Projects that may not take one more slot now (the claimer's per-project limit). */
  busyProjects?: string[];
  /** Round-robin: QUEUED runs of projects after this one (in id order) come first, then from the start. */
  afterProject?: string;
}

export type CreateOutcome = { created: true } | { created: false; ongoingRunId: string | null };

export interface RunStore {
  /**
   * Stores a new QUEUED run, or names the ongoing run of its (workflow, record) when the
   * unique index refuses it. `ongoingRunId` is null only when that run finished between the
   * refusal and the look-up every time this tried.
   */
  create(run: RunDoc): Promise<CreateOutcome>;
  get(id: string): Promise<RunDoc | null>;
  /** The runs among `ids` (one query), in no particular order. */
  getMany(ids: string[]): Promise<RunDoc[]>;
  /**
   * Claims one run for `lease`, never one of `busyProjects`: unless `queuedOnly`, the RUNNING
   * run whose lease expired first (its executor died or let it go: a takeover), else the
   * parked run due first (its wait is over), else a QUEUED run (it becomes RUNNING): the
   * oldest of the first project after `afterProject` that has one, wrapping around. Runs
   * already under way come first, so that a steady stream of new runs never keeps a dead
   * executor's runs waiting beyond lease + poll. Null when there is none.
   */
  claimNext(lease: Lease, now: Date, opts?: ClaimScope): Promise<Claim | null>;
  /**
   * Sets `set` on run `id` if it meets `cond`, in one step, and returns the run after it (null
   * when it does not meet it). `visible` changes bump `version`, which wakes followers.
   */
  transition(id: string, cond: RunCondition, set: Record<string, unknown>, opts?: { visible?: boolean }): Promise<RunDoc | null>;
  /** How many runs are QUEUED, and when the oldest of them was created (for metrics). */
  queueStats(): Promise<{ depth: number; oldest: Date | null }>;
}

function conditionFilter(id: string, c: RunCondition): Record<string, unknown> {
  const f: Record<string, unknown> = { _id: id };
  if (c.state) f.state = c.state.length === 1 ? c.state[0] : { $in: c.state };
  if (c.leaseOwner !== undefined) f["lease.owner"] = c.leaseOwner;
  if (c.stepIndex !== undefined) f.stepIndex = c.stepIndex;
  if (c.version !== undefined) f.version = c.version;
  return f;
}

/** Tries of an insert whose (workflow, record) slot frees between the refusal and the look-up. */
const CREATE_TRIES = 3;

export function runStore(d: Database): RunStore {
  return {
    async create(run) {
      for (let attempt = 0; attempt < CREATE_TRIES; attempt++) {
        try {
          await d.runs.insertOne(run);
          return { created: true };
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
        const ongoing = await d.runs.findOne({ activeKey: run.activeKey }, { projection: { _id: 1 } });
        if (ongoing) return { created: false, ongoingRunId: ongoing._id };
      }
      return { created: false, ongoingRunId: null };
    },
    get: (id) => d.runs.findOne({ _id: id }),
    getMany: (ids) => d.runs.find({ _id: { $in: ids } }).toArray(),
    async claimNext(lease, now, opts = {}) {
      const notBusy = opts.busyProjects?.length ? { projectId: { $nin: opts.busyProjects } } : {};
      if (!opts.queuedOnly) {
        const expired = await d.runs.findOneAndUpdate(
          { state: "RUNNING", "lease.expiresAt": { $lt: now }, ...notBusy },
          { $set: { lease, updatedAt: now }, $inc: { version: 1 } },
          { sort: { "lease.expiresAt": 1 }, returnDocument: "after" },
        );
        if (expired) return { run: expired, takeover: true, resumed: false };
        const due = await d.runs.findOneAndUpdate(
          { state: "RUNNING", waitUntil: { $lte: now }, ...notBusy },
          { $set: { lease, waitUntil: null, updatedAt: now }, $inc: { version: 1 } },
          { sort: { waitUntil: 1 }, returnDocument: "after" },
        );
        if (due) return { run: due, takeover: false, resumed: true };
      }
      const at = new Date(Math.max(now.getTime(), Date.now())); // a first query took some time
      const claimQueued = (projectId: Record<string, unknown>) =>
        d.runs.findOneAndUpdate(
          { state: "QUEUED", projectId },
          { $set: { state: "RUNNING", lease, startedAt: at, updatedAt: at }, $inc: { version: 1 } },
          { sort: { projectId: 1, createdAt: 1 }, returnDocument: "after" },
        );
      const busy = opts.busyProjects?.length ? { $nin: opts.busyProjects } : { $exists: true };
      let queued = opts.afterProject !== undefined ? await claimQueued({ ...busy, $gt: opts.afterProject }) : null;
      queued ??= await claimQueued(busy);
      return queued && { run: queued, takeover: false, resumed: false };
    },
    async queueStats() {
      const [depth, oldest] = await Promise.all([
        d.runs.countDocuments({ state: "QUEUED" }),
        d.runs.findOne({ state: "QUEUED" }, { sort: { createdAt: 1 }, projection: { createdAt: 1 } }),
      ]);
      return { depth, oldest: oldest?.createdAt ?? null };
    },
    transition(id, cond, set, opts = {}) {
      const update = opts.visible === false ? { $set: set } : { $set: set, $inc: { version: 1 } };
      return d.runs.findOneAndUpdate(conditionFilter(id, cond), update, { returnDocument: "after" });
    },
  };
}
