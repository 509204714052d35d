// Database round trips of one webhook call, counted, not restated: the real server (in this
// process, executors off) connects with `?monitorCommands=true`, so its own MongoClient
// reports every command it sends; calls are made one at a time over HTTP and the commands
// between a request and its answer are that call's. Commands whose time intervals overlap
// were in flight together: they form one stage.
import { performance } from "node:perf_hooks";
import { storeFixtures } from "../../src/store/index.js";
import { Pool } from "undici";
import { createLogger } from "../../src/lib/logging.js";
import { startRunhook } from "../../src/main.js";
import { RUN_QUEUED } from "../../src/domain/runs/model.js";
import { worldRun } from "../../fixtures/world.js";
import { label, recordCommands, stagesOf, type Command } from "../lib/commands.js";
import { benchWorld, openStore, serverConfig, uriFor, type BenchContext } from "../lib/context.js";
import { closedLoop, round, sleep, summarize } from "../lib/load.js";
import { restTrigger } from "./webhook.js";

export interface CommandRow {
  command: string;
  /** Start, from the request's start, ms. */
  atMs: number;
  ms: number;
}

export interface CallTrace {
  status: number | string;
  /** Wall time of the HTTP call, ms. */
  callMs: number;
  roundTrips: number;
  stages: { commands: CommandRow[]; ms: number }[];
}

export interface RoundTripsResult {
  /** Accepted calls counted. */
  calls: number;
  /** Commands sent per accepted call (min = max when every call makes the same). */
  perCall: { min: number; max: number; mean: number };
  /** Sequential stages per accepted call. */
  stagesPerCall: { min: number; max: number };
  /** Time of the database stages as a share of the call's wall time (median over the calls). */
  dbShareP50: number | null;
  callMs: ReturnType<typeof summarize>;
  accepted: CallTrace;
  conflict: CallTrace | null;
  /**
   * The same accepts at a higher concurrency (closed loop, distinct records): every command
   * the server sent from the measured period's start until its last answer (and 100 ms more,
   * for writes not waited for), per accepted call. Where calls share commands, this is below
   * the one-at-a-time count.
   */
  concurrent: { concurrency: number; accepted: number; commands: number; perAccept: number | null; other: Record<string, number> } | null;
  /** What an executor sends for one run of the load_record + update_record workflow, from the claim to the last activity entry. */
  run: { runs: number; perRun: { min: number; max: number; mean: number }; trace: CallTrace } | null;
}

function trace(cmds: Command[], t0: number, callMs: number, status: number | string): CallTrace {
  const stages = stagesOf(cmds).map((s) => ({
    ms: round(s.endMs - s.startMs),
    commands: s.commands.map((c) => ({ command: label(c), atMs: round(c.startMs - t0), ms: round(c.endMs - c.startMs) })),
  }));
  return { status, callMs: round(callMs), roundTrips: cmds.length, stages };
}

export function formatTrace(t: CallTrace): string[] {
  const out: string[] = [];
  t.stages.forEach((s, i) => {
    const par = s.commands.length > 1 ? ` (${s.commands.length} in parallel)` : "";
    out.push(`stage ${i + 1}${par}, ${s.ms} ms: ${s.commands.map((c) => `${c.command} [+${c.atMs} ms, ${c.ms} ms]`).join(" ‖ ")}`);
  });
  return out;
}

/**
 * One run at a time, claimed by a worker in this process (monitored, its poll slowed to a
 * minute so that only the run.queued event wakes it) from a QUEUED run stored through another
 * connection: the commands from the claim until the worker is idle again.
 */
async function runRoundTrips(ctx: BenchContext, runs: number): Promise<RoundTripsResult["run"]> {
  const dbName = `${ctx.runTag}_rt_run`;
  const store = await openStore(ctx, dbName);
  const w = await benchWorld(ctx, store);
  const config = serverConfig(ctx, dbName, { MONGODB_URI: uriFor(ctx.uri, dbName, "monitorCommands=true"), RUNHOOK_EXECUTOR_POLL_MS: "60000" });
  const worker = await startRunhook(config, { mode: "worker", logger: createLogger("silent") });
  const rec = recordCommands(storeFixtures(worker.deps.store).commandEvents());
  try {
    const one = async (i: number) => {
      const doc = worldRun(w, `r${(i % 5) + 1}`, [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }], { tokenId: "bench" });
      if (!(await store.runs.create(doc)).created) throw new Error("run not created");
      await sleep(5);
      rec.take();
      const t0 = performance.now();
      worker.deps.events.emit(RUN_QUEUED, doc._id);
      let cur = await store.runs.get(doc._id);
      while (!cur?.finishedAt) {
        await sleep(2);
        cur = await store.runs.get(doc._id);
      }
      if (cur.state !== "SUCCEEDED") throw new Error(`the run ended ${cur.state}: ${cur.error}`);
      await sleep(50); // the activity entry written after the run finished
      const ms = performance.now() - t0;
      return trace(rec.take(), t0, ms, cur.state);
    };
    for (let i = 0; i < 3; i++) await one(i);
    const traces: CallTrace[] = [];
    for (let i = 3; i < 3 + runs; i++) traces.push(await one(i));
    const counts = traces.map((t) => t.roundTrips);
    return {
      runs: traces.length,
      perRun: { min: Math.min(...counts), max: Math.max(...counts), mean: round(counts.reduce((a, b) => a + b, 0) / counts.length) },
      trace: traces[traces.length - 1]!,
    };
  } finally {
    rec.stop();
    await worker.stop();
  }
}

/** Commands per accepted call with `concurrency` callers at once, for `durationMs` (see RoundTripsResult.concurrent). */
async function concurrentRoundTrips(
  rec: ReturnType<typeof recordCommands>,
  baseUrl: string,
  w: Awaited<ReturnType<typeof benchWorld>>,
  concurrency: number,
  durationMs: number,
): Promise<RoundTripsResult["concurrent"]> {
  const pool = new Pool(baseUrl, { connections: concurrency, pipelining: 1 });
  try {
    const post = restTrigger(pool, w, 202);
    const stats = await closedLoop({
      concurrency,
      durationMs,
      warmupPerWorker: 2,
      fn: (i) => post(`rt-c${concurrency}-${i}`),
      onMeasureStart: () => void rec.take(),
    });
    await sleep(100);
    const commands = rec.take().length;
    return { concurrency, accepted: stats.ok, commands, perAccept: stats.ok ? round(commands / stats.ok) : null, other: stats.other };
  } finally {
    await pool.close();
  }
}

export async function roundTripsScenario(
  ctx: BenchContext,
  o: { calls: number; runs: number; concurrency: number; durationMs: number },
): Promise<RoundTripsResult> {
  const dbName = `${ctx.runTag}_rt`;
  const store = await openStore(ctx, dbName);
  const w = await benchWorld(ctx, store);
  const config = serverConfig(ctx, dbName, { RUNHOOK_EXECUTOR: "false", MONGODB_URI: uriFor(ctx.uri, dbName, "monitorCommands=true") });
  const rh = await startRunhook(config, { mode: "server", logger: createLogger("silent") });
  const rec = recordCommands(storeFixtures(rh.deps.store).commandEvents());
  const pool = new Pool(rh.baseUrl!, { connections: 1, pipelining: 1 });
  try {
    const post = restTrigger(pool, w, 202);
    const call = async (recordId: string, expect: (s: number | string) => boolean) => {
      await sleep(5); // nothing of the previous call still in flight
      rec.take();
      const t0 = performance.now();
      const r = await post(recordId);
      const ms = performance.now() - t0;
      const cmds = rec.take();
      if (!expect(r.status)) throw new Error(`a call for ${recordId} answered ${r.status}`);
      return trace(cmds, t0, ms, r.status);
    };
    for (let i = 0; i < 5; i++) await call(`rt-warm-${i}`, (s) => s === 202); // connections, JIT
    const traces: CallTrace[] = [];
    for (let i = 0; i < o.calls; i++) traces.push(await call(`rt-${i}`, (s) => s === 202));
    const conflict = await call(`rt-0`, (s) => s === 409); // rt-0's run is still QUEUED: no executors
    const concurrent = await concurrentRoundTrips(rec, rh.baseUrl!, w, o.concurrency, o.durationMs);
    const run = await runRoundTrips(ctx, o.runs);
    const counts = traces.map((t) => t.roundTrips);
    const stageCounts = traces.map((t) => t.stages.length);
    const shares = traces.map((t) => t.stages.reduce((a, s) => a + s.ms, 0) / t.callMs).sort((a, b) => a - b);
    return {
      calls: traces.length,
      perCall: { min: Math.min(...counts), max: Math.max(...counts), mean: round(counts.reduce((a, b) => a + b, 0) / counts.length) },
      stagesPerCall: { min: Math.min(...stageCounts), max: Math.max(...stageCounts) },
      dbShareP50: shares.length ? round(shares[Math.floor(shares.length / 2)]!, 3) : null,
      callMs: summarize(traces.map((t) => t.callMs)),
      accepted: traces[traces.length - 1]!,
      conflict,
      concurrent,
      run,
    };
  } finally {
    rec.stop();
    await pool.close();
    await rh.stop();
  }
}
