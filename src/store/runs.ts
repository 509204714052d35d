// Runs as stored. Every change of a run is one conditional single-document update; the
// unique index on `activeKey` allows one ongoing run per (workflow, record).
import type { Database } from "./connection.js";
import { batched, ok, sharedByKey } from "../lib/batch.js";
import { groupedInsert, STORE_BATCHING } from "./group-commit.js";
import { isDuplicateKey } from "./errors.js";
import { runSearch, type RunSearch } from "./run-search.js";
import { ONGOING_STATES, type PendingLogEntry, type RunDoc, type RunState, type StepResultDoc } from "./types.js";

export interface Lease {
  owner: string;
  expiresAt: Date;
}

/** What a run must be for a change to apply. */
interface RunCondition {
  state?: RunState[];
  leaseOwner?: string;
  stepIndex?: number;
  version?: number;
}

/** A step's start, as its executor records it. */
export interface StepStart {
  startedAt: Date;
  attempts: number;
  executor: string;
}

export interface Claim {
  run: RunDoc;
  /** The run was RUNNING under an expired lease, not QUEUED. */
  takeover: boolean;
  /** The run was parked on a wait step that is now due. */
  resumed: boolean;
}

/** Which runs a claim may take, for fairness between organizations, then between their projects. */
export interface ClaimScope {
  /** Only QUEUED runs (a queued-run event: it has one to claim). */
  queuedOnly?: boolean;
  /** Organizations that may not take one more slot now (the claimer's per-organization limit). */
  busyOrganizations?: string[];
  /** Projects that may not take one more slot now (the claimer's per-project limit). */
  busyProjects?: string[];
  /** Round-robin over organizations: runs of organizations after this one (in id order) come first, then from the start. */
  afterOrganization?: string;
  /** Round-robin over an organization's projects: its QUEUED runs of projects after this one come first. */
  afterProjectIn?(organizationId: string): string | undefined;
}

export type CreateOutcome = { created: true } | { created: false; ongoingRunId: string | null };

/**
 * The changes of a run once stored. Each returns the run after it, or null when it does not
 * apply: the owner's changes apply only while the run is RUNNING under `owner`'s lease (and, for
 * a step, at step `index`), so not once it was cancelled, finished or taken over. Changes other
 * than the lease's bump `version`, which wakes followers. `log`: the activity entries the change
 * implies, stored with it (RunDoc.pendingLog).
 */
export interface RunChanges {
  /** Extends the lease to `until` (not a visible change). */
  renewLease(id: string, owner: string, until: Date): Promise<RunDoc | null>;
  /** Puts `lease` in place of `owner`'s (not a visible change). */
  replaceLease(id: string, owner: string, lease: Lease): Promise<RunDoc | null>;
  /** Step `index` becomes RUNNING; the lease is extended to `leaseUntil`. */
  startStep(id: string, owner: string, index: number, start: StepStart, leaseUntil: Date): Promise<RunDoc | null>;
  /** Step `index` SUCCEEDED with `output`; the run moves to the next step, its lease extended to `leaseUntil`. */
  completeStep(
    id: string,
    owner: string,
    index: number,
    output: Record<string, unknown> | null,
    leaseUntil: Date,
    log?: PendingLogEntry[],
  ): Promise<RunDoc | null>;
  /** The run's last step, `index`, SUCCEEDED with `output`, and the run with it. */
  completeLastStep(id: string, owner: string, index: number, output: Record<string, unknown> | null, log?: PendingLogEntry[]): Promise<RunDoc | null>;
  /** Parks the run on its wait step `index` until `until`: it stays RUNNING, with no lease. */
  park(id: string, owner: string, index: number, until: Date): Promise<RunDoc | null>;
  /** Finishes the run as `state` with `error`; `failedStep`, when not null, FAILED with it. */
  finish(id: string, owner: string, state: "SUCCEEDED" | "FAILED", error: string, failedStep: number | null, log?: PendingLogEntry[]): Promise<RunDoc | null>;
  /**
   * CANCELLED with `error` if the run is still ongoing at `version` (whoever holds it), and
   * `step`, when not null, with it.
   */
  cancel(id: string, version: number, step: number | null, error: string, log?: PendingLogEntry[]): Promise<RunDoc | null>;
  /** Moves run `id`'s pending entry `fromKey` to another position (`to`); false when the run no longer holds it there. */
  relocatePending(id: string, fromKey: string, to: Pick<PendingLogEntry, "key" | "seq" | "micros">): Promise<boolean>;
  /** Removes the pending entries `keys` from run `id`: they are in the log. */
  clearPending(id: string, keys: string[]): Promise<void>;
  /** At most `limit` runs holding pending entries (their ids and entries). */
  withPending(limit: number): Promise<Pick<RunDoc, "_id" | "pendingLog">[]>;
  /**
   * For benchmarks: run `id` SUCCEEDED past its `stepCount` steps, whatever its state, in a
   * write on `_id` alone (the embedded server scans for any other filter).
   */
  markSucceeded(id: string, stepCount: number): Promise<RunDoc | null>;
}

export interface RunStore extends RunChanges {
  /**
   * Stores a new QUEUED run, or names the ongoing run of its (workflow, record) when the
   * unique index refuses it. `ongoingRunId` is null only when that run finished between the
   * refusal and the look-up every time this tried.
   */
  create(run: RunDoc): Promise<CreateOutcome>;
  get(id: string): Promise<RunDoc | null>;
  /** The runs among `ids` (one query), in no particular order. */
  getMany(ids: string[]): Promise<RunDoc[]>;
  /** The runs that retry `id` (with the batch that started each), oldest first, at most `limit`. */
  retriesOf(id: string, limit: number): Promise<Pick<RunDoc, "_id" | "batchId" | "createdAt">[]>;
  /** The ongoing run holding `activeKey` (a (workflow, record) slot), if any. */
  ongoingOn(activeKey: string): Promise<Pick<RunDoc, "_id"> | null>;
  /**
   * Claims one run for `lease`, never one of a busy organization or project, each kind in
   * round-robin over organizations (the first after `afterOrganization` that has one,
   * wrapping around): unless `queuedOnly`, the RUNNING run whose lease expired first (its
   * executor died or let it go: a takeover), else the parked run due first (its wait is
   * over), else a QUEUED run (it becomes RUNNING): in the organization found, the oldest of
   * the first project after the last one claimed there. Runs already under way come first,
   * so that a steady stream of new runs never keeps a dead executor's runs waiting beyond
   * lease + poll. Null when there is none.
   */
  claimNext(lease: Lease, now: Date, opts?: ClaimScope): Promise<Claim | null>;
  /**
   * Whether the project has `limit` ongoing runs or more: counted (up to `limit`) at most once
   * every ONGOING_RECOUNT_MS per process and project, plus the runs this process stored since.
   */
  ongoingAtLeast(projectId: string, limit: number): Promise<boolean>;
  /** How many runs are QUEUED, and when the oldest of them was created (for metrics). */
  queueStats(): Promise<{ depth: number; oldest: Date | null }>;
  /** At most `limit` runs of a selection after `after` (none: from the first), in the order (createdAt, _id) `order`. */
  search: RunSearch;
}

/** The organization and project conditions of a fair claim: not busy, and (`after`) after the round-robin's place. */
function fairness(scope: ClaimScope, after?: string): Record<string, unknown> {
  const org = {
    ...(after !== undefined ? { $gt: after } : {}),
    ...(scope.busyOrganizations?.length ? { $nin: scope.busyOrganizations } : {}),
  };
  return {
    ...(Object.keys(org).length > 0 ? { organizationId: org } : {}),
    ...(scope.busyProjects?.length ? { projectId: { $nin: scope.busyProjects } } : {}),
  };
}

/** `find` over the organizations after the round-robin's place, then from the start (runs stored without one come first there). */
async function roundRobin<T>(scope: ClaimScope, find: (fair: Record<string, unknown>) => Promise<T | null>): Promise<T | null> {
  const after = scope.afterOrganization;
  return (after !== undefined ? await find(fairness(scope, after)) : null) ?? find(fairness(scope));
}

/**
 * RunStore.claimNext. Every kind of claim goes round-robin over organizations and skips busy
 * organizations and projects: a run whose lease expired, then a parked run that is due, then a
 * QUEUED run of the next organization that has one, from the project after the last one claimed
 * in that organization.
 */
function claims(d: Database): RunStore["claimNext"] {
  const claimQueued = (filter: Record<string, unknown>, lease: Lease, at: Date) =>
    d.runs.findOneAndUpdate(
      { state: "QUEUED", ...filter },
      { $set: { state: "RUNNING", lease, startedAt: at, updatedAt: at }, $inc: { version: 1 } },
      {
        sort: filter.organizationId !== undefined ? { organizationId: 1, projectId: 1, createdAt: 1 } : { projectId: 1, createdAt: 1 },
        returnDocument: "after",
      },
    );
  /** The oldest QUEUED run of the organization `next` names, from the project after its last one claimed. */
  async function claimIn(next: Pick<RunDoc, "organizationId" | "projectId">, scope: ClaimScope, lease: Lease, at: Date) {
    // A run stored without its organization: the oldest of its project.
    if (next.organizationId === undefined) return claimQueued({ projectId: next.projectId }, lease, at);
    const organizationId = next.organizationId;
    const notBusy = scope.busyProjects?.length ? { $nin: scope.busyProjects } : undefined;
    const after = scope.afterProjectIn?.(organizationId);
    const first = after !== undefined ? await claimQueued({ organizationId, projectId: { $gt: after, ...notBusy } }, lease, at) : null;
    return first ?? claimQueued({ organizationId, ...(notBusy ? { projectId: notBusy } : {}) }, lease, at);
  }
  return async (lease, now, scope = {}) => {
    if (!scope.queuedOnly) {
      const expired = await roundRobin(scope, (fair) =>
        d.runs.findOneAndUpdate(
          { state: "RUNNING", "lease.expiresAt": { $lt: now }, ...fair },
          { $set: { lease, updatedAt: now }, $inc: { version: 1 } },
          { sort: { "lease.expiresAt": 1 }, returnDocument: "after" },
        ),
      );
      if (expired) return { run: expired, takeover: true, resumed: false };
      const due = await roundRobin(scope, (fair) =>
        d.runs.findOneAndUpdate(
          { state: "RUNNING", waitUntil: { $lte: now }, ...fair },
          { $set: { lease, waitUntil: null, updatedAt: now }, $inc: { version: 1 } },
          { sort: { waitUntil: 1 }, returnDocument: "after" },
        ),
      );
      if (due) return { run: due, takeover: false, resumed: true };
    }
    const at = new Date(Math.max(now.getTime(), Date.now())); // a first query took some time
    // Another claimer may take the run found first: look again, a few times.
    for (let attempt = 0; attempt < 3; attempt++) {
      const next = await roundRobin(scope, (fair) =>
        d.runs.findOne(
          { state: "QUEUED", ...fair },
          { sort: { organizationId: 1, projectId: 1, createdAt: 1 }, projection: { organizationId: 1, projectId: 1 } },
        ),
      );
      if (!next) return null;
      const run = await claimIn(next, scope, lease, at);
      if (run) return { run, takeover: false, resumed: false };
    }
    return null;
  };
}

function conditionFilter(id: string, c: RunCondition): Record<string, unknown> {
  const f: Record<string, unknown> = { _id: id };
  if (c.state) f.state = c.state.length === 1 ? c.state[0] : { $in: c.state };
  if (c.leaseOwner !== undefined) f["lease.owner"] = c.leaseOwner;
  if (c.stepIndex !== undefined) f.stepIndex = c.stepIndex;
  if (c.version !== undefined) f.version = c.version;
  return f;
}

const owned = (owner: string, stepIndex?: number): RunCondition => ({
  state: ["RUNNING"],
  leaseOwner: owner,
  ...(stepIndex === undefined ? {} : { stepIndex }),
});

/**
 * The value of `activeKey` once a run has finished: unique (it ends with the run's id), never an
 * ongoing run's (it starts with a time, not a workflow id), and led by the finish time so that
 * finished runs are added at the end of the unique index and a retention sweep removes
 * neighbours. The run id alone (a random UUID) put each finished run at a random place of an
 * index as large as the stored runs, a page read from disk and rewritten per run.
 */
export function finishedActiveKey(runId: string, finishedAt: Date): string {
  return `${finishedAt.toISOString()}|${runId}`;
}

/** The fields that finish a run: final state, and the (workflow, record) slot freed for the next call. */
function finishing(runId: string, state: RunState, error: string, now: Date): Record<string, unknown> {
  return { state, error, finishedAt: now, updatedAt: now, lease: null, waitUntil: null, activeKey: finishedActiveKey(runId, now) };
}

/** `fields` of step `index`, as field paths. */
function stepFields(index: number, fields: Partial<StepResultDoc>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [`steps.${index}.${k}`, v]));
}

/** Tries of an insert whose (workflow, record) slot frees between the refusal and the look-up. */
const CREATE_TRIES = 3;

/** The changes of a run by id, each one conditional findOneAndUpdate on `_id` (the primary key). */
function runChanges(d: Database): RunChanges {
  /** Sets `set` on run `id` if it meets `cond`, in one step, with the entries `log` implies; a `visible` change bumps `version`. */
  const change = (id: string, cond: RunCondition, set: Record<string, unknown>, visible = true, log: PendingLogEntry[] = []) =>
    d.runs.findOneAndUpdate(
      conditionFilter(id, cond),
      { $set: set, ...(visible ? { $inc: { version: 1 } } : {}), ...(log.length > 0 ? { $push: { pendingLog: { $each: log } } } : {}) },
      { returnDocument: "after" },
    );
  // The pending entries now in the log, removed in one command per round of writers.
  const clear = batched<{ id: string; keys: string[] }, void>(async (items) => {
    await d.runs.bulkWrite(
      items.map(({ id, keys }) => ({ updateOne: { filter: { _id: id }, update: { $pull: { pendingLog: { key: { $in: keys } } } } } })),
      { ordered: false },
    );
    return items.map(() => ok(undefined));
  }, STORE_BATCHING);
  return {
    renewLease: (id, owner, until) => change(id, owned(owner), { "lease.expiresAt": until }, false),
    replaceLease: (id, owner, lease) => change(id, owned(owner), { lease }, false),
    startStep(id, owner, index, start, leaseUntil) {
      const step = stepFields(index, {
        state: "RUNNING",
        startedAt: start.startedAt,
        finishedAt: null,
        error: "",
        attempts: start.attempts,
        executor: start.executor,
      });
      return change(id, owned(owner, index), { ...step, "lease.expiresAt": leaseUntil, updatedAt: new Date() });
    },
    completeStep(id, owner, index, output, leaseUntil, log) {
      const now = new Date();
      const step = stepFields(index, { state: "SUCCEEDED", finishedAt: now, output });
      return change(id, owned(owner, index), { ...step, stepIndex: index + 1, updatedAt: now, "lease.expiresAt": leaseUntil }, true, log);
    },
    completeLastStep(id, owner, index, output, log) {
      const now = new Date();
      const step = stepFields(index, { state: "SUCCEEDED", finishedAt: now, output });
      return change(id, owned(owner, index), { ...step, stepIndex: index + 1, ...finishing(id, "SUCCEEDED", "", now) }, true, log);
    },
    park: (id, owner, index, until) => change(id, owned(owner, index), { lease: null, waitUntil: until, updatedAt: new Date() }),
    finish(id, owner, state, error, failedStep, log) {
      const now = new Date();
      const step = failedStep === null ? {} : stepFields(failedStep, { state: "FAILED", error, finishedAt: now });
      return change(id, owned(owner), { ...finishing(id, state, error, now), ...step }, true, log);
    },
    cancel(id, version, step, error, log) {
      const now = new Date();
      const current = step === null ? {} : stepFields(step, { state: "CANCELLED", finishedAt: now });
      return change(id, { version, state: ONGOING_STATES }, { ...finishing(id, "CANCELLED", error, now), ...current }, true, log);
    },
    async relocatePending(id, fromKey, to) {
      const moved = { "pendingLog.$.key": to.key, "pendingLog.$.seq": to.seq, "pendingLog.$.micros": to.micros };
      return (await d.runs.updateOne({ _id: id, "pendingLog.key": fromKey }, { $set: moved })).matchedCount === 1;
    },
    clearPending: (id, keys) => clear({ id, keys }),
    withPending: (limit) =>
      // The sparse index on pendingLog.key holds only runs with entries not yet cleared.
      d.runs.find({ "pendingLog.key": { $gte: "" } }, { projection: { pendingLog: 1 }, limit }).toArray(),
    markSucceeded: (id, stepCount) => change(id, {}, { ...finishing(id, "SUCCEEDED", "", new Date()), stepIndex: stepCount }),
  };
}

/** How often a process counts a project's ongoing runs again (the quota may be passed by what all processes accept meanwhile). */
export const ONGOING_RECOUNT_MS = 1000;
/** Projects whose count a process keeps (then it counts them again). */
const MAX_COUNTED_PROJECTS = 10_000;

/** RunStore.ongoingAtLeast, and what tells it of each run this process stores. */
function ongoingCounts(d: Database) {
  const counted = new Map<string, { count: number; at: number }>();
  const countUpTo = (projectId: string, limit: number) => Promise.all(ONGOING_STATES.map((state) => d.runs.countDocuments({ state, projectId }, { limit })));
  // The calls of one moment share one count of a project.
  const recount = sharedByKey(async (key) => {
    const [projectId, limit] = JSON.parse(key) as [string, number];
    const at = Date.now();
    const count = (await countUpTo(projectId, limit)).reduce((a, b) => a + b, 0);
    if (counted.size >= MAX_COUNTED_PROJECTS) counted.clear();
    counted.set(projectId, { count, at });
    return count;
  }, STORE_BATCHING);
  return {
    async atLeast(projectId: string, limit: number): Promise<boolean> {
      const known = counted.get(projectId);
      if (known && Date.now() - known.at < ONGOING_RECOUNT_MS) return known.count >= limit;
      return (await recount(JSON.stringify([projectId, limit]))) >= limit;
    },
    stored(projectId: string) {
      const known = counted.get(projectId);
      if (known) known.count++;
    },
  };
}

export function runStore(d: Database): RunStore {
  // Runs stored together go in one insert; the unique index on activeKey refuses each duplicate alone.
  const insert = groupedInsert(() => d.runs);
  const ongoing = ongoingCounts(d);
  // The ongoing run of a record, for the calls refused together (a burst on one record shares one read).
  const ongoingRun = sharedByKey(async (activeKey) => (await d.runs.findOne({ activeKey }, { projection: { _id: 1 } }))?._id ?? null, STORE_BATCHING);
  return {
    async create(run) {
      for (let attempt = 0; attempt < CREATE_TRIES; attempt++) {
        try {
          await insert(run);
          ongoing.stored(run.projectId);
          return { created: true };
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
        }
        const ongoingRunId = await ongoingRun(run.activeKey);
        if (ongoingRunId) return { created: false, ongoingRunId };
      }
      return { created: false, ongoingRunId: null };
    },
    get: (id) => d.runs.findOne({ _id: id }),
    getMany: (ids) => d.runs.find({ _id: { $in: ids } }).toArray(),
    async retriesOf(id, limit) {
      // Served by the sparse retryOf index; a run has few retries, sorted here.
      const docs = await d.runs
        .find({ retryOf: id }, { projection: { _id: 1, batchId: 1, createdAt: 1 } })
        .limit(limit)
        .toArray();
      return docs.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a._id < b._id ? -1 : 1));
    },
    ongoingOn: (activeKey) => d.runs.findOne({ activeKey }, { projection: { _id: 1 } }),
    claimNext: claims(d),
    search: runSearch(d),
    ongoingAtLeast: ongoing.atLeast,
    async queueStats() {
      const [depth, oldest] = await Promise.all([
        d.runs.countDocuments({ state: "QUEUED" }),
        d.runs.findOne({ state: "QUEUED" }, { sort: { createdAt: 1 }, projection: { createdAt: 1 } }),
      ]);
      return { depth, oldest: oldest?.createdAt ?? null };
    },
    ...runChanges(d),
  };
}
