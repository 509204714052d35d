// Runs one claimed run to its end (or until it is no longer this executor's): its steps in
// order, as the run's user, under a lease that a heartbeat keeps renewing.
//
// Every change of the run is conditional on {state: RUNNING, lease.owner: <this claim>}
// (domain/runs/state.ts). When one does not apply, the run was cancelled, finished or taken over,
// and the runner stops touching it. Each step start renews the lease too, so a data step (a
// few quick queries) always runs well inside a valid lease: no step of a run ever runs in two
// executors at once. A step cut off by a crash runs again, its effect made once (steps.ts: a
// set, a note of an id derived from the run and the step) and its entry written once; a step
// started MAX_ATTEMPTS times without finishing fails the run, so no run stays ongoing forever.
//
// A database outage mid-run (any read or write failing as unavailable) does not end the run:
// the runner keeps its place (and its run, which no other executor can claim before the
// lease expires), re-reads the run as soon as the database answers again and, if the run is
// still its own, goes on from the step the database says it is at — a step whose end was
// written before the outage is not run again, one that was cut off runs again (a new
// attempt). If the lease expired meanwhile and another executor took the run, the re-read
// shows it and the runner lets go. Each activity entry is stored with the change it describes
// (domain/runs/activity.ts): a step's with the step's end, the run's last with its end.
import type { Logger } from "pino";
import type { Deps } from "../deps.js";
import { isDatabaseFull, isUnavailable } from "../store/index.js";
import type { PendingLogEntry, RunDoc, StepDoc } from "../store/types.js";
import { putEntries, releaseEntries, runEntry } from "../domain/runs/activity.js";
import { MAX_WAIT_STEP_SECONDS, RUN_CHANGED } from "../domain/runs/model.js";
import { runDataStep, StepFailure, type StepEffect } from "./steps.js";
import { holdLease, type LeaseEnv } from "./lease.js";
import { sleepUnlessAborted } from "../lib/sleep.js";

/** A step started this many times without finishing fails its run. */
export const MAX_ATTEMPTS = 5;

/** Why a runner was told to stop: the process is stopping (hand the run over), or the run is no longer ours. */
export type StopReason = "stopping" | "gone";

/** How long a runner waits between two re-reads of its run while the database is unreachable (each waits up to RUNHOOK_DB_TIMEOUT_MS). */
export const OUTAGE_RETRY_MS = 250;

export interface RunnerEnv extends LeaseEnv {
  deps: Deps;
  executorId: string;
  log: Logger;
  /** Aborted when the executors stop (whatever happens to single runs). */
  stopping: AbortSignal;
  /** A run was parked until `until`: claim again then (other processes find it by their poll). */
  wakeAt(until: Date): void;
}

/**
 * Runs `op` until it does not fail for want of the database: after such a failure, waits
 * OUTAGE_RETRY_MS and tries again. Undefined when `signal` aborts first.
 */
async function whenReachable<T>(signal: AbortSignal, op: () => Promise<T>): Promise<{ value: T } | undefined> {
  for (;;) {
    try {
      return { value: await op() };
    } catch (err) {
      if (!isUnavailable(err)) throw err;
    }
    if (!(await sleepUnlessAborted(OUTAGE_RETRY_MS, signal))) return undefined;
  }
}

export async function runClaimed(env: RunnerEnv, claimed: RunDoc, owner: string, signal: AbortSignal, stopWith: (reason: StopReason) => void): Promise<void> {
  const { deps, machine } = env;
  const id = claimed._id;
  // Every log line about the run names it and the request that created it.
  const log = env.log.child({ runId: id, ...(claimed.requestId ? { requestId: claimed.requestId } : {}) });
  const lease = holdLease(env, log, id, owner, () => stopWith("gone"));
  const changed = (res: RunDoc | null) => {
    if (res) {
      lease.state.renewed();
      deps.events.emit(RUN_CHANGED, id);
    }
    return res;
  };
  const held: HeldRun = { env, log, owner, changed };
  /** The run's end, with its entry: false when the run is no longer ours. */
  const finish = async (state: "SUCCEEDED" | "FAILED", error: string, step: number | null): Promise<boolean> => {
    const failed = state === "FAILED";
    const entry = await runEntry(deps.store, claimed, failed ? "workflow.run.failed" : "workflow.run.succeeded", failed ? { error, step } : {});
    const done = changed(await machine.finish(id, owner, state, error, step, [entry]));
    if (!done) {
      releaseEntries(deps.store, [entry], log);
      return false;
    }
    await ended(done, [entry]);
    return true;
  };
  /** After the run's end: no lease left to keep (and no "gone" to stop this); its entries put in the log, or left to the sweep. */
  const ended = async (run: RunDoc, entries: PendingLogEntry[]) => {
    await lease.stop();
    await putEntries(deps.store, run._id, entries).catch(
      (err: unknown) => isDatabaseFull(err) || log.warn({ err }, "the run's entries stay pending: the sweep puts them in the log"),
    );
  };
  const fail = async (error: string, step: number | null) => {
    if (await finish("FAILED", error, step)) log.info({ error, step }, "run failed");
  };
  const succeed = async () => void (await finish("SUCCEEDED", "", null));
  /** The run from where `run` (as last read) stands, until it is finished or no longer ours. */
  const execute = async (run: RunDoc): Promise<void> => {
    const workflow = await deps.store.directory.workflows.get(run.workflowId);
    const version = workflow?.versions.find((v) => v.version === run.workflowVersion);
    if (!workflow) return await fail("the workflow no longer exists", null);
    // Only this version's steps are read (and kept: they never change), whatever the workflow's history.
    const steps = version && (await deps.store.immutable.workflowSteps(workflow._id, version));
    if (!steps) return await fail(`version ${run.workflowVersion} of the workflow no longer exists`, null);
    if (steps.length !== run.steps.length) return await fail(`the run's steps do not match version ${run.workflowVersion} of the workflow`, null);
    for (let i = run.stepIndex; i < steps.length; i++) {
      if (signal.aborted) return;
      const outcome = await runStep({ ...held, run, index: i, step: steps[i]! });
      if (outcome.kind === "failed") return await fail(outcome.error, i);
      if (outcome.kind === "stopped" || outcome.kind === "parked") return;
      if (outcome.kind === "finished") return await ended(outcome.run, outcome.entries);
      run = outcome.run;
    }
    // stepIndex at or past the end: nothing left to run (a zero-step workflow).
    await succeed();
  };
  try {
    let run = claimed;
    for (;;) {
      try {
        return await execute(run);
      } catch (err) {
        if (!isUnavailable(err) || signal.aborted) throw err;
        log.debug({ err, step: run.stepIndex }, "database unreachable mid-run: resuming once it is back");
      }
      // Where the run stands now, by the database: still ours and RUNNING, or let go.
      const now = await whenReachable(signal, () => deps.store.runs.get(id));
      const cur = now?.value;
      if (cur?.state !== "RUNNING" || cur.lease?.owner !== owner) return;
      run = cur;
    }
  } finally {
    await lease.end(signal.reason === "stopping");
  }
}

/** A run this runner holds: the claim's lease owner, and what a change of the run that applied tells. */
interface HeldRun {
  env: RunnerEnv;
  log: Logger;
  owner: string;
  /** The run after a change, when it applied (its lease is extended with it and its followers told); else null. */
  changed(res: RunDoc | null): RunDoc | null;
}

/** Step `index` (defined by `step`) of `run`, as last read. */
interface StepContext<S extends StepDoc = StepDoc> extends HeldRun {
  run: RunDoc;
  index: number;
  step: S;
}

/** A step's end: "next" carries the run as that end left it, for the next step; "finished" the run's end entries to put in the log. */
type StepOutcome =
  | { kind: "next"; run: RunDoc }
  | { kind: "finished"; run: RunDoc; entries: PendingLogEntry[] }
  | { kind: "parked" }
  | { kind: "stopped" }
  | { kind: "failed"; error: string };

/** Records the start of the step (its attempt `attempts`) and extends the lease; the run after it, or null when it is no longer ours. */
async function startStep(s: StepContext, startedAt: Date, attempts: number): Promise<RunDoc | null> {
  const { env } = s;
  return s.changed(
    await env.machine.stepStarted(s.run._id, s.owner, s.index, { startedAt, attempts, executor: env.executorId }, new Date(startedAt.getTime() + env.leaseMs)),
  );
}

async function runStep(s: StepContext): Promise<StepOutcome> {
  const { step, index: i } = s;
  if (step.type === "wait") return await waitStep({ ...s, step });
  const attempts = (s.run.steps[i]!.attempts ?? 0) + 1;
  if (attempts > MAX_ATTEMPTS) return { kind: "failed", error: `step ${i} (${step.type}) was started ${MAX_ATTEMPTS} times without finishing` };
  const run = await startStep(s, new Date(), attempts);
  if (!run) return { kind: "stopped" };

  let effect: StepEffect;
  try {
    effect = await runDataStep(s.env.deps, run, step);
  } catch (err) {
    if (err instanceof StepFailure) return { kind: "failed", error: err.message };
    if (isUnavailable(err)) throw err; // the lease expires; another attempt follows
    s.log.error({ err, step: i }, "step failed unexpectedly");
    return { kind: "failed", error: `step ${i} (${step.type}) failed: ${err instanceof Error ? err.message : String(err)}` };
  }
  return await stepDone({ ...s, run }, effect);
}

/**
 * A wait step: started (once: a resumed wait keeps its start, so it waits only the
 * remainder), then done when its time is over, or else the run is parked until then and this
 * executor lets it go: a wait holds no slot and no lease.
 */
async function waitStep(s: StepContext<Extract<StepDoc, { type: "wait" }>>): Promise<StepOutcome> {
  const { env, index: i } = s;
  const prev = s.run.steps[i]!;
  const seconds = Number(s.step.seconds);
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > MAX_WAIT_STEP_SECONDS)
    return { kind: "failed", error: `wait: seconds must be between 0 and ${MAX_WAIT_STEP_SECONDS}` };
  let startedAt = prev.state === "RUNNING" ? prev.startedAt : null;
  if (!startedAt) {
    startedAt = new Date();
    if (!(await startStep(s, startedAt, (prev.attempts ?? 0) + 1))) return { kind: "stopped" };
  }
  const until = new Date(startedAt.getTime() + seconds * 1000);
  if (until.getTime() <= Date.now()) return await stepDone(s, { output: null });
  if (!s.changed(await env.machine.park(s.run._id, s.owner, i, until))) return { kind: "stopped" };
  s.log.debug({ step: i, until }, "run parked on its wait step");
  env.wakeAt(until);
  return { kind: "parked" };
}

/**
 * The step's end, with the entry about its effect and, after the last step, the run's end entry:
 * one update. The step's entry is put in the log at once; the run's end entries by the caller.
 */
async function stepDone(s: StepContext, effect: StepEffect): Promise<StepOutcome> {
  const { env, run, index: i } = s;
  const { store } = env.deps;
  const last = i === run.steps.length - 1;
  // Reserved together, in this order (the step's entry before the run's end).
  const entries = await Promise.all([
    ...(effect.entry ? [runEntry(store, run, effect.entry.action, effect.entry.details)] : []),
    ...(last ? [runEntry(store, run, "workflow.run.succeeded", {})] : []),
  ]);
  const after = s.changed(await env.machine.stepDone(run._id, s.owner, i, effect.output, last, new Date(Date.now() + env.leaseMs), entries));
  if (!after) {
    releaseEntries(store, entries, s.log);
    return { kind: "stopped" };
  }
  if (last) return { kind: "finished", run: after, entries };
  await putEntries(store, run._id, entries);
  return { kind: "next", run: after };
}
