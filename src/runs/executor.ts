// Executors: claim queued runs through MongoDB alone and run their steps as the run's user.
//
// Claiming. Runs are found through the work queue (runs/queue.ts: `run_queue`, one entry per
// run, written right after the run): its head is listed with no filter in natural order
// (pushed down to SQLite on FerretDB, whose other queries scan whole collections) and each
// run is claimed by id with one conditional update (runs/cas.ts) that makes it RUNNING with
// a lease {owner, expiresAt}; the entry is then dropped. Entries are hints: the claim
// re-checks state and lease, so a stale or duplicate entry never runs a step twice. The
// lease owner is unique per claim (`<executor id>#<n>`), so even a re-claim by the same
// process invalidates the old holder.
//
// Ownership. Every later change of the run is one conditional update (runs/cas.ts: one
// findOneAndUpdate on MongoDB; serialized by a lock document on FerretDB, whose updates are
// not isolated) on
// {_id, state: "RUNNING", "lease.owner": me} (plus the step index for step transitions).
// When it matches nothing, the run was cancelled or taken over: the executor stops touching
// it. The lease is renewed every leaseMs/3, and every step start renews it too, so a data
// step (a few quick queries) always runs well inside a valid lease; no step of a run ever
// runs in two executors at once.
//
// Pick-up. A run queued on this instance (deps.events "run.queued") is claimed at once by
// id (primary-key operations only); every other run within pollIntervalMs (a queue listing).
// A freed slot claims the next run immediately.
//
// Recovery. A sweep every max(poll, leaseMs/3) — the one query by state, a scan of runs on
// FerretDB, never on the pick-up path — puts back on the queue the RUNNING runs whose lease
// expired (their executor died) and QUEUED runs that lost their entry (a crash between the
// two inserts). A stopping executor releases its runs and queues them again at once.
// Another executor then resumes at `stepIndex`:
// a step that was RUNNING runs again (data steps are at-least-once across crashes, exactly
// once otherwise); a `wait` keeps its original start and waits only the remainder. A step
// started MAX_ATTEMPTS times without finishing fails the run, so no run stays ongoing forever.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { MongoNetworkError, MongoServerSelectionError, type UpdateFilter } from "mongodb";
import type { Deps } from "../deps.js";
import type { RunDoc, StepDoc } from "../db/types.js";
import { writeRunActivity } from "./activity.js";
import { isFinished, RUN_CANCELLED, RUN_CHANGED, RUN_QUEUED } from "./model.js";
import { updateRun, type RunCondition } from "./cas.js";
import { dequeueRun, enqueueRun, listQueue, listRunning, markRunning, unmarkRunning } from "./queue.js";
import { runDataStep, StepFailure } from "./steps.js";

export interface Executors {
  /** This process's executor id (lease owners are `<id>#<n>`). */
  id: string;
  stop(): Promise<void>;
}

/** A step started this many times without finishing fails its run. */
export const MAX_ATTEMPTS = 5;
/** Longest `wait` step, in seconds (WaitStep in common.proto). */
export const MAX_WAIT_SECONDS = 86_400;
/** The orphan sweep queues a QUEUED run without a queue entry once it is this old (its entry is written right after the run). */
export const QUEUED_GRACE_MS = 2_000;
/** The orphan sweep (a scan of runs on FerretDB) runs at start and then this often. */
export const ORPHAN_SWEEP_MS = 60_000;
/** At most this many runs queued per orphan sweep. */
const SWEEP_LIMIT = 1_000;
const RUNNING_LIST_LIMIT = 100_000;

type StopReason = "cancelled" | "lost" | "stopping";

interface ActiveRun {
  abort: AbortController;
  done: Promise<void>;
}

function isTransient(err: unknown): boolean {
  return err instanceof MongoNetworkError || err instanceof MongoServerSelectionError;
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, Math.max(0, ms));
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export function startExecutors(deps: Deps): Executors {
  const { db, logger, events } = deps;
  const { concurrency, pollIntervalMs, leaseMs } = deps.config.executor;
  const executorId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const renewEveryMs = Math.max(100, Math.floor(leaseMs / 3));
  const sweepEveryMs = Math.max(pollIntervalMs, renewEveryMs);
  const log = logger.child({ executor: executorId });
  const active = new Map<string, ActiveRun>();
  let claimSeq = 0;
  let claiming = 0;
  let stopping = false;

  const free = () => concurrency - active.size - claiming;
  const newLease = (now: Date) => ({ owner: `${executorId}#${++claimSeq}`, expiresAt: new Date(now.getTime() + leaseMs) });

  const claimQueued = (id: string, at: Date) =>
    updateRun(db, id, { state: ["QUEUED"] }, { $set: { state: "RUNNING", lease: newLease(at), startedAt: at, updatedAt: at }, $inc: { version: 1 } }, { skipIfBusy: true });
  const claimExpired = (id: string, at: Date) =>
    updateRun(db, id, { state: ["RUNNING"], leaseExpiredBefore: at }, { $set: { lease: newLease(at), updatedAt: at }, $inc: { version: 1 } }, { skipIfBusy: true });
  /** Drops a queue entry; a failure only leaves a hint that the next look resolves. */
  const dequeue = (id: string) => void dequeueRun(db, id).catch((err: unknown) => log.debug({ err, runId: id }, "could not drop a queue entry"));

  /** Same-instance pick-up (run.queued): pure primary-key operations, no listing. */
  async function claimById(id: string): Promise<RunDoc | null> {
    const now = new Date();
    const run = await updateRun(db, id, { state: ["QUEUED"] }, { $set: { state: "RUNNING", lease: newLease(now), startedAt: now, updatedAt: now }, $inc: { version: 1 } });
    if (run) dequeue(id);
    return run;
  }

  /**
   * Claims the run of one queue entry, by id, and resolves the entry: dropped once the run is
   * claimed, finished, gone or held by a live lease (if that holder dies, the sweep puts the
   * run back); kept when the run is merely busy right now (another writer holds its lock).
   */
  async function claimEntry(id: string): Promise<RunDoc | null> {
    const cur = await db.runs.findOne({ _id: id }, { projection: { state: 1, lease: 1 } });
    const at = new Date();
    let run: RunDoc | null = null;
    if (cur?.state === "QUEUED") run = await claimQueued(id, at);
    else if (cur?.state === "RUNNING" && (!cur.lease || cur.lease.expiresAt.getTime() < at.getTime())) run = await claimExpired(id, at);
    else {
      dequeue(id); // gone, finished, or RUNNING under a live lease
      return null;
    }
    if (run) dequeue(id);
    return run;
  }

  /**
   * Claims up to `want` runs from the head of the work queue (one cheap listing: no filter,
   * natural order), each by id with a conditional update. The head is shuffled so that
   * executors of several processes looking at once mostly try different runs.
   */
  async function claimSome(want: number): Promise<RunDoc[]> {
    const got: RunDoc[] = [];
    const entries = await listQueue(db, want * 2 + concurrency);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    for (const e of entries) {
      if (got.length >= want || stopping) break;
      const run = await claimEntry(e._id);
      if (run) got.push(run);
    }
    return got;
  }

  /**
   * Lease sweep (every sweepEveryMs): reads the running_runs list (claimed runs; short and
   * unfiltered) and each of its runs by id. A RUNNING run whose lease expired (its executor
   * died) goes back on the queue; entries of finished or unknown runs are dropped.
   */
  let leaseSweeping = false;
  async function sweepLeases(): Promise<void> {
    if (leaseSweeping || stopping) return;
    leaseSweeping = true;
    try {
      const ids = await listRunning(db, RUNNING_LIST_LIMIT);
      const expired: string[] = [];
      for (let i = 0; i < ids.length; i += 16) {
        await Promise.all(
          ids.slice(i, i + 16).map(async (id) => {
            const run = await db.runs.findOne({ _id: id }, { projection: { state: 1, lease: 1 } });
            if (!run || isFinished(run.state)) return unmarkRunning(db, id);
            if (run.state === "RUNNING" && (!run.lease || run.lease.expiresAt.getTime() < Date.now())) {
              expired.push(id);
              await enqueueRun(db, id);
            }
          }),
        );
      }
      if (expired.length > 0) {
        log.info({ expired }, "lease sweep re-queued runs whose lease expired");
        void pump();
      }
    } catch (err) {
      if (!stopping) log.warn({ err }, "sweeping leases failed");
    } finally {
      leaseSweeping = false;
    }
  }

  /**
   * Orphan sweep (at start, then every ORPHAN_SWEEP_MS): the one query on run state — a scan
   * of runs on FerretDB, so rare and never on the pick-up path. Queues QUEUED runs that have
   * no queue entry (a crash between the run insert and the queue insert, runs stored by an
   * older version) and RUNNING runs with an expired lease missing from running_runs.
   */
  let orphanSweeping = false;
  async function sweepOrphans(): Promise<void> {
    if (orphanSweeping || stopping) return;
    orphanSweeping = true;
    try {
      const now = new Date();
      const found = await db.runs
        .find(
          { $or: [{ state: "QUEUED", createdAt: { $lt: new Date(now.getTime() - QUEUED_GRACE_MS) } }, { state: "RUNNING", "lease.expiresAt": { $lt: now } }] },
          { projection: { _id: 1 }, limit: SWEEP_LIMIT },
        )
        .toArray();
      if (found.length === 0) return;
      const ids = found.map((r) => r._id);
      const queued = new Set((await db.runQueue.find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray()).map((e) => e._id));
      const missing = ids.filter((id) => !queued.has(id));
      await Promise.all(missing.map((id) => enqueueRun(db, id, now)));
      if (missing.length > 0) log.info({ runs: missing }, "orphan sweep queued runs that had no queue entry");
      void pump();
    } catch (err) {
      if (!stopping) log.warn({ err }, "sweeping runs failed");
    } finally {
      orphanSweeping = false;
    }
  }

  let pumping = false;
  let pumpAgain = false;
  /** Claims runs while there are free slots and claimable runs. */
  async function pump(again = true): Promise<void> {
    if (stopping) return;
    if (pumping) {
      // A freed slot asks for another look once this one is done; a poll tick does not.
      if (again) pumpAgain = true;
      return;
    }
    pumping = true;
    try {
      do {
        pumpAgain = false;
        while (!stopping && free() > 0) {
          const want = free();
          claiming += want;
          let runs: RunDoc[];
          try {
            runs = await claimSome(want);
          } finally {
            claiming -= want;
          }
          for (const run of runs) start(run);
          if (runs.length < want) break; // nothing more to claim now
        }
      } while (pumpAgain && !stopping && free() > 0);
    } catch (err) {
      if (!stopping) log.warn({ err }, "claiming runs failed");
    } finally {
      pumping = false;
    }
  }

  function start(run: RunDoc): void {
    const owner = run.lease!.owner;
    const old = active.get(run._id);
    if (old) {
      // Our own lease on it had expired and we claimed it again: the old task has lost it
      // (its owner is stale); resume with the new claim once it has let go.
      old.abort.abort("lost" satisfies StopReason);
      void old.done.then(() => start(run));
      return;
    }
    if (stopping) {
      // Claimed while stopping: hand it back at once.
      void updateRun(db, run._id, { leaseOwner: owner }, { $set: { "lease.expiresAt": new Date() } })
        .then((res) => res && enqueueRun(db, run._id))
        .catch(() => {});
      return;
    }
    const abort = new AbortController();
    const entry: ActiveRun = { abort, done: Promise.resolve() };
    active.set(run._id, entry);
    // On the lease sweep's list (should we die, our lease expires and another executor resumes).
    void markRunning(db, run._id).catch((err: unknown) => log.warn({ err, runId: run._id }, "could not list a claimed run for the lease sweep"));
    entry.done = execute(run, owner, abort.signal)
      .catch((err) => log.error({ err, runId: run._id }, "executor failed on a run"))
      .finally(() => {
        active.delete(run._id);
        void pump();
      });
  }

  async function execute(claimed: RunDoc, owner: string, signal: AbortSignal): Promise<void> {
    const run = claimed;
    const id = run._id;
    const cond: RunCondition = { state: ["RUNNING"], leaseOwner: owner };
    const runLog = log.child({ runId: id });
    let waiting = false;
    let finished = false;
    let lastRenew = Date.now();
    const stopWith = (reason: StopReason) => {
      const ac = active.get(id)?.abort;
      if (ac && !ac.signal.aborted) ac.abort(reason);
    };

    // Renew the lease; while waiting, also notice cancellation from other instances promptly.
    // One beat at a time: under load a renewal can take longer than the tick, and piling up
    // renewals of one run would only fight over its lock (FerretDB) with the steps' updates.
    let beating = false;
    const heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      void (async () => {
        try {
          if (Date.now() - lastRenew >= renewEveryMs) {
            const res = await updateRun(db, id, cond, { $set: { "lease.expiresAt": new Date(Date.now() + leaseMs) } });
            if (!res) return stopWith("lost");
            lastRenew = Date.now();
          } else if (waiting) {
            const cur = await db.runs.findOne({ _id: id }, { projection: { state: 1, "lease.owner": 1 } });
            if (!cur || cur.state !== "RUNNING" || cur.lease?.owner !== owner) stopWith(cur?.state === "CANCELLED" ? "cancelled" : "lost");
          }
        } catch (err) {
          runLog.warn({ err }, "lease renewal failed");
        } finally {
          beating = false;
        }
      })();
    }, Math.min(pollIntervalMs, renewEveryMs));

    /** One conditional update of the run; false when the run is no longer ours. */
    const update = async (more: RunCondition, upd: UpdateFilter<RunDoc>): Promise<boolean> => {
      const res = await updateRun(db, id, { ...cond, ...more }, upd);
      if (!res) return false;
      lastRenew = Date.now();
      events.emit(RUN_CHANGED, id);
      return true;
    };

    /** Finishes the run FAILED (with step `index` FAILED when given) in one update. */
    const fail = async (error: string, index: number | null): Promise<void> => {
      const now = new Date();
      const set: Record<string, unknown> = { state: "FAILED", error, finishedAt: now, updatedAt: now, lease: null, activeKey: id };
      if (index !== null) {
        set[`steps.${index}.state`] = "FAILED";
        set[`steps.${index}.error`] = error;
        set[`steps.${index}.finishedAt`] = now;
      }
      if (!(await update({}, { $set: set, $inc: { version: 1 } }))) return;
      finished = true;
      runLog.info({ error, step: index }, "run failed");
      await writeRunActivity(db, run, "workflow.run.failed", { error, step: index });
    };

    /** Leaves the run to another executor at once (stop): the lease expires now, and the run is queued again. */
    const release = async () => {
      if (await updateRun(db, id, cond, { $set: { "lease.expiresAt": new Date() } })) await enqueueRun(db, id);
    };

    try {
      const wf = await db.workflows.findOne({ _id: run.workflowId }, { projection: { versions: 1 } });
      const version = wf?.versions.find((v) => v.version === run.workflowVersion);
      if (!wf) return await fail("the workflow no longer exists", null);
      if (!version) return await fail(`version ${run.workflowVersion} of the workflow no longer exists`, null);
      const steps = version.steps;
      if (steps.length !== run.steps.length) return await fail(`the run's steps do not match version ${run.workflowVersion} of the workflow`, null);

      for (let i = run.stepIndex; i < steps.length; i++) {
        if (signal.aborted) {
          if (signal.reason === "stopping") await release();
          return;
        }
        const step = steps[i] as StepDoc;
        const prev = run.steps[i]!;
        const attempts = (prev.attempts ?? 0) + 1;
        if (attempts > MAX_ATTEMPTS) {
          return await fail(`step ${i} (${step.type}) was started ${MAX_ATTEMPTS} times without finishing`, i);
        }
        const now = new Date();
        // A resumed wait keeps its start, so it waits only the remainder.
        const startedAt = step.type === "wait" && prev.state === "RUNNING" && prev.startedAt ? prev.startedAt : now;
        const began = await update(
          { stepIndex: i },
          {
            $set: {
              [`steps.${i}.state`]: "RUNNING",
              [`steps.${i}.startedAt`]: startedAt,
              [`steps.${i}.finishedAt`]: null,
              [`steps.${i}.error`]: "",
              [`steps.${i}.attempts`]: attempts,
              [`steps.${i}.executor`]: executorId,
              "lease.expiresAt": new Date(now.getTime() + leaseMs),
              updatedAt: now,
            },
            $inc: { version: 1 },
          },
        );
        if (!began) return;
        prev.state = "RUNNING";
        prev.startedAt = startedAt;
        prev.attempts = attempts;

        let output: Record<string, unknown> | null = null;
        if (step.type === "wait") {
          const seconds = Number(step.seconds);
          if (!Number.isFinite(seconds) || seconds < 0 || seconds > MAX_WAIT_SECONDS) {
            return await fail(`wait: seconds must be between 0 and ${MAX_WAIT_SECONDS}`, i);
          }
          waiting = true;
          const elapsed = await sleep(startedAt.getTime() + seconds * 1000 - Date.now(), signal);
          waiting = false;
          if (!elapsed) {
            if (signal.reason === "stopping") await release();
            return;
          }
        } else {
          try {
            output = await runDataStep(deps, run, step);
          } catch (err) {
            if (err instanceof StepFailure) return await fail(err.message, i);
            if (isTransient(err)) throw err; // the lease expires; another attempt follows
            runLog.error({ err, step: i }, "step failed unexpectedly");
            return await fail(`step ${i} (${step.type}) failed: ${err instanceof Error ? err.message : String(err)}`, i);
          }
        }

        const end = new Date();
        const last = i === steps.length - 1;
        const set: Record<string, unknown> = {
          [`steps.${i}.state`]: "SUCCEEDED",
          [`steps.${i}.finishedAt`]: end,
          [`steps.${i}.output`]: output,
          stepIndex: i + 1,
          updatedAt: end,
        };
        if (last) Object.assign(set, { state: "SUCCEEDED", error: "", finishedAt: end, lease: null, activeKey: id });
        else set["lease.expiresAt"] = new Date(end.getTime() + leaseMs);
        if (!(await update({ stepIndex: i }, { $set: set, $inc: { version: 1 } }))) return;
        prev.state = "SUCCEEDED";
        if (last) {
          finished = true;
          await writeRunActivity(db, run, "workflow.run.succeeded", {});
          return;
        }
      }
      // stepIndex at or past the end: nothing left to run (zero-step workflow).
      const now = new Date();
      if (await update({}, { $set: { state: "SUCCEEDED", error: "", finishedAt: now, updatedAt: now, lease: null, activeKey: id }, $inc: { version: 1 } })) {
        finished = true;
        await writeRunActivity(db, run, "workflow.run.succeeded", {});
      }
    } finally {
      clearInterval(heartbeat);
      // A finished run never runs again: off the lease sweep's list (else the sweep drops it).
      if (finished || signal.reason === "cancelled") void unmarkRunning(db, id).catch(() => {});
    }
  }

  const onQueued = (id: string) => {
    if (stopping || typeof id !== "string" || free() <= 0) return; // a freed slot or the next poll picks it up
    claiming++;
    claimById(id).then(
      (run) => {
        claiming--;
        if (run) start(run);
      },
      (err) => {
        claiming--;
        log.warn({ err, runId: id }, "claiming a queued run failed");
      },
    );
  };
  const onCancelled = (id: string) => {
    const a = active.get(id)?.abort;
    if (a && !a.signal.aborted) a.abort("cancelled" satisfies StopReason);
  };
  events.on(RUN_QUEUED, onQueued);
  events.on(RUN_CANCELLED, onCancelled);
  const poller = setInterval(() => void pump(false), pollIntervalMs);
  const leaseSweeper = setInterval(() => void sweepLeases(), sweepEveryMs);
  const orphanSweeper = setInterval(() => void sweepOrphans(), ORPHAN_SWEEP_MS);
  void pump();
  void sweepLeases();
  void sweepOrphans(); // runs left behind by a previous life of the cluster
  log.info({ concurrency, pollIntervalMs, leaseMs, sweepEveryMs, orphanSweepMs: ORPHAN_SWEEP_MS }, "executors started");

  return {
    id: executorId,
    async stop() {
      if (stopping) return;
      stopping = true;
      clearInterval(poller);
      clearInterval(leaseSweeper);
      clearInterval(orphanSweeper);
      events.off(RUN_QUEUED, onQueued);
      events.off(RUN_CANCELLED, onCancelled);
      // Waits end now and leave their run to another executor; a data step in flight
      // finishes, then its run is released. Bounded: a lease left behind simply expires.
      for (const a of active.values()) a.abort.abort("stopping" satisfies StopReason);
      const all = Promise.allSettled([...active.values()].map((a) => a.done));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all, new Promise((r) => (timer = setTimeout(r, Math.min(leaseMs, 5000))))]);
      clearTimeout(timer);
      log.info({ left: active.size }, "executors stopped");
    },
  };
}
