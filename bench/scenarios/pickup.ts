// Pick-up latency of executors: from a run's QUEUED insert (its createdAt) to its startedAt
// (the claim), one run at a time on an idle executor, so that it measures pick-up, not backlog.
// A runhook worker runs in this process on its own database; runs are stored the way the
// trigger stores them (store.runs.create of a newRunDoc):
//   same instance: then the `run.queued` event on the worker's own instance, as the trigger
//     emits it: claimed at once;
//   other instance: no event, as if another instance had queued it: found by the poll;
//   backlog in another organization: same instance, while another organization has
//     `backlogRuns` QUEUED runs spread over 5 projects, all older than ours (fair share: ours
//     must not wait behind them; compare its p99 with the idle same-instance case).
import { RUN_QUEUED } from "../../src/domain/runs/model.js";
import { storeFixtures } from "../../src/store/index.js";
import { createLogger } from "../../src/lib/logging.js";
import { startRunhook } from "../../src/main.js";
import type { RunDoc, StepDoc } from "../../src/store/types.js";
import { benchWorld, openStore, serverConfig, type BenchContext } from "../lib/context.js";
import { percentile, round, sleep } from "../lib/load.js";
import { worldRun } from "../../fixtures/world.js";

/** The projects of the organization whose backlog the fair-share case measures beside. */
const BACKLOG_PROJECTS = 5;

/** One quick step: pick-up is what is measured. */
const STEPS: StepDoc[] = [{ type: "wait", seconds: 0 }];

export interface PickupFigures {
  n: number;
  p50Ms: number | null;
  p90Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
}

export interface PickupResult {
  pollIntervalMs: number;
  concurrency: number;
  /** Finished runs stored before measuring (the runs collection's size should not matter). */
  finishedRunsBefore: number;
  sameInstance: PickupFigures;
  otherInstance: PickupFigures;
  /** Same instance while another organization has a backlog of QUEUED runs in 5 projects (fair share). */
  backlog?: { backlogRuns: number; queuedAtStart: number; queuedAtEnd: number; sameInstance: PickupFigures; p99VsIdle: number | null };
  /** Same instance again once `finishedRuns` more finished runs are stored (does the runs collection's size matter?). */
  withHistory?: { finishedRuns: number; sameInstance: PickupFigures };
}

function figures(lat: number[]): PickupFigures {
  const s = Float64Array.from(lat).sort();
  return { n: s.length, p50Ms: percentile(s, 50), p90Ms: percentile(s, 90), p99Ms: percentile(s, 99), maxMs: s.length ? round(s[s.length - 1]!) : null };
}

export async function pickupScenario(
  ctx: BenchContext,
  o: { runs: number; finishedRuns?: number; pollMs?: number; historyRuns?: number; backlogRuns?: number },
): Promise<PickupResult> {
  const dbName = `${ctx.runTag}_pickup`;
  const store = await openStore(ctx, dbName);
  const w = await benchWorld(ctx, store, { steps: [{ type: "wait", seconds: 0 }], records: Array.from({ length: 4 * o.runs }, (_, i) => ({ id: `r${i}` })) });
  const config = serverConfig(ctx, dbName, { RUNHOOK_EXECUTOR_POLL_MS: String(o.pollMs ?? 100), LOG_LEVEL: "silent" });
  const rh = await startRunhook(config, { mode: "worker", logger: createLogger("silent") });
  const { pollIntervalMs, concurrency } = config.executor;
  try {
    /** Finished runs, as executors leave them (activeKey = the run's id). */
    const storeFinished = async (count: number, tag: string) => {
      const at = new Date(Date.now() - 86_400_000);
      for (let i = 0; i < count; i += 1000) {
        await storeFixtures(store).insertRuns(
          Array.from({ length: Math.min(1000, count - i) }, (_, k): RunDoc => {
            const d = worldRun(w, `${tag}-${i + k}`, STEPS, { createdAt: at });
            return {
              ...d,
              activeKey: d._id,
              state: "SUCCEEDED",
              stepIndex: 1,
              startedAt: at,
              finishedAt: at,
              steps: d.steps.map((s) => ({ ...s, state: "SUCCEEDED", startedAt: at, finishedAt: at })),
            };
          }),
        );
      }
    };
    const prefill = o.finishedRuns ?? 0;
    if (prefill > 0) await storeFinished(prefill, "old");
    const measure = async (from: number, withEvent: boolean) => {
      const ids: string[] = [];
      for (let i = from; i < from + o.runs; i++) {
        const doc = worldRun(w, `r${i}`, STEPS);
        const res = await store.runs.create(doc);
        if (!res.created) throw new Error(`run on r${i} not created`);
        if (withEvent) rh.deps.events.emit(RUN_QUEUED, doc._id);
        ids.push(doc._id);
        for (;;) {
          const cur = await store.runs.get(doc._id);
          if (cur?.finishedAt) break;
          await sleep(5);
        }
        // Land the next insert at a random point of the poll cycle.
        await sleep(Math.random() * pollIntervalMs);
      }
      const docs = await store.runs.getMany(ids);
      return figures(docs.map((r) => r.startedAt!.getTime() - r.createdAt.getTime()));
    };
    const sameInstance = await measure(0, true);
    ctx.log(
      `  same instance (insert + run.queued event): p50 ${sameInstance.p50Ms} p90 ${sameInstance.p90Ms} p99 ${sameInstance.p99Ms} max ${sameInstance.maxMs} ms (n=${sameInstance.n})`,
    );
    const otherInstance = await measure(o.runs, false);
    ctx.log(
      `  other instance (insert only, found by the ${pollIntervalMs} ms poll): p50 ${otherInstance.p50Ms} p90 ${otherInstance.p90Ms} p99 ${otherInstance.p99Ms} max ${otherInstance.maxMs} ms (n=${otherInstance.n})`,
    );
    let backlog: PickupResult["backlog"];
    if (o.backlogRuns) {
      const records = Array.from({ length: o.backlogRuns }, (_, i) => ({ id: `b${i}` }));
      const first = await benchWorld(ctx, store, { steps: STEPS, records });
      const projects = [first];
      for (let p = 1; p < BACKLOG_PROJECTS; p++) projects.push(await benchWorld(ctx, store, { steps: STEPS, records, organizationOf: first }));
      const queuedOf = async () =>
        (await Promise.all(projects.map((p) => storeFixtures(store).runs.countDocuments({ projectId: p.projectId, state: "QUEUED" })))).reduce(
          (a, b) => a + b,
          0,
        );
      const since = Date.now() - 60_000; // older than every run measured
      for (let i = 0; i < o.backlogRuns; i += 1000) {
        await storeFixtures(store).insertRuns(
          Array.from({ length: Math.min(1000, o.backlogRuns - i) }, (_, k) =>
            worldRun(projects[(i + k) % BACKLOG_PROJECTS]!, `b${i + k}`, STEPS, { createdAt: new Date(since + i + k) }),
          ),
        );
      }
      rh.deps.events.emit(RUN_QUEUED, "backlog");
      const queuedAtStart = await queuedOf();
      const again = await measure(3 * o.runs, true);
      const queuedAtEnd = await queuedOf();
      const p99VsIdle = again.p99Ms !== null && sameInstance.p99Ms ? round(again.p99Ms / sameInstance.p99Ms) : null;
      backlog = { backlogRuns: o.backlogRuns, queuedAtStart, queuedAtEnd, sameInstance: again, p99VsIdle };
      ctx.log(
        `  same instance, another organization with ${o.backlogRuns} queued runs in ${BACKLOG_PROJECTS} projects (${queuedAtStart} → ${queuedAtEnd} still queued while measuring): p50 ${again.p50Ms} p90 ${again.p90Ms} p99 ${again.p99Ms} max ${again.maxMs} ms (n=${again.n}); p99 ${p99VsIdle}× the idle one`,
      );
      // The rest of the backlog is not what the next case measures.
      for (const p of projects) {
        await storeFixtures(store).removeQueuedRuns(p.projectId);
        while ((await storeFixtures(store).runs.countDocuments({ projectId: p.projectId, state: "RUNNING" })) > 0) await sleep(20);
      }
    }
    let withHistory: PickupResult["withHistory"];
    if (o.historyRuns) {
      await storeFinished(o.historyRuns, "history");
      const again = await measure(2 * o.runs, true);
      withHistory = { finishedRuns: prefill + o.historyRuns, sameInstance: again };
      ctx.log(
        `  same instance, ${withHistory.finishedRuns} more finished runs stored: p50 ${again.p50Ms} p90 ${again.p90Ms} p99 ${again.p99Ms} max ${again.maxMs} ms (n=${again.n})`,
      );
    }
    return { pollIntervalMs, concurrency, finishedRunsBefore: prefill, sameInstance, otherInstance, backlog, withHistory };
  } finally {
    await rh.stop();
  }
}
