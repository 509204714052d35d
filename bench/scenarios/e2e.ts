// Scenario 2: trigger → SUCCEEDED for a load_record + update_record workflow, with executors
// inside one server, in 1 worker process, in 2 worker processes. Figures come from the run
// documents (createdAt, startedAt, finishedAt), so they do not depend on how we poll.
import { Pool, type Dispatcher } from "undici";
import { FINISHED_STATES } from "../../src/domain/runs/model.js";
import { runStateMachine } from "../../src/domain/runs/state.js";
import { storeFixtures, type Store } from "../../src/store/index.js";
import type { RunDoc, StepDoc } from "../../src/store/types.js";
import { benchWorld, openStore, spawnFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { httpLimitMet } from "../lib/limits.js";
import { closedLoop, ratio, round, sleep, summarize, type LoadStats } from "../lib/load.js";
import { rssMb, rssSampler, type Proc } from "../lib/procs.js";
import { worldRun } from "../../fixtures/world.js";

const FINISHED: string[] = FINISHED_STATES;

export interface E2eConfigResult {
  name: string;
  executorProcesses: number;
  available: boolean;
  reason?: string;
  /** Runs triggered one at a time (no queueing): pick-up and completion latency. */
  paced?: { runs: number; succeeded: number; pickup: ReturnType<typeof summarize>; completion: ReturnType<typeof summarize> };
  /** A burst of runs: throughput from first createdAt to last finishedAt. */
  burst?: {
    runs: number;
    succeeded: number;
    failed: number;
    unfinished: number;
    runsPerSec: number | null;
    trigger: LoadStats;
    pickup: ReturnType<typeof summarize>;
    completion: ReturnType<typeof summarize>;
    vsRawLifecycle: number | null;
  };
  rss?: { idleMb: number | null; endMb: number | null; peakMb: number | null };
  /** The worker processes (executors only), the highest of them. */
  workerRss?: { idleMb: number | null; peakMb: number | null };
}

export interface E2eResult {
  rawLifecycle: LoadStats | null;
  configs: E2eConfigResult[];
}

export interface E2eOptions {
  pacedRuns: number;
  burstRuns: number;
  triggerConcurrency: number;
  rawDurationMs: number;
  /** How long one run may take to be picked up before "executor not available". */
  probeTimeoutMs: number;
  finishTimeoutMs: number;
}

/** The runs `ids` once all are finished (or the time is up), read through the store. */
async function waitFinished(store: Store, ids: string[], timeoutMs: number): Promise<RunDoc[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const docs: RunDoc[] = [];
    for (let i = 0; i < ids.length; i += 1000) docs.push(...(await store.runs.getMany(ids.slice(i, i + 1000))));
    if (docs.every((d) => FINISHED.includes(d.state)) || Date.now() > deadline) return docs;
    await sleep(300);
  }
}

const ms = (a: Date | null, b: Date | null) => (a && b ? a.getTime() - b.getTime() : null);

function latencies(docs: RunDoc[]) {
  return {
    pickup: summarize(docs.map((d) => ms(d.startedAt, d.createdAt)).filter((v): v is number => v !== null)),
    completion: summarize(
      docs
        .filter((d) => d.state === "SUCCEEDED")
        .map((d) => ms(d.finishedAt, d.createdAt))
        .filter((v): v is number => v !== null),
    ),
  };
}

/** A webhook answer's body; a limit's refusal throws (LimitMet). */
async function answerOf(res: Dispatcher.ResponseData): Promise<{ runId?: string }> {
  const text = await res.body.text();
  const met = httpLimitMet(res.statusCode, text);
  if (met) throw met;
  try {
    return JSON.parse(text) as { runId?: string };
  } catch {
    return {};
  }
}

/** One run, to see whether any executor picks runs up at all. */
async function probe(store: Store, pool: Pool, w: BenchWorld, recordId: string, timeoutMs: number): Promise<string | null> {
  const res = await pool.request({
    path: w.hookPath,
    method: "POST",
    headers: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
    body: JSON.stringify({ record_id: recordId }),
  });
  const body = await answerOf(res);
  if (res.statusCode !== 202 || !body.runId) return `webhook answered ${res.statusCode}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await store.runs.get(body.runId);
    if (run && FINISHED.includes(run.state)) return run.state === "SUCCEEDED" ? null : `the probe run ended ${run.state}: ${run.error}`;
    if (Date.now() > deadline) {
      return run?.state === "QUEUED"
        ? `executor not available: a run stayed QUEUED for ${timeoutMs / 1000} s`
        : `executor not available: a run did not finish within ${timeoutMs / 1000} s (state ${run?.state})`;
    }
    await sleep(100);
  }
}

async function runConfig(
  ctx: BenchContext,
  store: Store,
  w: BenchWorld,
  name: string,
  procs: number,
  server: Proc,
  workers: Proc[],
  o: E2eOptions,
  nextRecord: () => string,
  rawRate: number | null,
): Promise<E2eConfigResult> {
  const res: E2eConfigResult = { name, executorProcesses: procs, available: false };
  const idleMb = rssMb(server.pid);
  const sampler = rssSampler(server.pid);
  const maxOf = (v: (number | null)[]) => (v.some((x) => x !== null) ? Math.max(...v.filter((x): x is number => x !== null)) : null);
  const workerIdle = maxOf(workers.map((p) => rssMb(p.pid)));
  const workerSamplers = workers.map((p) => rssSampler(p.pid));
  const pool = new Pool(server.baseUrl!, { connections: o.triggerConcurrency, pipelining: 1 });
  try {
    const reason = await probe(store, pool, w, nextRecord(), o.probeTimeoutMs);
    if (reason) {
      res.reason = reason;
      ctx.log(`  ${name}: ${reason}`);
      return res;
    }
    res.available = true;

    /** One webhook call on the next record: its status and runId. */
    const callWebhook = async () => {
      const r = await pool.request({
        path: w.hookPath,
        method: "POST",
        headers: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ record_id: nextRecord() }),
      });
      return { status: r.statusCode, runId: (await answerOf(r)).runId };
    };

    // Paced: one run at a time, each after the previous finished being accepted, with a gap.
    const pacedIds: string[] = [];
    for (let i = 0; i < o.pacedRuns; i++) {
      const { runId } = await callWebhook();
      if (runId) pacedIds.push(runId);
      await sleep(20);
    }
    const pacedDocs = await waitFinished(store, pacedIds, o.finishTimeoutMs);
    res.paced = { runs: pacedIds.length, succeeded: pacedDocs.filter((d) => d.state === "SUCCEEDED").length, ...latencies(pacedDocs) };
    ctx.log(
      `  ${name} paced: ${res.paced.succeeded}/${res.paced.runs} succeeded, pick-up p50 ${res.paced.pickup.p50Ms} p99 ${res.paced.pickup.p99Ms} ms, completion p50 ${res.paced.completion.p50Ms} p99 ${res.paced.completion.p99Ms} ms`,
    );

    // Burst: as fast as the webhook accepts them, then until every run finished.
    const burstIds: string[] = [];
    const trigger = await closedLoop({
      concurrency: o.triggerConcurrency,
      durationMs: 10 * 60_000,
      maxRequests: o.burstRuns,
      fn: async () => {
        const { status, runId } = await callWebhook();
        if (status === 202 && runId) burstIds.push(runId);
        return { ok: status === 202, status };
      },
    });
    const docs = await waitFinished(store, burstIds, o.finishTimeoutMs);
    const finished = docs.filter((d) => d.finishedAt);
    const first = Math.min(...docs.map((d) => d.createdAt.getTime()));
    const last = Math.max(...finished.map((d) => d.finishedAt!.getTime()));
    const runsPerSec = finished.length && last > first ? round((finished.length / (last - first)) * 1000, 1) : null;
    // Runs the executors did not finish in time would delay the next configuration's pick-ups: cancel them.
    if (finished.length < docs.length) {
      const machine = runStateMachine(store);
      for (const d of docs.filter((x) => !x.finishedAt)) {
        const cur = await store.runs.get(d._id);
        if (cur && !FINISHED.includes(cur.state)) await machine.cancel(cur, "cancelled by the benchmark (did not finish in time)");
      }
    }
    res.burst = {
      runs: burstIds.length,
      succeeded: docs.filter((d) => d.state === "SUCCEEDED").length,
      failed: docs.filter((d) => d.state === "FAILED").length,
      unfinished: docs.length - finished.length,
      runsPerSec,
      trigger,
      ...latencies(docs),
      vsRawLifecycle: ratio(runsPerSec, rawRate),
    };
    ctx.log(
      `  ${name} burst: ${res.burst.succeeded}/${res.burst.runs} succeeded (${res.burst.failed} failed, ${res.burst.unfinished} unfinished), ${runsPerSec} runs/s, pick-up p99 ${res.burst.pickup.p99Ms} ms, completion p99 ${res.burst.completion.p99Ms} ms`,
    );
    return res;
  } finally {
    await pool.close();
    res.rss = { idleMb, endMb: rssMb(server.pid), peakMb: sampler.stop() };
    if (workers.length) res.workerRss = { idleMb: workerIdle, peakMb: maxOf(workerSamplers.map((s) => s.stop())) };
  }
}

/** The least a run costs through the raw driver: insert, claim, read the record, update it, finish. */
async function rawLifecycle(ctx: BenchContext, o: E2eOptions, records: number): Promise<LoadStats> {
  const raw = await openStore(ctx, `${ctx.runTag}_e2e_raw`);
  // As many records as the runhook world has (no index on `id` in either: runhook creates none on data collections).
  const N = records;
  const w = await benchWorld(ctx, raw, { records: Array.from({ length: N }, (_, k) => ({ id: `x${k}`, status: "new" })) });
  const fixtures = storeFixtures(raw);
  const steps: StepDoc[] = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }];
  return closedLoop({
    concurrency: 8,
    durationMs: o.rawDurationMs,
    warmupPerWorker: 2,
    fn: async (i) => {
      const rec = `x${i % N}`;
      const status = await fixtures.rawRunCycle(worldRun(w, `${rec}-${i}`, steps), { database: w.dataDatabase, collection: w.collection, recordId: rec });
      return { ok: status === "ok", status };
    },
  });
}

export async function e2eScenario(ctx: BenchContext, o: E2eOptions): Promise<E2eResult> {
  const dbName = `${ctx.runTag}_e2e`;
  const store = await openStore(ctx, dbName);
  const total = 3 * (o.pacedRuns + o.burstRuns + 2);
  const w = await benchWorld(ctx, store, {
    steps: [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }],
    records: Array.from({ length: total }, (_, k) => ({ id: `e${k}`, status: "new", region: "eu" })),
  });
  let next = 0;
  const nextRecord = () => `e${next++ % total}`;

  const rawStats = await rawLifecycle(ctx, o, total);
  ctx.log(`  raw lifecycle c=8: ${rawStats.okPerSec} runs/s`);
  const configs: E2eConfigResult[] = [];
  const procs: Proc[] = [];
  const stopAll = async () => {
    await Promise.all(procs.splice(0).map((p) => p.stop()));
  };
  try {
    // One instance: executors inside the server (in-process pick-up of its own runs).
    procs.push(await spawnFor(ctx, "e2e", "start", dbName, { RUNHOOK_EXECUTOR: "true" }));
    await sleep(500);
    const one = await runConfig(ctx, store, w, "server with executors", 1, procs[0]!, [], o, nextRecord, rawStats.okPerSec);
    configs.push(one);
    await stopAll();
    if (!one.available) {
      configs.push({ name: "server + 1 worker", executorProcesses: 1, available: false, reason: one.reason });
      configs.push({ name: "server + 2 workers", executorProcesses: 2, available: false, reason: one.reason });
      return { rawLifecycle: rawStats, configs };
    }
    // Executors only in worker processes.
    const [server, w1] = await Promise.all([spawnFor(ctx, "e2e", "start", dbName, { RUNHOOK_EXECUTOR: "false" }), spawnFor(ctx, "e2e", "worker", dbName)]);
    procs.push(server, w1);
    await sleep(500);
    configs.push(await runConfig(ctx, store, w, "server + 1 worker", 1, server, [w1], o, nextRecord, rawStats.okPerSec));
    const w2 = await spawnFor(ctx, "e2e", "worker", dbName);
    procs.push(w2);
    await sleep(500);
    configs.push(await runConfig(ctx, store, w, "server + 2 workers", 2, server, [w1, w2], o, nextRecord, rawStats.okPerSec));
  } finally {
    await stopAll();
  }
  return { rawLifecycle: rawStats, configs };
}
