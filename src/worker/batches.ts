// The batch worker: every process with executors works through run batches
// (domain/runs/batches.ts), claimed like runs. A claim takes the RUNNING batch whose lease
// expired first (a new batch's lease has expired from the start; so has a dead process's, once
// its lease is over); the worker renews the lease while it works, and every step of the walk —
// one run handled, the cursor moved past it and counted — is one conditional update under that
// lease. An update that does not apply (the batch was cancelled, or taken over) ends the work.
//
// Pace: a retry batch keeps at most RUNHOOK_BATCH_ONGOING_RUNS of its own runs ongoing, so that
// the executors' other runs (webhooks of the same project among them) never queue behind it;
// the project's ongoing-run quota makes it wait too, never skip.
import type { Logger } from "pino";
import type { Deps } from "../deps.js";
import { isUnavailable } from "../store/index.js";
import type { RunBatchDoc, RunDoc } from "../store/types.js";
import { BATCH_CREATED, BatchCannotGoOn, BatchMustWait, batchActor, batchSelection, handleRun, logBatchEnd, type BatchEnv } from "../domain/runs/batches.js";
import type { RunStateMachine } from "../domain/runs/state.js";
import { DomainError } from "../domain/errors.js";
import { sleepUnlessAborted } from "../lib/sleep.js";
import { leaseIssuer, renewalInterval } from "./lease.js";

/** Batches one process works through at once. */
export const BATCHES_AT_ONCE = 4;
/** Runs read per page of a batch's walk. */
const WALK_PAGE = 50;
/** How soon a batch at its pace looks again whether one of its runs finished (one indexed count). */
const PACE_RECHECK_MS = 50;

export interface BatchWorkerEnv {
  deps: Deps;
  machine: RunStateMachine;
  log: Logger;
  executorId: string;
}

export interface BatchWorker {
  stop(): Promise<void>;
}

interface Held {
  batch: RunBatchDoc;
  owner: string;
  /** Aborted when the worker stops, or the lease is lost. */
  stop: AbortController;
}

export function startBatchWorker(env: BatchWorkerEnv): BatchWorker {
  const { deps } = env;
  const { leaseMs, pollIntervalMs } = deps.config.executor;
  const newLease = leaseIssuer(`${env.executorId}/batches`, leaseMs);
  const stopping = new AbortController();
  const working = new Map<string, Promise<void>>();
  let claiming = false;
  const claim = async () => {
    if (claiming || stopping.signal.aborted) return;
    claiming = true;
    try {
      while (working.size < BATCHES_AT_ONCE && !stopping.signal.aborted) {
        const lease = newLease();
        const batch = await deps.store.runBatches.claim(lease, new Date());
        if (!batch) break;
        const held: Held = { batch, owner: lease.owner, stop: new AbortController() };
        const done = workThrough(env, held, stopping.signal).finally(() => {
          working.delete(batch._id);
          void claim();
        });
        working.set(batch._id, done);
      }
    } catch (err) {
      if (!isUnavailable(err)) env.log.warn({ err }, "claiming run batches failed");
    } finally {
      claiming = false;
    }
  };
  const onCreated = () => void claim();
  deps.events.on(BATCH_CREATED, onCreated);
  const poller = setInterval(() => void claim(), pollIntervalMs);
  void claim();
  return {
    async stop() {
      stopping.abort();
      clearInterval(poller);
      deps.events.off(BATCH_CREATED, onCreated);
      await Promise.allSettled(working.values());
    },
  };
}

/** Keeps `held`'s lease alive; aborts it once the batch is no longer its own. Returns what stops the heartbeat. */
function heartbeat(env: BatchWorkerEnv, held: Held): () => void {
  const { leaseMs } = env.deps.config.executor;
  const timer = setInterval(() => {
    env.deps.store.runBatches.renew(held.batch._id, held.owner, new Date(Date.now() + leaseMs)).then(
      (renewed) => {
        if (!renewed) held.stop.abort();
      },
      (err: unknown) => !isUnavailable(err) && env.log.warn({ err, batchId: held.batch._id }, "renewing a run batch's lease failed"),
    );
  }, renewalInterval(leaseMs));
  return () => clearInterval(timer);
}

/** Works through a claimed batch until it is finished, cancelled, taken over, or the worker stops. */
async function workThrough(env: BatchWorkerEnv, held: Held, stopping: AbortSignal): Promise<void> {
  const onStop = () => held.stop.abort();
  stopping.addEventListener("abort", onStop, { once: true });
  const stopBeat = heartbeat(env, held);
  const { batch, owner } = held;
  try {
    await walk(env, held);
  } catch (err) {
    if (err instanceof BatchCannotGoOn) {
      const ended = await env.deps.store.runBatches.finish(batch._id, owner, "FAILED", err.message);
      if (ended) await logBatchEnd(env.deps, ended);
      return;
    }
    if (isUnavailable(err)) env.log.debug({ err, batchId: batch._id }, "a run batch waits: the database is unreachable");
    else env.log.error({ err, batchId: batch._id }, "a run batch failed on a run; it is tried again");
  } finally {
    stopBeat();
    stopping.removeEventListener("abort", onStop);
    // Stopping: another process resumes it at once. After a failure the lease runs out first (a pause before the next try).
    if (stopping.aborted) await env.deps.store.runBatches.release(batch._id, owner).catch(() => {});
  }
}

/**
 * The runs a stored batch acts on. Its filter was checked when it was made; one that a later
 * version's checks refuse (a workflow id that is not a full id) ends the batch FAILED, saying why.
 */
function storedSelection(batch: RunBatchDoc) {
  try {
    return batchSelection(batch);
  } catch (err) {
    if (err instanceof DomainError) throw new BatchCannotGoOn(`its filter is no longer accepted: ${err.message}`);
    throw err;
  }
}

/** The walk: the batch's runs after its cursor, a page at a time, each handled and counted. */
async function walk(env: BatchWorkerEnv, held: Held): Promise<void> {
  const { deps } = env;
  const { batch, owner } = held;
  const signal = held.stop.signal;
  const selection = storedSelection(batch);
  let cursor = batch.cursor;
  while (!signal.aborted) {
    const page = await deps.store.runs.search(selection, cursor ? { createdAt: cursor.createdAt, id: cursor.id } : undefined, 1, WALK_PAGE);
    if (page.length === 0) {
      const ended = await deps.store.runBatches.finish(batch._id, owner, "SUCCEEDED", "");
      if (ended) await logBatchEnd(deps, ended);
      return;
    }
    // Who it acts as, read fresh for each page: a revoked token stops it.
    const directory = deps.store.directory.view();
    const batchEnv: BatchEnv = { deps, machine: env.machine, directory, principal: await batchActor(directory, batch) };
    for (const run of page) {
      if (signal.aborted) return;
      const item = await handleOnce(env, batchEnv, held, run);
      if (!item) return;
      const after = await deps.store.runBatches.progress(
        batch._id,
        owner,
        cursor?.id ?? null,
        { run, ...item },
        new Date(Date.now() + deps.config.executor.leaseMs),
      );
      if (!after) return held.stop.abort(); // taken over
      cursor = after.cursor;
      if (after.state !== "RUNNING") return; // cancelled: the run in flight was counted
    }
  }
}

/** One run handled, once the batch may start another (its pace, the project's quota); undefined when the work stops first. */
async function handleOnce(env: BatchWorkerEnv, batchEnv: BatchEnv, held: Held, run: RunDoc) {
  const { deps } = env;
  const { batch } = held;
  const signal = held.stop.signal;
  const paced = batch.action === "retry" && !batch.dryRun;
  const limit = deps.config.executor.batchOngoingRuns;
  const poll = deps.config.executor.pollIntervalMs;
  while (!signal.aborted) {
    if (paced && (await deps.store.runBatches.ongoingAtLeast(batch._id, limit))) {
      await sleepUnlessAborted(Math.min(poll, PACE_RECHECK_MS), signal);
      continue;
    }
    // Still RUNNING and its own, just before acting: a batch cancelled meanwhile starts nothing more.
    if (!batch.dryRun && !(await deps.store.runBatches.renew(batch._id, held.owner, new Date(Date.now() + deps.config.executor.leaseMs)))) {
      held.stop.abort();
      return undefined;
    }
    try {
      return await handleRun(batchEnv, batch, run);
    } catch (err) {
      if (!(err instanceof BatchMustWait)) throw err;
      await sleepUnlessAborted(Math.max(poll, err.retryAfterSeconds * 1000), signal);
    }
  }
  return undefined;
}
