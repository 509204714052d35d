// Executors: claim runs through MongoDB alone and run them (runs/runner.ts).
//
// Claiming is one sorted findOneAndUpdate (store.runs.claimNext): a RUNNING run whose lease
// expired (its executor died, or let it go while stopping), or else the oldest QUEUED run. The
// lease owner is unique per claim (`<executor id>#<n>`), so even a re-claim by the same
// process invalidates the old holder. Any number of processes can claim from one database.
//
// Pick-up. A run queued on this instance (deps.events RUN_QUEUED) is claimed at once; runs
// queued elsewhere, and runs whose lease expired, within pollIntervalMs. A freed slot
// claims the next run at once. Stopping: claiming stops, waits end and their runs are
// released for another executor to resume at once; a data step in flight finishes first.
//
// Database outages. Claims, renewals and a run's writes fail while the database cannot be
// reached; executors log the outage once, and its end, as the database monitor
// (src/db-monitor.ts) sees them — not every failed poll. Claiming goes on at every poll (each
// claim waits at most RUNHOOK_DB_TIMEOUT_MS for the database), and at once when the monitor
// sees the database back. A runner that lost the database mid-run keeps its run and resumes it
// as soon as the database answers (runner.ts), if it is still its own.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { Deps } from "../deps.js";
import type { RunDoc } from "../store/types.js";
import { isUnavailable } from "../store/index.js";
import { RUN_CANCELLED, RUN_QUEUED } from "../domain/runs/model.js";
import { runClaimed, type RunnerEnv, type StopReason } from "./runner.js";
import { runStateMachine } from "../domain/runs/state.js";
import { runMetrics } from "../metrics.js";

export interface Executors {
  /** This process's executor id (lease owners are `<id>#<n>`). */
  id: string;
  stop(): Promise<void>;
}

interface ActiveRun {
  abort: AbortController;
  done: Promise<void>;
}

export function startExecutors(deps: Deps): Executors {
  const { logger, events } = deps;
  const { concurrency, pollIntervalMs, leaseMs } = deps.config.executor;
  const executorId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const renewEveryMs = Math.max(100, Math.floor(leaseMs / 3));
  const log = logger.child({ executor: executorId });
  const machine = runStateMachine(deps.store, runMetrics(deps.metrics));
  const stopped = new AbortController();
  const env: RunnerEnv = { deps, machine, executorId, leaseMs, renewEveryMs, checkEveryMs: pollIntervalMs, log, stopping: stopped.signal };
  const active = new Map<string, ActiveRun>();
  let claimSeq = 0;
  let stopping = false;

  const newLease = () => ({ owner: `${executorId}#${++claimSeq}`, expiresAt: new Date(Date.now() + leaseMs) });
  const stopRun = (id: string, reason: StopReason) => {
    const a = active.get(id)?.abort;
    if (a && !a.signal.aborted) a.abort(reason);
  };

  let pumping = false;
  let pumpAgain = false;
  let pumpTakeovers = false;
  /**
   * Claims runs while there are free slots and claimable runs. With `takeovers` (the poll, a
   * freed slot) runs whose lease expired come first, so that busy executors with a queue still
   * take over a dead executor's runs at their next free slot; a queued-run event looks for
   * QUEUED runs only (it has one to claim).
   */
  async function pump(takeovers = false): Promise<void> {
    if (stopping) return;
    pumpTakeovers ||= takeovers;
    if (pumping) {
      pumpAgain = true;
      return;
    }
    pumping = true;
    try {
      do {
        pumpAgain = false;
        const queuedOnly = !pumpTakeovers;
        pumpTakeovers = false;
        while (!stopping && active.size < concurrency) {
          const claim = await machine.claimNext(newLease(), { queuedOnly });
          if (!claim) break;
          start(claim.run);
        }
      } while (pumpAgain && !stopping && active.size < concurrency);
    } catch (err) {
      if (stopping) return;
      if (isUnavailable(err)) log.debug({ err }, "claiming runs failed: the database is unreachable");
      else log.warn({ err }, "claiming runs failed");
    } finally {
      pumping = false;
    }
  }

  function start(run: RunDoc): void {
    const owner = run.lease!.owner;
    if (stopping) {
      // Claimed while stopping: hand it back at once.
      void machine.release(run._id, owner).catch(() => {});
      return;
    }
    const old = active.get(run._id);
    if (old) {
      // Our own lease on it had expired and we claimed it again: the old task has lost it;
      // resume with the new claim once it has let go.
      old.abort.abort("gone" satisfies StopReason);
      void old.done.then(() => start(run));
      return;
    }
    const abort = new AbortController();
    const entry: ActiveRun = { abort, done: Promise.resolve() };
    active.set(run._id, entry);
    entry.done = runClaimed(env, run, owner, abort.signal, (reason) => stopRun(run._id, reason))
      .catch((err: unknown) => (isUnavailable(err) ? log.debug({ err, runId: run._id }, "run left to another executor: the database is unreachable") : log.error({ err, runId: run._id }, "executor failed on a run")))
      .finally(() => {
        active.delete(run._id);
        void pump(true);
      });
  }

  const onQueued = () => void pump();
  const onCancelled = (id: string) => stopRun(id, "gone");
  events.on(RUN_QUEUED, onQueued);
  events.on(RUN_CANCELLED, onCancelled);
  // The outage, once, and its end; claims at once when the database is back.
  let downSince = 0;
  const offDb = deps.dbMonitor.onChange((up, why) => {
    if (!up) {
      downSince = Date.now();
      log.warn({ err: why }, "database unreachable: executors pause claiming, and resume their runs once it is back");
      return;
    }
    log.info({ downMs: Date.now() - downSince }, "database reachable again: executors claim and run again");
    void pump(true);
  });
  const poller = setInterval(() => void pump(true), pollIntervalMs);
  void pump(true);
  log.info({ concurrency, pollIntervalMs, leaseMs }, "executors started");

  return {
    id: executorId,
    async stop() {
      if (stopping) return;
      stopping = true;
      stopped.abort();
      clearInterval(poller);
      events.off(RUN_QUEUED, onQueued);
      events.off(RUN_CANCELLED, onCancelled);
      offDb();
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
