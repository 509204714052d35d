// Scenarios 1 and 4: webhook accepts on distinct records (REST and native gRPC) against the
// store's bare insert of a run (runs.create: one insertOne) on the same database server, and
// the 409 path on one record. Every phase also records the CPU time the load generator, the
// runhook server and the embedded Java server used, per accepted call: that tells where a gap
// comes from. Last, the SLO rates (lib/slo.ts): the highest open-loop rate with p99 ≤ 50 ms.
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Pool } from "undici";
import { TriggerRunRequestSchema, TriggerRunResponseSchema } from "../../gen/runhook/v1/trigger_pb.js";
import type { Store } from "../../src/store/index.js";
import type { StepDoc } from "../../src/store/types.js";
import { worldRun } from "../../fixtures/world.js";
import { benchWorld, openStore, spawnFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { grpcLimitMet, httpLimitMet } from "../lib/limits.js";
import { closedLoop, mergeStats, ratio, round, sleep, type LoadOptions, type LoadStats, type Outcome } from "../lib/load.js";
import { cpuMeter, rssMb, rssSampler, type Proc } from "../lib/procs.js";
import { sloSearch, type SloResult } from "../lib/slo.js";

/** A load phase with the CPU time each process used during its measured period. */
export interface Phase extends LoadStats {
  /** ms of CPU: loadGenerator (this process), server (runhook), java (embedded database). */
  cpuMs: Record<string, number | null>;
  /** The same per expected answer. */
  cpuMsPerOk: Record<string, number | null>;
}

export interface WebhookLevel {
  concurrency: number;
  rest: Phase;
  raw: Phase;
  grpc: Phase | null;
  restVsRaw: number | null;
  grpcVsRest: number | null;
}

export interface GrpcVariant {
  name: string;
  what: string;
  stats: Phase;
  vsRest: number | null;
}

export interface WebhookResult {
  levels: WebhookLevel[];
  conflict: { concurrency: number; rest: Phase; raw: Phase; restVsRaw: number | null } | null;
  /** The same accepts at the top concurrency through other gRPC clients, to tell client cost from server cost. */
  grpcClients: { concurrency: number; variants: GrpcVariant[] } | null;
  rss: { idleMb: number | null; endMb: number | null; peakMb: number | null };
  javaRss: { idleMb: number | null; endMb: number | null; peakMb: number | null } | null;
  /** The SLO rate (open loop, p99 within the limit, every answer a 202 / OK), REST and native gRPC. */
  slo: { rest: SloResult | null; grpc: SloResult | null } | null;
  grpcError?: string;
}

export interface SloPhaseOptions {
  p99LimitMs: number;
  stepMs: number;
  /** Per protocol. */
  budgetMs: number;
  precision: number;
}

const STEPS: StepDoc[] = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }];

export function restTrigger(pool: Pool, w: BenchWorld, expect: number) {
  const headers = { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" };
  return async (recordId: string): Promise<Outcome> => {
    const res = await pool.request({ path: w.hookPath, method: "POST", headers, body: JSON.stringify({ record_id: recordId }) });
    const text = await res.body.text();
    const met = httpLimitMet(res.statusCode, text);
    if (met) throw met;
    if (res.statusCode === expect && expect === 202 && !text.includes('"runId"')) return { ok: false, status: "202-without-runId" };
    return { ok: res.statusCode === expect, status: res.statusCode };
  };
}

const TRIGGER_PATH = "/runhook.v1.TriggerService/TriggerRun";
const encodeReq = (m: { webhookUrl: string; recordId: string }) => Buffer.from(toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, m)));

/** TriggerRun through @grpc/grpc-js `client` (its channel: one HTTP/2 connection). */
export function grpcTrigger(client: grpc.Client, w: BenchWorld) {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${w.userToken}`);
  const webhookUrl = `http://localhost${w.hookPath}`;
  return (recordId: string) =>
    new Promise<Outcome>((resolve, reject) =>
      client.makeUnaryRequest(
        TRIGGER_PATH,
        encodeReq,
        (b: Buffer) => fromBinary(TriggerRunResponseSchema, b),
        { webhookUrl, recordId },
        md,
        (err, value) => {
          const met = grpcLimitMet(err);
          if (met) return reject(met);
          resolve(err ? { ok: false, status: `grpc-${err.code}` } : { ok: !!value?.runId, status: "ok" });
        },
      ),
    );
}

/** TriggerRun framed by hand on one node:http2 session: the least a gRPC client can cost. */
export function rawHttp2Trigger(addr: string, w: BenchWorld) {
  const session = http2.connect(`http://${addr}`);
  session.on("error", () => {});
  const webhookUrl = `http://localhost${w.hookPath}`;
  const headers = {
    ":method": "POST",
    ":path": TRIGGER_PATH,
    "content-type": "application/grpc+proto",
    te: "trailers",
    authorization: `Bearer ${w.userToken}`,
  };
  const call = (recordId: string) =>
    new Promise<Outcome>((resolve, reject) => {
      const msg = encodeReq({ webhookUrl, recordId });
      const frame = Buffer.alloc(5 + msg.length);
      frame.writeUInt32BE(msg.length, 1);
      msg.copy(frame, 5);
      const req = session.request(headers);
      const chunks: Buffer[] = [];
      let status: string | undefined;
      let message: string | undefined;
      const ended = (h: http2.IncomingHttpHeaders) => {
        status = String(h["grpc-status"]);
        message = String(h["grpc-message"] ?? "");
      };
      req.on("response", (h) => {
        if (h["grpc-status"] !== undefined) ended(h); // trailers-only answer
      });
      req.on("trailers", ended);
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("error", (e: NodeJS.ErrnoException) => resolve({ ok: false, status: e.code ?? "error" }));
      req.on("close", () => {
        const met = grpcLimitMet({ code: status, details: message });
        if (met) return reject(met);
        if (status !== "0") return resolve({ ok: false, status: `grpc-${status ?? "none"}` });
        const body = Buffer.concat(chunks);
        const res = body.length >= 5 ? fromBinary(TriggerRunResponseSchema, body.subarray(5)) : undefined;
        resolve({ ok: !!res?.runId, status: "ok" });
      });
      req.end(frame);
    });
  return { call, close: () => new Promise<void>((r) => session.close(() => r())) };
}

/** The store's insert of a run alone (runs.create: one insertOne), without the trigger's checks. */
function rawInsert(raw: Store, w: BenchWorld) {
  return async (recordId: string): Promise<Outcome> => {
    const res = await raw.runs.create(worldRun(w, recordId, STEPS));
    return res.created ? { ok: true, status: "inserted" } : { ok: false, status: "duplicate" };
  };
}

/** What the 409 path does at the least: runs.create alone, whose insert the unique index refuses, then the read of the ongoing run. */
function rawConflict(raw: Store, w: BenchWorld, recordId: string) {
  return async (): Promise<Outcome> => {
    const res = await raw.runs.create(worldRun(w, recordId, STEPS));
    if (res.created) return { ok: false, status: "inserted" };
    return { ok: res.ongoingRunId !== null, status: "duplicate" };
  };
}

/** closedLoop, with the CPU each process used during its measured period. */
export async function phase(pids: Record<string, number | undefined>, o: LoadOptions): Promise<Phase> {
  let meter: ReturnType<typeof cpuMeter> | undefined;
  const stats = await closedLoop({ ...o, onMeasureStart: () => (meter = cpuMeter(pids)) });
  return withCpu(stats, meter!.stop());
}

function withCpu(stats: LoadStats, cpu: Record<string, number | null>): Phase {
  const { samples: _, ...rest } = stats;
  const per = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, v == null || stats.ok === 0 ? null : round(v / stats.ok, 3)]));
  return { ...rest, cpuMs: cpu, cpuMsPerOk: per };
}

/** How interleaved slices loads: 200 ms apart in balanced orders, unless a smoke run (which measures nothing) runs each load once, closer. */
export interface Slicing {
  pauseMs: number;
  onePass: boolean;
}

export interface Load {
  name: string;
  fn: (i: number) => Promise<Outcome>;
}

/**
 * Orders of n loads in which every load follows every other one equally often (a Williams
 * design: n rows for an even n, 2n for an odd one), so that what a slice leaves behind (the
 * database's garbage collection after a burst of raw inserts, say) burdens no load more than another.
 */
export function balancedOrders(n: number): number[][] {
  const first = [0];
  for (let k = 1; k < n; k++) first.push(k % 2 === 1 ? (k + 1) / 2 : n - k / 2);
  const rows = Array.from({ length: n }, (_, r) => first.map((x) => (x + r) % n));
  return n % 2 === 1 ? [...rows, ...rows.map((row) => [...row].reverse())] : rows;
}

/**
 * Several loads at one concurrency, measured in interleaved slices in balanced orders (the
 * design repeated `repeat` times) with a short pause between slices, so that each load saw the
 * machine in the same states: on a machine shared with other work, back-to-back phases differ
 * by more than the loads do. `durationMs` is each load's measured time in all. Returns each load merged.
 */
export async function interleaved(
  pids: Record<string, number | undefined>,
  concurrency: number,
  loads: Load[],
  o: { repeat: number; durationMs: number; warmupPerWorker: number } & Partial<Slicing>,
): Promise<Record<string, Phase>> {
  const parts = new Map<string, LoadStats[]>(loads.map((l) => [l.name, []]));
  const cpu = new Map<string, Record<string, number | null>>();
  const orders = o.onePass ? [loads.map((_, j) => j)] : Array.from({ length: o.repeat }, () => balancedOrders(loads.length)).flat();
  const sliceMs = Math.max(200, Math.round(o.durationMs / orders.length));
  // Warm-up of every load first (JIT, connections), unmeasured.
  for (const l of loads) await closedLoop({ concurrency, durationMs: 0, warmupPerWorker: o.warmupPerWorker, fn: l.fn });
  for (const order of orders) {
    for (const j of order) {
      const l = loads[j]!;
      await sleep(o.pauseMs ?? 200);
      let meter: ReturnType<typeof cpuMeter> | undefined;
      const st = await closedLoop({ concurrency, durationMs: sliceMs, keepSamples: true, fn: l.fn, onMeasureStart: () => (meter = cpuMeter(pids)) });
      const used = meter!.stop();
      parts.get(l.name)!.push(st);
      const acc = cpu.get(l.name) ?? {};
      for (const [k, v] of Object.entries(used)) acc[k] = v == null || (k in acc && acc[k] == null) ? null : (acc[k] ?? 0) + v;
      cpu.set(l.name, acc);
    }
  }
  return Object.fromEntries(loads.map((l) => [l.name, withCpu(mergeStats(parts.get(l.name)!), cpu.get(l.name)!)]));
}

export function fmtOther(s: LoadStats): string {
  const e = Object.entries(s.other);
  return e.length ? `(other: ${e.map(([k, v]) => `${k}×${v}`).join(", ")})` : "";
}

export function fmtCpu(p: Phase): string {
  return `cpu ms/call: ${Object.entries(p.cpuMsPerOk)
    .map(([k, v]) => `${k} ${v ?? "–"}`)
    .join(", ")}`;
}

export async function webhookScenario(
  ctx: BenchContext,
  opts: { concurrencies: number[]; durationMs: number; repeat: number; conflictConcurrency: number; slo?: SloPhaseOptions; slicing?: Slicing },
): Promise<WebhookResult> {
  const dbName = `${ctx.runTag}_hook`;
  const store = await openStore(ctx, dbName);
  const raw = await openStore(ctx, `${ctx.runTag}_hook_raw`);
  const w = await benchWorld(ctx, store, { steps: STEPS });
  const server = await spawnFor(ctx, "webhook", "start", dbName, { RUNHOOK_EXECUTOR: "false" });
  await sleep(1000);
  const idleMb = rssMb(server.pid);
  const javaIdleMb = ctx.javaPid ? rssMb(ctx.javaPid) : null;
  ctx.log(
    `  server up (pid ${server.pid}, idle RSS ${idleMb} MB${ctx.javaPid ? `; java pid ${ctx.javaPid}, RSS ${javaIdleMb} MB` : ""}); loads of a level interleaved in balanced orders, ${opts.durationMs} ms each`,
  );
  const sampler = rssSampler(server.pid);
  const javaSampler = ctx.javaPid ? rssSampler(ctx.javaPid) : undefined;
  const pids = { server: server.pid, java: ctx.javaPid };
  const client = new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure());
  const levels: WebhookLevel[] = [];
  let grpcError: string | undefined;
  let conflict: WebhookResult["conflict"] = null;
  let grpcClients: WebhookResult["grpcClients"] = null;
  let endMb: number | null = null;
  let peakMb: number | null = null;
  let javaRss: WebhookResult["javaRss"] = null;
  let slo: WebhookResult["slo"] = null;
  const top = Math.max(...opts.concurrencies);
  try {
    const grpcCall = grpcTrigger(client, w);
    const probe = await grpcCall("grpc-probe");
    if (!probe.ok) grpcError = `TriggerRun over native gRPC answered ${probe.status}`;
    for (const c of opts.concurrencies) {
      const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
      const post = restTrigger(pool, w, 202);
      const ins = rawInsert(raw, w);
      const loads: Load[] = [
        { name: "rest", fn: (i) => post(`rest-${c}-${i}`) },
        { name: "raw", fn: (i) => ins(`raw-${c}-${i}`) },
      ];
      if (!grpcError) loads.push({ name: "grpc", fn: (i) => grpcCall(`grpc-${c}-${i}`) });
      // At the top concurrency, other gRPC clients too: grpc-js with a channel (connection)
      // per caller, and gRPC framed by hand on one node:http2 session (no grpc-js at all).
      const channels =
        c === top && !grpcError
          ? Array.from({ length: c }, () => new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 }))
          : [];
      const h2 = c === top && !grpcError ? rawHttp2Trigger(server.grpcAddr!, w) : undefined;
      if (channels.length) {
        const calls = channels.map((cl) => grpcTrigger(cl, w));
        loads.push({ name: "grpcChannels", fn: (i) => calls[i % c]!(`grpc-ch-${c}-${i}`) }); // round-robin: about one call in flight per channel
      }
      if (h2) loads.push({ name: "grpcHttp2", fn: (i) => h2.call(`grpc-h2-${c}-${i}`) });
      try {
        const r = await interleaved(pids, c, loads, { repeat: opts.repeat, durationMs: opts.durationMs, warmupPerWorker: c === 1 ? 20 : 2, ...opts.slicing });
        const rest = r.rest!;
        const rawStats = r.raw!;
        const g = r.grpc ?? null;
        ctx.log(`  REST  c=${c}: ${rest.okPerSec}/s p50 ${rest.p50Ms} p99 ${rest.p99Ms} ms ${fmtOther(rest)} ${fmtCpu(rest)}`);
        ctx.log(`  raw   c=${c}: ${rawStats.okPerSec}/s p50 ${rawStats.p50Ms} p99 ${rawStats.p99Ms} ms ${fmtCpu(rawStats)}`);
        if (g) ctx.log(`  gRPC  c=${c}: ${g.okPerSec}/s p50 ${g.p50Ms} p99 ${g.p99Ms} ms ${fmtOther(g)} ${fmtCpu(g)}`);
        levels.push({
          concurrency: c,
          rest,
          raw: rawStats,
          grpc: g,
          restVsRaw: ratio(rest.okPerSec, rawStats.okPerSec),
          grpcVsRest: g ? ratio(g.okPerSec, rest.okPerSec) : null,
        });
        if (g && r.grpcChannels && r.grpcHttp2) {
          const ch = r.grpcChannels;
          const h = r.grpcHttp2;
          ctx.log(`  gRPC  c=${c}, ${c} grpc-js channels: ${ch.okPerSec}/s p50 ${ch.p50Ms} p99 ${ch.p99Ms} ms ${fmtOther(ch)} ${fmtCpu(ch)}`);
          ctx.log(`  gRPC  c=${c}, plain node:http2: ${h.okPerSec}/s p50 ${h.p50Ms} p99 ${h.p99Ms} ms ${fmtOther(h)} ${fmtCpu(h)}`);
          grpcClients = {
            concurrency: c,
            variants: [
              {
                name: "grpc-js, 1 channel",
                what: "one @grpc/grpc-js Client (one HTTP/2 connection) for every caller",
                stats: g,
                vsRest: ratio(g.okPerSec, rest.okPerSec),
              },
              {
                name: `grpc-js, ${c} channels`,
                what: "a @grpc/grpc-js Client with its own connection per caller, calls spread round-robin",
                stats: ch,
                vsRest: ratio(ch.okPerSec, rest.okPerSec),
              },
              {
                name: "node:http2, 1 session",
                what: "gRPC framed by hand on one node:http2 session (no grpc-js)",
                stats: h,
                vsRest: ratio(h.okPerSec, rest.okPerSec),
              },
            ],
          };
        }
      } finally {
        await pool.close();
        for (const cl of channels) cl.close();
        await h2?.close();
      }
    }

    // The 409 path: one record with a run that stays QUEUED (no executors), hammered.
    const c = opts.conflictConcurrency;
    const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
    try {
      const first = await restTrigger(pool, w, 202)("hot-record");
      if (!first.ok) throw new Error(`first trigger of the hot record answered ${first.status}`);
      if (!(await raw.runs.create(worldRun(w, "hot-record", STEPS))).created) throw new Error("the raw hot record's run was not created");
      const post409 = restTrigger(pool, w, 409);
      const loads: Load[] = [
        { name: "rest", fn: () => post409("hot-record") },
        { name: "raw", fn: rawConflict(raw, w, "hot-record") },
      ];
      const r = await interleaved(pids, c, loads, { repeat: opts.repeat, durationMs: opts.durationMs, warmupPerWorker: 2, ...opts.slicing });
      const rest = r.rest!;
      const rawC = r.raw!;
      ctx.log(`  409   c=${c}: ${rest.okPerSec}/s p50 ${rest.p50Ms} p99 ${rest.p99Ms} ms ${fmtOther(rest)} ${fmtCpu(rest)}`);
      ctx.log(`  raw dup+find c=${c}: ${rawC.okPerSec}/s p50 ${rawC.p50Ms} p99 ${rawC.p99Ms} ms`);
      conflict = { concurrency: c, rest, raw: rawC, restVsRaw: ratio(rest.okPerSec, rawC.okPerSec) };
    } finally {
      await pool.close();
    }
    if (opts.slo) slo = await sloPhases(ctx, server, w, grpcError ? undefined : grpcCall, opts.slo);
  } finally {
    client.close();
    endMb = rssMb(server.pid);
    peakMb = sampler.stop();
    if (ctx.javaPid) javaRss = { idleMb: javaIdleMb, endMb: rssMb(ctx.javaPid), peakMb: javaSampler!.stop() };
    await server.stop();
  }
  return { levels, conflict, grpcClients, rss: { idleMb, endMb, peakMb }, javaRss, slo, grpcError };
}

/**
 * The SLO search (lib/slo.ts) over REST (undici, one keep-alive connection per request in
 * flight, up to 128) and then over native gRPC (the grpc-js client of the closed-loop phases),
 * on distinct records, after the closed-loop phases on the same server.
 */
async function sloPhases(
  ctx: BenchContext,
  server: Proc,
  w: BenchWorld,
  grpcCall: ((recordId: string) => Promise<Outcome>) | undefined,
  o: SloPhaseOptions,
): Promise<WebhookResult["slo"]> {
  const search = (call: (id: string) => Promise<Outcome>, idPrefix: string) =>
    sloSearch({ call, p99LimitMs: o.p99LimitMs, stepMs: o.stepMs, budgetMs: o.budgetMs, precision: o.precision, startPerSec: 50, log: ctx.log }, idPrefix);
  ctx.log(
    `  SLO search, open loop, p99 ≤ ${o.p99LimitMs} ms from the due time, ${o.stepMs} ms steps, at most ${Math.round(o.budgetMs / 1000)} s per protocol:`,
  );
  const pool = new Pool(server.baseUrl!, { connections: 128, pipelining: 1 });
  let rest: SloResult;
  try {
    ctx.log("   REST webhook:");
    rest = await search(restTrigger(pool, w, 202), "slo-rest");
  } finally {
    await pool.close();
  }
  ctx.log(`  SLO REST: ${rest.perSec}/s (${rest.steps.length} steps, ${Math.round(rest.elapsedMs / 1000)} s)`);
  if (!grpcCall) return { rest, grpc: null };
  ctx.log("   native gRPC TriggerRun:");
  const grpc = await search(grpcCall, "slo-grpc");
  ctx.log(`  SLO gRPC: ${grpc.perSec}/s (${grpc.steps.length} steps, ${Math.round(grpc.elapsedMs / 1000)} s)`);
  return { rest, grpc };
}
