// A batch beside live webhooks: a retry batch of `batchRuns` failed runs, in the same project as a
// webhook that keeps being called over HTTP (each call on a fresh record). Measured idle, then
// while the batch runs: the webhook's accepts per second (a closed loop, the accept path's
// capacity; the runs it queues are left to finish before the next measure), and its runs' pick-up
// latency (startedAt − createdAt) at a steady `pacedPerSec` the executors keep up with (an open
// loop). The batch must share the executors fairly: accepts ≥ 0.8× and pick-up p99 ≤ 2× the idle
// figures. One `runhook start` process (executors in it) on its own database; the failed runs
// are stored the way executors leave them.
import { Pool } from "undici";
import { storeFixtures } from "../../src/store/index.js";
import type { RunDoc, StepDoc } from "../../src/store/types.js";
import { worldRun } from "../../fixtures/world.js";
import { benchWorld, openStore, spawnFor, type BenchContext } from "../lib/context.js";
import { closedLoop, percentile, ratio, round, sleep, type LoadStats } from "../lib/load.js";
import { openLoop } from "../lib/open-loop.js";
import { restTrigger } from "./webhook.js";

/** One quick step: what is measured is the sharing of executors, not the steps. */
const STEPS: StepDoc[] = [{ type: "wait", seconds: 0 }];

export interface BatchPhase {
  accepts: LoadStats;
  pickup: { n: number; p50Ms: number | null; p99Ms: number | null };
}

export interface BatchResult {
  batchRuns: number;
  concurrency: number;
  idle: BatchPhase;
  /** While the batch runs. */
  during: BatchPhase;
  acceptsVsIdle: number | null;
  pickupP99VsIdle: number | null;
  /** The batch: how many runs it retried while measured and in all, and how fast. */
  batch: { done: number; skipped: number; failed: number; state: string; seconds: number; runsPerSec: number | null };
}

/** `count` FAILED runs on records `b0…`, as executors leave a failed run. */
async function storeFailed(store: Parameters<typeof storeFixtures>[0], w: Parameters<typeof worldRun>[0], count: number): Promise<void> {
  const at = new Date(Date.now() - 3_600_000);
  for (let i = 0; i < count; i += 1000) {
    await storeFixtures(store).insertRuns(
      Array.from({ length: Math.min(1000, count - i) }, (_, k): RunDoc => {
        const d = worldRun(w, `b${i + k}`, STEPS, { createdAt: at });
        return {
          ...d,
          activeKey: d._id,
          state: "FAILED",
          error: "failed for the benchmark",
          startedAt: at,
          finishedAt: at,
          steps: d.steps.map((s) => ({ ...s, state: "FAILED", startedAt: at, finishedAt: at, error: "failed for the benchmark" })),
        };
      }),
    );
  }
}

export interface BatchOptions {
  batchRuns: number;
  concurrency: number;
  durationMs: number;
  /** The webhook's steady rate while pick-up is measured, and for how long. */
  pacedPerSec: number;
  pickupMs: number;
  finishTimeoutMs: number;
}

export async function batchScenario(ctx: BenchContext, o: BatchOptions): Promise<BatchResult> {
  const dbName = `${ctx.runTag}_batch`;
  const store = await openStore(ctx, dbName);
  const w = await benchWorld(ctx, store, { steps: STEPS, records: [] });
  await storeFailed(store, w, o.batchRuns);
  const server = await spawnFor(ctx, "batch", "start", dbName);
  const pool = new Pool(server.baseUrl!, { connections: o.concurrency, pipelining: 1 });
  const trigger = restTrigger(pool, w, 202);
  try {
    /** The webhook's runs created since `since`, once all have finished (or the wait is over). */
    const settled = async (since: Date): Promise<RunDoc[]> => {
      const until = Date.now() + 120_000;
      for (;;) {
        const runs = await storeFixtures(store)
          .runs.find({ workflowId: w.workflowId, createdAt: { $gte: since }, via: "webhook" })
          .toArray();
        if (runs.every((r) => r.finishedAt) || Date.now() > until) return runs;
        await sleep(200);
      }
    };
    /** Accepts at full speed (the runs they queue finish before the pick-up is measured), then pick-up at the steady rate. */
    const phase = async (tag: string): Promise<BatchPhase> => {
      const burst = new Date();
      const accepts = await closedLoop({ concurrency: o.concurrency, durationMs: o.durationMs, warmupPerWorker: 2, fn: (i) => trigger(`${tag}a${i}`) });
      await settled(burst);
      const since = new Date();
      await openLoop({
        ratePerSec: o.pacedPerSec,
        durationMs: o.pickupMs,
        maxInFlight: o.concurrency,
        drainMs: 10_000,
        issue: async (j) => void (await trigger(`${tag}p${j}`).catch(() => undefined)),
      });
      const runs = (await settled(since)).filter((r) => r.startedAt);
      const lat = Float64Array.from(runs.map((r) => r.startedAt!.getTime() - r.createdAt.getTime())).sort();
      return { accepts, pickup: { n: lat.length, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99) } };
    };
    // Warm the server up (its JIT, its pools) before anything is measured.
    const warm = new Date();
    await closedLoop({ concurrency: o.concurrency, durationMs: Math.min(o.durationMs, 3000), fn: (i) => trigger(`warm-${i}`) });
    await settled(warm);
    const idle = await phase("idle-");
    ctx.log(
      `  idle: ${idle.accepts.okPerSec} accepts/s (c=${o.concurrency}), pick-up p50 ${idle.pickup.p50Ms} p99 ${idle.pickup.p99Ms} ms (n=${idle.pickup.n})`,
    );

    const created = await fetch(`${server.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/run-batches`, {
      method: "POST",
      headers: { authorization: `Bearer ${w.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ action: "retry", filter: { states: ["FAILED"] } }),
    });
    const batch = (await created.json()) as { id?: string; message?: string };
    if (created.status !== 202 || !batch.id) throw new Error(`the batch was refused: ${created.status} ${JSON.stringify(batch)}`);
    const batchStart = Date.now();
    const during = await phase("during-");
    const get = async () =>
      (await (await fetch(`${server.baseUrl}/v1/run-batches/${batch.id}`, { headers: { authorization: `Bearer ${w.adminToken}` } })).json()) as Record<
        string,
        string | undefined
      >;
    let seen = await get();
    ctx.log(
      `  while the batch runs: ${during.accepts.okPerSec} accepts/s, pick-up p50 ${during.pickup.p50Ms} p99 ${during.pickup.p99Ms} ms (n=${during.pickup.n}); batch ${seen.done ?? 0}/${o.batchRuns} retried so far`,
    );
    while (seen.state === "RUNNING" && Date.now() - batchStart < o.finishTimeoutMs) {
      await sleep(500);
      seen = await get();
    }
    const seconds = round((Date.now() - batchStart) / 1000, 1);
    const done = Number(seen.done ?? 0);
    const result: BatchResult = {
      batchRuns: o.batchRuns,
      concurrency: o.concurrency,
      idle,
      during,
      acceptsVsIdle: ratio(during.accepts.okPerSec, idle.accepts.okPerSec),
      pickupP99VsIdle: ratio(during.pickup.p99Ms, idle.pickup.p99Ms),
      batch: {
        done,
        skipped: Number(seen.skipped ?? 0),
        failed: Number(seen.failed ?? 0),
        state: seen.state ?? "",
        seconds,
        runsPerSec: seconds ? round(done / seconds, 1) : null,
      },
    };
    ctx.log(
      `  batch ${result.batch.state}: ${done} retried, ${result.batch.skipped} skipped, ${result.batch.failed} failed in ${seconds} s (${result.batch.runsPerSec} runs/s); accepts ${result.acceptsVsIdle}× idle (target ≥ 0.8), pick-up p99 ${result.pickupP99VsIdle}× idle (target ≤ 2)`,
    );
    return result;
  } finally {
    await pool.close();
    await server.stop();
  }
}
