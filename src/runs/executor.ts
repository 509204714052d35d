// Executors: claim queued runs through MongoDB alone and run their steps as the run's user.
//
// Claiming. One query lists the oldest QUEUED runs (by createdAt) and RUNNING runs whose
// lease expired (their executor died or stopped); each is then claimed by id with one
// conditional update (runs/cas.ts) that makes it RUNNING with a lease {owner, expiresAt}. The lease owner is unique per claim
// (`<executor id>#<n>`), so even a re-claim by the same process invalidates the old holder.
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
// id; every other run within pollIntervalMs. A freed slot claims the next run immediately.
//
// Recovery. After a crash the lease expires and another executor resumes at `stepIndex`:
// a step that was RUNNING runs again (data steps are at-least-once across crashes, exactly
// once otherwise); a `wait` keeps its original start and waits only the remainder. A step
// started MAX_ATTEMPTS times without finishing fails the run, so no run stays ongoing forever.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { MongoNetworkError, MongoServerSelectionError, type UpdateFilter } from "mongodb";
import type { Deps } from "../deps.js";
import type { RunDoc, StepDoc } from "../db/types.js";
import { writeRunActivity } from "./activity.js";
import { RUN_CANCELLED, RUN_CHANGED, RUN_QUEUED } from "./model.js";
import { updateRun, type RunCondition } from "./cas.js";
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
  const log = logger.child({ executor: executorId });
  const active = new Map<string, ActiveRun>();
  let claimSeq = 0;
  let claiming = 0;
  let stopping = false;

  const free = () => concurrency - active.size - claiming;
  const newLease = (now: Date) => ({ owner: `${executorId}#${++claimSeq}`, expiresAt: new Date(now.getTime() + leaseMs) });

  async function claimById(id: string): Promise<RunDoc | null> {
    const now = new Date();
    return updateRun(db, id, { state: ["QUEUED"] }, { $set: { state: "RUNNING", lease: newLease(now), startedAt: now, updatedAt: now }, $inc: { version: 1 } });
  }

  /**
   * Candidates from the last listing not claimed yet. Listing runs is the one query that is
   * not by id (and a full scan on FerretDB), so one listing serves several freed slots.
   */
  let buffer: { _id: string; state: RunDoc["state"] }[] = [];

  async function claimOne(c: { _id: string; state: RunDoc["state"] }): Promise<RunDoc | null> {
    if (active.has(c._id)) return null;
    const at = new Date();
    return c.state === "QUEUED"
      ? updateRun(db, c._id, { state: ["QUEUED"] }, { $set: { state: "RUNNING", lease: newLease(at), startedAt: at, updatedAt: at }, $inc: { version: 1 } }, { skipIfBusy: true })
      : updateRun(db, c._id, { state: ["RUNNING"], leaseExpiredBefore: at }, { $set: { lease: newLease(at), updatedAt: at }, $inc: { version: 1 } }, { skipIfBusy: true });
  }

  /**
   * Claims up to `want` runs: the oldest QUEUED ones and RUNNING ones whose lease expired,
   * listed with one query, each then claimed by id with a conditional update.
   */
  async function claimSome(want: number): Promise<RunDoc[]> {
    const got: RunDoc[] = [];
    for (let listed = false; got.length < want && !stopping; ) {
      if (buffer.length === 0) {
        if (listed) break;
        listed = true;
        const now = new Date();
        buffer = await db.runs
          .find(
            { $or: [{ state: "QUEUED" }, { state: "RUNNING", "lease.expiresAt": { $lt: now } }] },
            { sort: { createdAt: 1 }, limit: Math.max(want, concurrency) * 2, projection: { _id: 1, state: 1 } },
          )
          .toArray();
        continue;
      }
      const run = await claimOne(buffer.shift()!);
      if (run) got.push(run);
    }
    return got;
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
      void updateRun(db, run._id, { leaseOwner: owner }, { $set: { "lease.expiresAt": new Date() } }).catch(() => {});
      return;
    }
    const abort = new AbortController();
    const entry: ActiveRun = { abort, done: Promise.resolve() };
    active.set(run._id, entry);
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
    let lastRenew = Date.now();
    const stopWith = (reason: StopReason) => {
      const ac = active.get(id)?.abort;
      if (ac && !ac.signal.aborted) ac.abort(reason);
    };

    // Renew the lease; while waiting, also notice cancellation from other instances promptly.
    const heartbeat = setInterval(() => {
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
      runLog.info({ error, step: index }, "run failed");
      await writeRunActivity(db, run, "workflow.run.failed", { error, step: index });
    };

    /** Leaves the run to another executor at once (stop): the lease expires now. */
    const release = async () => {
      await updateRun(db, id, cond, { $set: { "lease.expiresAt": new Date() } });
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
          await writeRunActivity(db, run, "workflow.run.succeeded", {});
          return;
        }
      }
      // stepIndex at or past the end: nothing left to run (zero-step workflow).
      const now = new Date();
      if (await update({}, { $set: { state: "SUCCEEDED", error: "", finishedAt: now, updatedAt: now, lease: null, activeKey: id }, $inc: { version: 1 } })) {
        await writeRunActivity(db, run, "workflow.run.succeeded", {});
      }
    } finally {
      clearInterval(heartbeat);
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
  void pump();
  log.info({ concurrency, pollIntervalMs, leaseMs }, "executors started");

  return {
    id: executorId,
    async stop() {
      if (stopping) return;
      stopping = true;
      clearInterval(poller);
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
