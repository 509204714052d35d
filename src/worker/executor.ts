// Executors: claim runs through MongoDB alone (claimer.ts) and run them (runner.ts) under
// leases (lease.ts), up to `concurrency` runs at once in this process; and work through run
// batches (batches.ts) beside them.
//
// Waits: a run on a wait step is parked in the database (runner.ts) and leaves its slot; this
// process claims it again when it is due (a timer), any other one at its next poll.
//
// Stopping: claiming stops; a data step in flight finishes first, then its run is released
// for another executor to resume at once. Parked runs need nothing: they are in the database.
//
// Database outages. Claims, renewals and a run's writes fail while the database cannot be
// reached. Claiming goes on (claimer.ts); a runner that lost the database mid-run keeps its
// run and resumes it as soon as the database answers (runner.ts), if it is still its own.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Deps } from "../deps.js";
import type { RunDoc } from "../store/types.js";
import { isUnavailable } from "../store/index.js";
import { RUN_CANCELLED } from "../domain/runs/model.js";
import { runStateMachine } from "../domain/runs/state.js";
import { runMetrics } from "../lib/metrics.js";
import { runClaimed, type RunnerEnv, type StopReason } from "./runner.js";
import { createClaimer } from "./claimer.js";
import { leaseIssuer, renewalInterval } from "./lease.js";
import { startBatchWorker } from "./batches.js";

export interface Executors {
  /** This process's executor id (lease owners are `<id>#<n>`). */
  id: string;
  stop(): Promise<void>;
}

export function startExecutors(deps: Deps): Executors {
  const { concurrency, organizationConcurrency, projectConcurrency, pollIntervalMs, leaseMs } = deps.config.executor;
  const executorId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = deps.logger.child({ executor: executorId });
  const machine = runStateMachine(deps.store, runMetrics(deps.metrics));
  const stopped = new AbortController();
  const wakeUps = wakeUpTimer(() => void claimer.pump(true));
  const env: RunnerEnv = {
    deps,
    machine,
    executorId,
    leaseMs,
    renewEveryMs: renewalInterval(leaseMs),
    log,
    stopping: stopped.signal,
    wakeAt: (until) => wakeUps.add(until.getTime()),
  };
  const claimer = createClaimer({
    deps,
    machine,
    log,
    pollIntervalMs,
    newLease: leaseIssuer(executorId, leaseMs),
    hasFreeSlot: () => runs.size() < concurrency,
    busyOrganizations: () => runs.withAtLeast("organizationId", organizationConcurrency),
    busyProjects: () => runs.withAtLeast("projectId", projectConcurrency),
    onClaimed: (run) => runs.start(run),
  });
  const runs = activeRuns(env, () => void claimer.pump());
  const onCancelled = (id: string) => runs.stopRun(id, "gone");
  deps.events.on(RUN_CANCELLED, onCancelled);
  claimer.start();
  // Run batches are worked through wherever runs are: their runs share these executors.
  const batches = startBatchWorker({ deps, machine, log, executorId });
  log.info({ concurrency, organizationConcurrency, projectConcurrency, pollIntervalMs, leaseMs }, "executors started");

  return {
    id: executorId,
    async stop() {
      if (runs.stopping) return;
      runs.stopping = true;
      stopped.abort();
      claimer.stop();
      wakeUps.stop();
      await batches.stop();
      deps.events.off(RUN_CANCELLED, onCancelled);
      // A data step in flight finishes, then its run is released for another executor.
      // Bounded: a lease left behind simply expires.
      await runs.stopAll(Math.min(leaseMs, 5000));
      log.info({ left: runs.size() }, "executors stopped");
    },
  };
}

/** Due times this process keeps beyond which a parked run is woken by the claimer's poll instead (at most a poll interval late). */
export const MAX_WAKE_UPS = 10_000;

/**
 * The times parked runs are due, with one timer for the earliest: `wake` runs when it comes
 * (the claimer then takes the runs that are due). Memory stays bounded however many runs park.
 */
export function wakeUpTimer(wake: () => void): { add(at: number): void; stop(): void } {
  const due: number[] = []; // ascending
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Number.POSITIVE_INFINITY;
  const arm = () => {
    const next = due[0];
    if (next === undefined || next >= timerAt) return;
    clearTimeout(timer);
    timerAt = next;
    timer = setTimeout(fire, Math.max(0, next - Date.now()) + 5);
    timer.unref();
  };
  function fire() {
    timer = undefined;
    timerAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    let n = 0;
    while (n < due.length && due[n]! <= now) n++;
    due.splice(0, n);
    wake();
    arm();
  }
  return {
    add(at) {
      let lo = 0;
      let hi = due.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (due[mid]! <= at) lo = mid + 1;
        else hi = mid;
      }
      due.splice(lo, 0, at);
      if (due.length > MAX_WAKE_UPS) due.pop();
      arm();
    },
    stop() {
      clearTimeout(timer);
      due.length = 0;
    },
  };
}

interface ActiveRun {
  /** Absent for a run stored before runs named their organization. */
  organizationId?: string;
  projectId: string;
  abort: AbortController;
  done: Promise<void>;
}

interface ActiveRuns {
  /** Set when the executors stop: a run claimed from then on is handed back at once. */
  stopping: boolean;
  size(): number;
  /** The organizations (projects) with at least `n` runs here. */
  withAtLeast(owner: "organizationId" | "projectId", n: number): string[];
  /** Runs a run just claimed. */
  start(run: RunDoc): void;
  stopRun(id: string, reason: StopReason): void;
  /** Tells every run to stop for a hand-over, and waits for them (at most `waitMs`). */
  stopAll(waitMs: number): Promise<void>;
}

/** The runs this process's executors are running; `onFreed` is called when one ends. */
function activeRuns(env: RunnerEnv, onFreed: () => void): ActiveRuns {
  const active = new Map<string, ActiveRun>();
  const table: ActiveRuns = {
    stopping: false,
    size: () => active.size,
    withAtLeast(owner, n) {
      const count = new Map<string, number>();
      for (const a of active.values()) {
        const id = a[owner];
        if (id !== undefined) count.set(id, (count.get(id) ?? 0) + 1);
      }
      return [...count].filter(([, c]) => c >= n).map(([id]) => id);
    },
    start: (run) => startRun(env, table, active, run, onFreed),
    stopRun(id, reason) {
      const a = active.get(id)?.abort;
      if (a && !a.signal.aborted) a.abort(reason);
    },
    async stopAll(waitMs) {
      for (const a of active.values()) a.abort.abort("stopping" satisfies StopReason);
      const all = Promise.allSettled([...active.values()].map((a) => a.done));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all, new Promise((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
    },
  };
  return table;
}

function startRun(env: RunnerEnv, table: ActiveRuns, active: Map<string, ActiveRun>, run: RunDoc, onFreed: () => void): void {
  const owner = run.lease!.owner;
  if (table.stopping) {
    // Claimed while stopping: hand it back at once.
    void env.machine.release(run._id, owner).catch(() => {});
    return;
  }
  const old = active.get(run._id);
  if (old) {
    // Our own lease on it had expired and we claimed it again: the old task has lost it;
    // resume with the new claim once it has let go.
    old.abort.abort("gone" satisfies StopReason);
    void old.done.then(() => table.start(run));
    return;
  }
  const abort = new AbortController();
  const entry: ActiveRun = { organizationId: run.organizationId, projectId: run.projectId, abort, done: Promise.resolve() };
  active.set(run._id, entry);
  entry.done = runClaimed(env, run, owner, abort.signal, (reason) => table.stopRun(run._id, reason))
    .catch((err: unknown) => logRunError(env.log, run._id, err))
    .finally(() => {
      active.delete(run._id);
      onFreed();
    });
}

function logRunError(log: Logger, runId: string, err: unknown): void {
  if (isUnavailable(err)) log.debug({ err, runId }, "run left to another executor: the database is unreachable");
  else log.error({ err, runId }, "executor failed on a run");
}
