// Scenarios 1 and 4: webhook accepts on distinct records (REST and native gRPC) against raw
// insertOne into the runs collection, and the 409 path on one record.
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Pool } from "undici";
import { TriggerRunRequestSchema, TriggerRunResponseSchema } from "../../gen/runhook/v1/trigger_pb.js";
import type { Database } from "../../src/db/mongo.js";
import { isDuplicateKey } from "../../src/db/mongo.js";
import type { RunDoc, StepDoc } from "../../src/db/types.js";
import { activeKeyOf, newRunDoc } from "../../src/runs/model.js";
import { benchWorld, openDb, spawnFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { closedLoop, ratio, sleep, type LoadStats } from "../lib/load.js";
import { rssMb, rssSampler } from "../lib/procs.js";
import { acceptBreakdown, type Breakdown } from "./breakdown.js";

export interface WebhookLevel {
  concurrency: number;
  rest: LoadStats;
  raw: LoadStats;
  grpc: LoadStats | null;
  restVsRaw: number | null;
  grpcVsRest: number | null;
}

export interface WebhookResult {
  levels: WebhookLevel[];
  conflict: { concurrency: number; rest: LoadStats; raw: LoadStats; restVsRaw: number | null } | null;
  rss: { idleMb: number | null; endMb: number | null; peakMb: number | null };
  grpcError?: string;
  /** The accept path's database operations one by one, after the load. */
  breakdown?: Breakdown | { error: string };
}

/** A run document exactly as triggerRun builds it. */
/** The run document TriggerService stores, for the raw-insert baseline. */
export function runDocLike(w: BenchWorld, recordId: string, steps: StepDoc[]): RunDoc {
  return newRunDoc({
    workflowId: w.workflowId,
    workflowVersion: 1,
    steps,
    renderingId: w.renderingId,
    projectId: w.projectId,
    environmentId: w.environmentId,
    collectionId: w.collectionId,
    collection: w.collection,
    recordId,
    userId: w.user._id,
    userEmail: w.user.email,
    tokenId: randomUUID(),
    via: "webhook",
  });
}

const STEPS: StepDoc[] = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }];

export function restTrigger(pool: Pool, w: BenchWorld, expect: number) {
  const headers = { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" };
  return async (recordId: string) => {
    const res = await pool.request({ path: w.hookPath, method: "POST", headers, body: JSON.stringify({ record_id: recordId }) });
    const text = await res.body.text();
    if (res.statusCode === expect && expect === 202 && !text.includes('"runId"')) return { ok: false, status: "202-without-runId" };
    return { ok: res.statusCode === expect, status: res.statusCode };
  };
}

export function grpcTrigger(client: grpc.Client, w: BenchWorld) {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${w.userToken}`);
  const webhookUrl = `http://localhost${w.hookPath}`;
  return (recordId: string) =>
    new Promise<{ ok: boolean; status: string | number }>((resolve) =>
      client.makeUnaryRequest(
        "/runhook.v1.TriggerService/TriggerRun",
        (m: unknown) => Buffer.from(toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, m as never))),
        (b: Buffer) => fromBinary(TriggerRunResponseSchema, b),
        { webhookUrl, recordId } as never,
        md,
        (err, value) => resolve(err ? { ok: false, status: `grpc-${err.code}` } : { ok: !!(value as { runId?: string }).runId, status: "ok" }),
      ),
    );
}

function rawInsert(raw: Database, w: BenchWorld) {
  return async (recordId: string) => {
    await raw.runs.insertOne(runDocLike(w, recordId, STEPS));
    return { ok: true, status: "inserted" };
  };
}

/** What the 409 path does at minimum: the insert that collides, then the read of the ongoing run. */
function rawConflict(raw: Database, w: BenchWorld, recordId: string) {
  return async () => {
    try {
      await raw.runs.insertOne(runDocLike(w, recordId, STEPS));
      return { ok: false, status: "inserted" };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const ongoing = await raw.runs.findOne({ activeKey: activeKeyOf(w.workflowId, recordId) }, { projection: { _id: 1 } });
      return { ok: !!ongoing, status: "duplicate" };
    }
  };
}

export async function webhookScenario(ctx: BenchContext, opts: { concurrencies: number[]; durationMs: number; conflictConcurrency: number; breakdownIterations: number }): Promise<WebhookResult> {
  const dbName = `${ctx.runTag}_hook`;
  const db = await openDb(ctx, dbName);
  const raw = await openDb(ctx, `${ctx.runTag}_hook_raw`);
  const w = await benchWorld(ctx, db);
  const server = await spawnFor(ctx, "webhook", "start", dbName, { RUNHOOK_EXECUTOR: "false" });
  await sleep(1000);
  const idleMb = rssMb(server.pid);
  ctx.log(`  server up (pid ${server.pid}, idle RSS ${idleMb} MB)`);
  const sampler = rssSampler(server.pid);
  const client = new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure());
  const levels: WebhookLevel[] = [];
  let grpcError: string | undefined;
  let conflict: WebhookResult["conflict"] = null;
  let endMb: number | null = null;
  let peakMb: number | null = null;
  try {
    const grpcCall = grpcTrigger(client, w);
    for (const c of opts.concurrencies) {
      const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
      try {
        const warmup = c === 1 ? 10 : 1;
        const post = restTrigger(pool, w, 202);
        const rest = await closedLoop({ concurrency: c, durationMs: opts.durationMs, warmupPerWorker: warmup, fn: (i) => post(`rest-${c}-${i}`) });
        ctx.log(`  REST  c=${c}: ${rest.okPerSec}/s p50 ${rest.p50Ms} p99 ${rest.p99Ms} p999 ${rest.p999Ms} ms ${fmtOther(rest)}`);
        const rawStats = await closedLoop({ concurrency: c, durationMs: opts.durationMs, warmupPerWorker: warmup, fn: (i) => rawInsert(raw, w)(`raw-${c}-${i}`) });
        ctx.log(`  raw   c=${c}: ${rawStats.okPerSec}/s p50 ${rawStats.p50Ms} p99 ${rawStats.p99Ms} ms`);
        let g: LoadStats | null = null;
        if (!grpcError) {
          const probe = await grpcCall(`grpc-probe-${c}`);
          if (!probe.ok) grpcError = `TriggerRun over native gRPC answered ${probe.status}`;
          else {
            g = await closedLoop({ concurrency: c, durationMs: opts.durationMs, warmupPerWorker: warmup, fn: (i) => grpcCall(`grpc-${c}-${i}`) });
            ctx.log(`  gRPC  c=${c}: ${g.okPerSec}/s p50 ${g.p50Ms} p99 ${g.p99Ms} p999 ${g.p999Ms} ms ${fmtOther(g)}`);
          }
        }
        levels.push({ concurrency: c, rest, raw: rawStats, grpc: g, restVsRaw: ratio(rest.okPerSec, rawStats.okPerSec), grpcVsRest: g ? ratio(g.okPerSec, rest.okPerSec) : null });
      } finally {
        await pool.close();
      }
    }

    // The 409 path: one record with a run that stays QUEUED (no executors), hammered.
    const c = opts.conflictConcurrency;
    const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
    try {
      const first = await restTrigger(pool, w, 202)("hot-record");
      if (!first.ok) throw new Error(`first trigger of the hot record answered ${first.status}`);
      await raw.runs.insertOne(runDocLike(w, "hot-record", STEPS));
      const post409 = restTrigger(pool, w, 409);
      const rest = await closedLoop({ concurrency: c, durationMs: opts.durationMs, warmupPerWorker: 1, fn: () => post409("hot-record") });
      ctx.log(`  409   c=${c}: ${rest.okPerSec}/s p50 ${rest.p50Ms} p99 ${rest.p99Ms} ms ${fmtOther(rest)}`);
      const rawC = await closedLoop({ concurrency: c, durationMs: opts.durationMs, warmupPerWorker: 1, fn: rawConflict(raw, w, "hot-record") });
      ctx.log(`  raw dup+find c=${c}: ${rawC.okPerSec}/s p50 ${rawC.p50Ms} p99 ${rawC.p99Ms} ms`);
      conflict = { concurrency: c, rest, raw: rawC, restVsRaw: ratio(rest.okPerSec, rawC.okPerSec) };
    } finally {
      await pool.close();
    }
  } finally {
    client.close();
    endMb = rssMb(server.pid);
    peakMb = sampler.stop();
    await server.stop();
  }
  let breakdown: WebhookResult["breakdown"];
  try {
    breakdown = await acceptBreakdown(db, w, opts.breakdownIterations);
    ctx.log(`  accept path, stage by stage (raw driver, c=1, ${breakdown.rateLimitSlotsInWindow} rate-limit slots in the current window, ${breakdown.rateLimitDocs} in the collection):`);
    for (const st of breakdown.stages) ctx.log(`    ${st.stage}: p50 ${st.p50Ms} ms, p99 ${st.p99Ms} ms`);
  } catch (err) {
    breakdown = { error: String(err) };
  }
  return { levels, conflict, rss: { idleMb, endMb, peakMb }, grpcError, breakdown };
}

export function fmtOther(s: LoadStats): string {
  const e = Object.entries(s.other);
  return e.length ? `(other: ${e.map(([k, v]) => `${k}×${v}`).join(", ")})` : "";
}
