// Executors: claim runs through MongoDB alone (claimer.ts) and run them (runner.ts) under
// leases (lease.ts), up to `concurrency` runs at once in this process.
//
// Stopping: claiming stops, waits end and their runs are released for another executor to
// resume at once; a data step in flight finishes first.
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
import { runMetrics } from "../metrics.js";
import { runClaimed, type RunnerEnv, type StopReason } from "./runner.js";
import { createClaimer } from "./claimer.js";
import { leaseIssuer, renewalInterval } from "./lease.js";

export interface Executors {
  /** This process's executor id (lease owners are `<id>#<n>`). */
  id: string;
  stop(): Promise<void>;
}

export function startExecutors(deps: Deps): Executors {
  const { concurrency, pollIntervalMs, leaseMs } = deps.config.executor;
  const executorId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = deps.logger.child({ executor: executorId });
  const machine = runStateMachine(deps.store, runMetrics(deps.metrics));
  const stopped = new AbortController();
  const env: RunnerEnv = {
    deps,
    store: deps.store,
    machine,
    executorId,
    leaseMs,
    renewEveryMs: renewalInterval(leaseMs),
    checkEveryMs: pollIntervalMs,
    log,
    stopping: stopped.signal,
  };
  const claimer = createClaimer({
    deps,
    machine,
    log,
    pollIntervalMs,
    newLease: leaseIssuer(executorId, leaseMs),
    hasFreeSlot: () => runs.size() < concurrency,
    onClaimed: (run) => runs.start(run),
  });
  const runs = activeRuns(env, () => void claimer.pump(true));
  const onCancelled = (id: string) => runs.stopRun(id, "gone");
  deps.events.on(RUN_CANCELLED, onCancelled);
  claimer.start();
  log.info({ concurrency, pollIntervalMs, leaseMs }, "executors started");

  return {
    id: executorId,
    async stop() {
      if (runs.stopping) return;
      runs.stopping = true;
      stopped.abort();
      claimer.stop();
      deps.events.off(RUN_CANCELLED, onCancelled);
      // Waits end now and leave their run to another executor; a data step in flight
      // finishes, then its run is released. Bounded: a lease left behind simply expires.
      await runs.stopAll(Math.min(leaseMs, 5000));
      log.info({ left: runs.size() }, "executors stopped");
    },
  };
}

interface ActiveRun {
  abort: AbortController;
  done: Promise<void>;
}

interface ActiveRuns {
  /** Set when the executors stop: a run claimed from then on is handed back at once. */
  stopping: boolean;
  size(): number;
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
  const entry: ActiveRun = { abort, done: Promise.resolve() };
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
