// `npm run bench -- --grow`: the same calls on the file-backed embedded database (as `npm start`
// runs) while it grows. At each size — empty, then with stored finished runs and activity
// entries added (as a month of traffic would leave them: spread over three tenants, most of it
// another tenant's, and the measured environment's own stream) — it measures webhook accepts
// at 16 and 64 callers, the pick-up delay of runs triggered one at a time, how long a burst of
// 500 runs takes to finish, log pages of the published list (oldest first, newest first, by
// action, record, user, a time range, the admin log), the NDJSON export's rate, GET run and WatchRun's first message, and run search
// pages (ListRuns over REST: unfiltered, by workflow, record, state, user, the failed runs of
// the last hour, a second page). At the largest
// size, also a retention sweep of 100,000 expired runs under concurrent writes (the longest a
// write waited), the file's size, the database's restart time and the Java process's RSS.
import { randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Pool } from "undici";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { startEmbeddedServer } from "../../src/embedded/index.js";
import { finishedActiveKey, storeFixtures, sweepExpired, type Store, type StoreFixtures } from "../../src/store/index.js";
import { activityStream, streamKey } from "../../src/store/logs.js";
import type { ActivityLogDoc, RunDoc } from "../../src/store/types.js";
import { benchWorld, openStore, spawnFor, uriFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { httpLimitMet } from "../lib/limits.js";
import { benchJavaOptions } from "../lib/database.js";
import { closedLoop, percentile, ratio, round, sleep, summarize } from "../lib/load.js";
import { probeWriter } from "../lib/probe-writer.js";
import { cpuMeter, rssMb, type Proc } from "../lib/procs.js";
import { worldRun } from "../../fixtures/world.js";
import { restTrigger } from "./webhook.js";

export interface SizeFigures {
  /** Finished runs and activity entries stored besides the measured calls' own (each). */
  stored: number;
  fillSeconds: number | null;
  /** How long the embedded server's space reuse took to catch up with the bulk load, before the measurements (null: no fill, or no such server). */
  settleSeconds: number | null;
  /** The chunks' live share (%) when the measurements began (the embedded file backend only). */
  liveChunkPercent: number | null;
  /** The median trial of ACCEPT_TRIALS (by rate), and every trial's rate. */
  accept16: AcceptFigures;
  accept64: AcceptFigures;
  pickup: { n: number; p50Ms: number | null; p99Ms: number | null };
  /** A burst of 500 runs on distinct records: from the first call until the last run finished. */
  drainMs: number | null;
  /** p50 of each page (limit 100), over 40 rounds of every page in turn. */
  logPagesP50Ms: Record<string, number | null>;
  exportPerSec: number | null;
  getRunP50Ms: number | null;
  /** p50 and p99 of each run search page (limit 100). */
  runPagesMs: Record<string, { p50Ms: number | null; p99Ms: number | null }>;
  watchFirstP50Ms: number | null;
  javaRssMb: number | null;
  /** The database file's size after the measurements at this size. */
  fileMb: number | null;
}

export interface AcceptFigures {
  perSec: number;
  p50Ms: number | null;
  p99Ms: number | null;
  trialsPerSec: number[];
  /** Cores each process used during the trial, its warm-up included: the database, runhook, the load generator (this process). */
  cores: Record<string, number | null>;
  /** The database's work per accepted call during the trial (the executors' included), where the server reports it. */
  perCall: DbWorkPerCall | null;
}

/** What the embedded server's group commit and file did per accepted call (runhookCommitStats). */
export interface DbWorkPerCall {
  /** The store's commits (with a journal: its checkpoints), and the journal's appends of a group of writes. */
  commits: number;
  journals: number;
  lockWaitMs: number;
  commitMs: number;
  syncMs: number;
  /** The journal's appends and syncs. */
  journalMs: number;
  journalKb: number;
  /** The space reuse's slices on the committing thread (the writes' commits wait for them), and what they moved. */
  sliceMs: number;
  movedKb: number;
  fileReads: number;
  readKb: number;
  writtenKb: number;
  /** H2's page-cache hit ratio since the database opened (the fills included), not the trial's own. */
  cacheHitPercent: number;
}

export interface GrowthResult {
  sizes: SizeFigures[];
  sweep: {
    expired: number;
    removed: number;
    seconds: number;
    writesDuring: number;
    /** Single writes (an insert of a small document) during the sweep, and the longest in the 3 s before it. */
    maxStallMs: number | null;
    /** When the longest single write ended (to find it in the server's logs). */
    maxStallAt: string | null;
    p99Ms: number | null;
    beforeMaxMs: number | null;
    /** Webhook calls (several reads and writes each) during the sweep, and the longest before it. */
    callsDuring: number;
    callMaxMs: number | null;
    callP99Ms: number | null;
    callBeforeMaxMs: number | null;
    /** The bench's own event loop's longest pause during the sweep (the webhook calls' latencies include it; the single writes' do not). */
    benchLoopMaxMs: number;
    /** The embedded server's group commit during the sweep: each step's count, total, longest and when (runhookCommitStats). */
    commitSteps: Record<string, CommitStep> | null;
  } | null;
  fileMb: number | null;
  restartSeconds: number | null;
  javaRssMbAtEnd: number | null;
  /** The figures at the largest size; the last two named for 1,000,000 when that is the largest (…AtEnd otherwise). */
  ratios: {
    growthAcceptRatio: number | null;
    growthLogPageRatio: number | null;
    growthPickupP99Ms: number | null;
    growthDrainRatio: number | null;
    sweepMaxStallMs: number | null;
    restartSecondsAt1M?: number | null;
    javaRssMbAt1M?: number | null;
    restartSecondsAtEnd?: number | null;
    javaRssMbAtEnd?: number | null;
  };
}

export const STEPS = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }] as const;
export const BURST = 500;
const FILL_BATCH = 1000;
const ACTIONS = ["workflow.run.triggered", "workflow.run.succeeded", "record.updated", "note.created"];
const DAY = 86_400_000;

/** A finished run of `w` (not on its burst records). */
function filledRun(w: BenchWorld, i: number, createdAt: Date): RunDoc {
  const run = worldRun(w, `old-${i}`, [...STEPS], { tokenId: "filled", createdAt });
  const finishedAt = new Date(createdAt.getTime() + 50);
  return {
    ...run,
    state: "SUCCEEDED",
    activeKey: finishedActiveKey(run._id, finishedAt),
    stepIndex: STEPS.length,
    startedAt: createdAt,
    finishedAt,
    updatedAt: finishedAt,
  };
}

function filledEntry(w: BenchWorld, stream: string, seq: number, timestamp: Date, recordId: string): ActivityLogDoc {
  return {
    _id: streamKey(stream, seq),
    seq,
    timestamp,
    projectId: w.projectId,
    environmentId: w.environmentId,
    environment: w.environmentName,
    rendering: null,
    user: { id: seq % 10 === 0 ? w.admin._id : w.user._id, email: seq % 10 === 0 ? w.admin.email : w.user.email },
    action: ACTIONS[seq % ACTIONS.length]!,
    via: "workflow",
    collection: w.collection,
    recordId,
    runId: null,
    details: {},
  };
}

/** Entries the measured environment holds before the first measurement: each filtered page is full at every size. */
const SEED_ENTRIES = 2000;

/**
 * The measured environment's first SEED_ENTRIES entries (about two hours old, records r0…r9, every
 * tenth the admin's): so that every log page measured on the "empty" database is a full page of
 * 100, as it is later, and the comparison is of the same work.
 */
export async function seed(store: Store, w: BenchWorld): Promise<void> {
  const fx = storeFixtures(store);
  const stream = activityStream(w.environmentId);
  const start = Date.now() - 2 * 3_600_000;
  const entries = Array.from({ length: SEED_ENTRIES }, (_, i) => filledEntry(w, stream, i + 1, new Date(start + i * 1000), `r${i % 10}`));
  for (let i = 0; i < entries.length; i += FILL_BATCH) await fx.insertActivityEntries(entries.slice(i, i + FILL_BATCH));
  await fx.setCounter(stream, SEED_ENTRIES);
  await store.logs.raiseWatermark(stream, SEED_ENTRIES);
}

/**
 * Adds `count` finished runs and `count` activity entries: a tenth to the measured world `w`
 * (its stream continued past its counter, its watermark raised, as readers would have left it),
 * the rest to the other tenants. The runs are older than anything measured, younger than the
 * retention, created in time order over 20 days as traffic leaves them (a second fill
 * interleaves with the first in time, in order too). The entries continue each stream in time as in numbers (a stream's times rise with
 * its numbers): spread from the stream's last entry (or 20 days ago) up to now.
 */
export async function fill(store: Store, worlds: BenchWorld[], count: number, log: (m: string) => void): Promise<void> {
  const fx = storeFixtures(store);
  const fillStart = Date.now();
  const now = fillStart - 3_600_000;
  const span = 20 * DAY;
  const since = new Map<BenchWorld, number>();
  for (const w of worlds) {
    const stream = activityStream(w.environmentId);
    const last = (await store.logs.at("activity", stream, await store.logs.counter(stream))) as { timestamp?: Date } | null;
    since.set(w, last?.timestamp?.getTime() ?? fillStart - span);
  }
  const t0 = performance.now();
  for (let done = 0; done < count; ) {
    const n = Math.min(FILL_BATCH, count - done);
    const runs: RunDoc[] = [];
    const byWorld = new Map<BenchWorld, number>();
    for (let i = 0; i < n; i++) {
      const w = (done + i) % 10 === 0 ? worlds[0]! : worlds[1 + ((done + i) % (worlds.length - 1))]!;
      runs.push(filledRun(w, done + i, new Date(now - span + ((done + i) / count) * span)));
      byWorld.set(w, (byWorld.get(w) ?? 0) + 1);
    }
    await fx.insertRuns(runs);
    for (const [w, k] of byWorld) {
      const stream = activityStream(w.environmentId);
      const from = await store.logs.counter(stream);
      const start = since.get(w)!;
      const entries = Array.from({ length: k }, (_, j) =>
        filledEntry(w, stream, from + j + 1, new Date(start + ((done + j) / count) * (fillStart - start)), `r${(from + j) % 400}`),
      );
      await fx.insertActivityEntries(entries);
      await fx.setCounter(stream, from + k);
      await store.logs.raiseWatermark(stream, from + k);
    }
    done += n;
    if (done % 100_000 === 0 || done === count) log(`  filled ${done} runs + ${done} activity entries (${Math.round((performance.now() - t0) / 1000)} s)`);
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/**
 * The p50 of each call over `n` rounds that make every call once, in turn: whatever else the
 * database does meanwhile (the burst's last checkpoint, a collection) falls on all of them alike
 * rather than on the one measured then. With 25 calls of each page in a row, a page of a few ms
 * moved by a third from size to size for no reason of its own (the unfiltered page 6.5, 8.43 and
 * 5.26 ms empty, at 100,000 and at a million in one run).
 */
async function p50sInTurn(n: number, calls: Record<string, () => Promise<void>>): Promise<Record<string, number | null>> {
  const times = new Map(Object.keys(calls).map((k) => [k, [] as number[]]));
  for (let i = 0; i < n; i++) for (const [k, fn] of Object.entries(calls)) times.get(k)!.push(await timed(fn));
  return Object.fromEntries([...times].map(([k, t]) => [k, summarize(t).p50Ms]));
}

/** The p50 of `n` sequential calls. */
async function p50Of(n: number, fn: () => Promise<void>): Promise<number | null> {
  return (await p50sInTurn(n, { call: fn })).call ?? null;
}

/** p50 and p99 of `n` sequential calls. */
async function percentilesOf(n: number, fn: () => Promise<void>): Promise<{ p50Ms: number | null; p99Ms: number | null }> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) times.push(await timed(fn));
  const s = summarize(times);
  return { p50Ms: s.p50Ms, p99Ms: s.p99Ms };
}

/** Run search pages of the measured environment (most of its stored runs SUCCEEDED, the accepted ones FAILED). */
async function runPages(api: (path: string) => Promise<string>, w: BenchWorld, n: number) {
  const path = `/v1/project/${encodeURIComponent(w.projectName)}/environment/${encodeURIComponent(w.environmentName)}/runs`;
  const q = (p: Record<string, string>) => `${path}?${new URLSearchParams({ limit: "100", ...p })}`;
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  const first = JSON.parse(await api(q({}))) as { nextCursor?: string };
  const queries: Record<string, string> = {
    newestFirst: q({}),
    secondPage: q({ cursor: first.nextCursor ?? "" }),
    oldestFirst: q({ order: "asc" }),
    byWorkflow: q({ workflowId: w.workflowId }),
    byRecord: q({ collection: w.collection, recordId: "r7" }),
    failedLastHour: q({ state: "FAILED", finishedFrom: hourAgo }),
    failedOrCancelled: q({ state: "FAILED,CANCELLED" }),
    byUser: q({ userId: w.user._id }),
  };
  const out: SizeFigures["runPagesMs"] = {};
  for (const [name, query] of Object.entries(queries)) out[name] = await percentilesOf(n, async () => void (await api(query)));
  return out;
}

/** Waits until every run of `ids` finished; the time the last one finished. */
async function lastFinish(store: Store, ids: string[], timeoutMs: number): Promise<number | null> {
  const end = Date.now() + timeoutMs;
  let pending = ids;
  let last = 0;
  while (pending.length && Date.now() < end) {
    const runs = await store.runs.getMany(pending);
    for (const r of runs) if (r.finishedAt) last = Math.max(last, r.finishedAt.getTime());
    pending = runs.filter((r) => !r.finishedAt).map((r) => r._id);
    if (pending.length) await sleep(100);
  }
  return pending.length ? null : last;
}

/**
 * Accept trials at each concurrency, alternating. On this machine one 10 s trial of the same
 * code moves by ±15 % from run to run (empty database: 251-478/s at c=64 within an hour), so
 * each size reports its median trial, measured the same way at every size.
 */
const ACCEPT_TRIALS = 3;

/** How much each measurement does: a full run, --quick, or --smoke (a few calls of each, to see that every step runs). */
export interface GrowthEffort {
  /** Each accept trial's length and its warm-up calls per caller, and the trials at each concurrency (after one not counted, when warmupTrial). */
  acceptMs: number;
  acceptWarmup: number;
  trials: number;
  warmupTrial: boolean;
  /** Runs of the pick-up, of the burst (at most BURST: the measured tenant's records), rounds of the log pages and of the other reads. */
  pickups: number;
  burst: number;
  pageRounds: number;
  readRounds: number;
  /** How long the NDJSON export is read (at most). */
  exportMs: number;
  /** The space reuse has caught up when nothing moved between two looks this far apart. */
  quietMs: number;
  /** How long the writes are measured before the sweep. */
  sweepBeforeMs: number;
}

export const GROWTH_EFFORT: Record<"full" | "quick" | "smoke", GrowthEffort> = {
  full: {
    acceptMs: 10_000,
    acceptWarmup: 5,
    trials: ACCEPT_TRIALS,
    warmupTrial: true,
    pickups: 100,
    burst: BURST,
    pageRounds: 40,
    readRounds: 25,
    exportMs: 3000,
    quietMs: 5000,
    sweepBeforeMs: 3000,
  },
  quick: {
    acceptMs: 4000,
    acceptWarmup: 5,
    trials: 1,
    warmupTrial: true,
    pickups: 50,
    burst: BURST,
    pageRounds: 10,
    readRounds: 10,
    exportMs: 3000,
    quietMs: 5000,
    sweepBeforeMs: 3000,
  },
  smoke: {
    acceptMs: 300,
    acceptWarmup: 1,
    trials: 1,
    warmupTrial: false,
    pickups: 3,
    burst: 20,
    pageRounds: 1,
    readRounds: 1,
    exportMs: 300,
    quietMs: 1000,
    sweepBeforeMs: 500,
  },
};

/** Waits until the executors worked off the queued runs (accepted runs fail at their first step). */
export async function queueDrained(store: Store): Promise<void> {
  for (const until = Date.now() + 600_000; (await store.runs.queueStats()).depth > 0 && Date.now() < until; ) await sleep(500);
}

/** The trial with the median rate, and every trial's rate. */
export function medianTrial(trials: Omit<AcceptFigures, "trialsPerSec">[]): AcceptFigures {
  const sorted = [...trials].sort((a, b) => a.perSec - b.perSec);
  return { ...sorted[Math.floor((sorted.length - 1) / 2)]!, trialsPerSec: trials.map((t) => t.perSec) };
}

/**
 * A bulk load writes in ten minutes what a month of traffic writes over a month, and leaves
 * the file's chunks mostly dead (29 % live after a million runs): the embedded server's space
 * reuse moves their live pages while it is idle, as a month's quiet hours would. Waits until it
 * has caught up (nothing moved between two looks `quietMs` apart), at most 15 minutes, so that the
 * accepts measured at every size are the writes' cost, not that of the load's leftovers; the
 * seconds it took (null where the server reports no space reuse).
 */
export async function spaceReuseCaughtUp(fx: StoreFixtures, log: (m: string) => void, quietMs = 5000): Promise<number | null> {
  const t0 = performance.now();
  let moved: number | null = null;
  for (let look = 0; performance.now() - t0 < 15 * 60_000; look++) {
    const file = (await commitStats(fx, false))?.file;
    if (file?.movedBytes === undefined) return null;
    if (file.movedBytes === moved) break;
    if (look % Math.ceil(30_000 / quietMs) === 0)
      log(`  space reuse: ${Math.round(file.movedBytes / 2 ** 20)} MB of live pages moved, the chunks ${file.liveChunkPercent} % live`);
    moved = file.movedBytes;
    await sleep(quietMs);
  }
  return round((performance.now() - t0) / 1000, 0);
}

/**
 * One accept trial: `c` callers triggering runs on new records for `durationMs`, from an empty
 * queue; with what the database did per accepted call and the cores each process used.
 */
export async function acceptTrial(
  ctx: BenchContext,
  store: Store,
  server: Proc,
  w: BenchWorld,
  c: number,
  durationMs: number,
  warmupPerWorker = 5,
): Promise<Omit<AcceptFigures, "trialsPerSec">> {
  const fx = storeFixtures(store);
  await queueDrained(store); // each trial starts from an empty queue, as the first did
  const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
  const trigger = restTrigger(pool, w, 202);
  const before = await commitStats(fx, true);
  const t0 = performance.now();
  const cpu = cpuMeter({ database: ctx.javaPid, runhook: server.pid });
  const s = await closedLoop({ concurrency: c, durationMs, warmupPerWorker, fn: () => trigger(`new-${randomUUID()}`) });
  const used = cpu.stop();
  const wallMs = performance.now() - t0;
  const after = await commitStats(fx, false);
  await pool.close();
  const cores = Object.fromEntries(Object.entries(used).map(([k, ms]) => [k, ms === null ? null : round(ms / wallMs, 2)]));
  return { perSec: s.okPerSec, p50Ms: s.p50Ms, p99Ms: s.p99Ms, cores, perCall: before && after ? workPerCall(before, after, s.ok) : null };
}

async function measure(ctx: BenchContext, store: Store, server: Proc, w: BenchWorld, stored: number, effort: GrowthEffort): Promise<SizeFigures> {
  const fx = storeFixtures(store);
  // Each trial printed as it ends: the median alone hides a trend across the trials.
  const accept = async (c: number) => {
    const t = await acceptTrial(ctx, store, server, w, c, effort.acceptMs, effort.acceptWarmup);
    ctx.log(`  c=${c}: ${JSON.stringify(t)}`);
    return t;
  };
  const liveChunkPercent = (await commitStats(fx, false))?.file.liveChunkPercent ?? null;
  // A trial not counted first: on a fresh server the first was always low (144-162/s at c=16
  // against 241-251/s for the next two), the JIT still compiling the accept path.
  if (effort.warmupTrial) await accept(16);
  const trials16: Omit<AcceptFigures, "trialsPerSec">[] = [];
  const trials64: Omit<AcceptFigures, "trialsPerSec">[] = [];
  for (let i = 0; i < effort.trials; i++) {
    trials16.push(await accept(16));
    trials64.push(await accept(64));
  }
  return {
    stored,
    fillSeconds: null,
    settleSeconds: null,
    liveChunkPercent,
    accept16: medianTrial(trials16),
    accept64: medianTrial(trials64),
    ...(await afterAccepts(store, server, w, effort)),
    javaRssMb: ctx.javaPid ? rssMb(ctx.javaPid) : null,
    fileMb: null,
  };
}

const activityLogsPath = (w: BenchWorld) =>
  `/v1/project/${encodeURIComponent(w.projectName)}/environment/${encodeURIComponent(w.environmentName)}/activity-logs`;

/**
 * The log pages measured, each a page of 100 of the published list: oldest first (order=asc,
 * the tail's first page), newest first (the list's default), by action (`triggerWorkflow`: one
 * runhook action, a quarter of the entries), by record, by user (the admin's number: every
 * tenth entry), the last 10 minutes (oldest first, by createdAt), and the admin log.
 */
async function logPageCalls(store: Store, w: BenchWorld, api: (path: string) => Promise<string>): Promise<Record<string, () => Promise<void>>> {
  const logs = activityLogsPath(w);
  const q = (p: Record<string, string>) => `?${new URLSearchParams({ limit: "100", ...p })}`;
  const adminNumber = (await store.directory.users.get(w.admin._id))?.number;
  if (!adminNumber) throw new Error(`the bench world's admin ${w.admin._id} has no user number`);
  const pages: Record<string, string> = {
    unfiltered: q({ order: "asc" }),
    newestFirst: q({}),
    byAction: q({ action: "triggerWorkflow" }),
    byRecord: q({ collectionName: w.collection, recordId: "r7" }),
    byUser: q({ userId: String(adminNumber) }),
    timeRange: q({ "createdAt.gte": new Date(Date.now() - 10 * 60_000).toISOString(), "createdAt.lt": new Date().toISOString(), order: "asc" }),
  };
  const calls: Record<string, () => Promise<void>> = {};
  for (const [name, query] of Object.entries(pages)) calls[name] = async () => void (await api(logs + query));
  calls.adminLog = async () => void (await api(`/v1/project/${encodeURIComponent(w.projectName)}/admin-logs?limit=100`));
  return calls;
}

/** The figures measured after the accept trials: pick-up, a burst's drain, and the reads. */
export async function afterAccepts(
  store: Store,
  server: Proc,
  w: BenchWorld,
  effort: GrowthEffort,
): Promise<Pick<SizeFigures, "pickup" | "drainMs" | "logPagesP50Ms" | "exportPerSec" | "getRunP50Ms" | "runPagesMs" | "watchFirstP50Ms">> {
  await queueDrained(store); // before the pick-up is measured

  const pool = new Pool(server.baseUrl!, { connections: 64, pipelining: 1 });
  const trigger = async (recordId: string) => {
    const res = await pool.request({
      path: w.hookPath,
      method: "POST",
      headers: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
      body: JSON.stringify({ record_id: recordId }),
    });
    const text = await res.body.text();
    const met = httpLimitMet(res.statusCode, text);
    if (met) throw met;
    const runId = res.statusCode === 202 ? (JSON.parse(text) as { runId?: string }).runId : undefined;
    if (!runId) throw new Error(`webhook answered ${res.statusCode} ${text.slice(0, 200)}`);
    return runId;
  };

  // Pick-up: runs triggered one at a time, 20 ms apart, on existing records.
  const single: string[] = [];
  for (let i = 0; i < effort.pickups; i++) {
    single.push(await trigger(`r${i}`));
    await sleep(20);
  }
  await lastFinish(store, single, 60_000);
  const picked = (await store.runs.getMany(single)).filter((r) => r.startedAt).map((r) => r.startedAt!.getTime() - r.createdAt.getTime());
  const pickup = summarize(picked);

  // Drain: a burst of runs (BURST in a measured run) on distinct existing records, 64 at a time.
  const t0 = Date.now();
  const burst: string[] = [];
  await Promise.all(
    Array.from({ length: 64 }, async (_, k) => {
      for (let i = k; i < effort.burst; i += 64) burst.push(await trigger(`r${i}`));
    }),
  );
  const last = await lastFinish(store, burst, 300_000);
  const drainMs = last === null ? null : last - t0;

  // Reads.
  const api = (path: string, accept = "application/json") =>
    pool.request({ path, method: "GET", headers: { authorization: `Bearer ${w.apiToken}`, accept } }).then(async (r) => {
      const text = await r.body.text();
      const met = httpLimitMet(r.statusCode, text);
      if (met) throw met;
      if (r.statusCode !== 200) throw new Error(`GET ${path} answered ${r.statusCode}: ${text.slice(0, 200)}`);
      return text;
    });
  const logs = activityLogsPath(w);
  const n = effort.readRounds;
  const logPagesP50Ms = await p50sInTurn(effort.pageRounds, await logPageCalls(store, w, api));

  // The export, oldest first: as many entries as arrive in 3 s (or all of them; less in a smoke run).
  let exported = 0;
  const te = performance.now();
  const res = await pool.request({
    path: `${logs}?order=asc`,
    method: "GET",
    headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
  });
  for await (const chunk of res.body) {
    for (const b of chunk as Buffer) if (b === 10) exported++;
    if (performance.now() - te > effort.exportMs) break;
  }
  res.body.destroy();
  const exportPerSec = round((exported / (performance.now() - te)) * 1000, 0);

  const getRunP50Ms = await p50Of(n, async () => void (await api(`/v1/runs/${burst[0]}`)));
  const runPagesMs = await runPages(api, w, n);
  const runs = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl!, httpVersion: "1.1" }));
  const watchFirstP50Ms = await p50Of(n, async () => {
    const stream = runs.watchRun({ runId: burst[1]! }, { headers: { authorization: `Bearer ${w.apiToken}` } });
    for await (const _ of stream) break;
  });
  await pool.close();
  return {
    pickup: { n: pickup.n, p50Ms: pickup.p50Ms, p99Ms: pickup.p99Ms },
    drainMs,
    logPagesP50Ms,
    exportPerSec,
    getRunP50Ms,
    runPagesMs,
    watchFirstP50Ms,
  };
}

/** The longest, the p99 and the count of some latencies (ms). */
function latencies(lat: number[]): { n: number; maxMs: number | null; p99Ms: number | null } {
  const sorted = Float64Array.from(lat).sort();
  return { n: lat.length, maxMs: sorted.length ? round(sorted[sorted.length - 1]!) : null, p99Ms: percentile(sorted, 99) };
}

type CommitStep = { count: number; totalMs: number; maxMs: number; maxAt: string | null };
interface CommitStats {
  steps: Record<string, CommitStep>;
  /** The file's counters since it was opened. */
  file: {
    reads: number;
    readBytes: number;
    writes: number;
    writeBytes: number;
    cacheHitPercent: number;
    movedBytes?: number;
    liveChunkPercent?: number;
    journalBytes?: number;
  };
}

/** The embedded server's commit steps since the last reset and its file's counters (null where the server has none). */
export async function commitStats(fx: StoreFixtures, reset: boolean): Promise<CommitStats | null> {
  try {
    const { ok: _, file, ...steps } = await fx.serverCommand({ runhookCommitStats: 1, reset });
    return { steps: steps as Record<string, CommitStep>, file: file as CommitStats["file"] };
  } catch {
    return null;
  }
}

/** The steps counted in `after` (reset at `before`) and the file's counters between the two, per call of `calls`. */
function workPerCall(before: CommitStats, after: CommitStats, calls: number): DbWorkPerCall {
  const per = (n: number, digits = 2) => round(n / Math.max(1, calls), digits);
  return {
    commits: per(after.steps.commit?.count ?? 0),
    journals: per(after.steps.journal?.count ?? 0),
    lockWaitMs: per(after.steps.lockWait?.totalMs ?? 0),
    commitMs: per(after.steps.commit?.totalMs ?? 0),
    syncMs: per(after.steps.sync?.totalMs ?? 0),
    journalMs: per(after.steps.journal?.totalMs ?? 0),
    journalKb: per(((after.file.journalBytes ?? 0) - (before.file.journalBytes ?? 0)) / 1024, 1),
    sliceMs: per(after.steps.slice?.totalMs ?? 0),
    movedKb: per(((after.file.movedBytes ?? 0) - (before.file.movedBytes ?? 0)) / 1024, 1),
    fileReads: per(after.file.reads - before.file.reads),
    readKb: per((after.file.readBytes - before.file.readBytes) / 1024, 1),
    writtenKb: per((after.file.writeBytes - before.file.writeBytes) / 1024, 1),
    cacheHitPercent: after.file.cacheHitPercent,
  };
}

/**
 * A retention sweep of `expired` runs (another tenant's, finished long ago) while 4 callers
 * trigger runs and one writer inserts a small document at a time: how long a write waited (the
 * single writes: each waits for the commit that holds it; the webhook calls: several writes and
 * reads each), during the sweep and for `beforeMs` before it.
 */
async function sweepUnderWrites(
  ctx: BenchContext,
  store: Store,
  server: Proc,
  w: BenchWorld,
  other: BenchWorld,
  expired: number,
  dbName: string,
  beforeMs: number,
): Promise<GrowthResult["sweep"]> {
  const fx = storeFixtures(store);
  const old = Date.now() - 65 * DAY;
  for (let i = 0; i < expired; i += FILL_BATCH) {
    await fx.insertRuns(
      Array.from({ length: Math.min(FILL_BATCH, expired - i) }, (_, j) => filledRun(other, 10_000_000 + i + j, new Date(old + ((i + j) / expired) * 5 * DAY))),
    );
  }
  // The single writes come from a thread of their own (the sweep and the webhook callers run on this one).
  const probe = probeWriter({ uri: uriFor(ctx.uri, dbName), dbName, collection: "bench_probe" });
  const pool = new Pool(server.baseUrl!, { connections: 4, pipelining: 1 });
  const trigger = restTrigger(pool, w, 202);
  /** Single writes and webhook calls until `until` resolves; and this thread's longest pause meanwhile. */
  const load = async (until: Promise<unknown>) => {
    let going = true;
    void until.finally(() => (going = false));
    const calls: number[] = [];
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    probe.start();
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (going) {
          const t = performance.now();
          await trigger(`sweep-${randomUUID()}`);
          calls.push(performance.now() - t);
        }
      }),
    );
    const writes = await probe.stop();
    loopDelay.disable();
    return { writes: latencies(writes.latencies), longestWriteAt: writes.longestAt, calls: latencies(calls), benchLoopMaxMs: round(loopDelay.max / 1e6) };
  };
  const before = await load(sleep(beforeMs));
  await commitStats(fx, true);
  const t0 = performance.now();
  const sweep = sweepExpired(store, undefined, new Date(), (t) => t.collection === "runs");
  const during = await load(sweep);
  const removed = (await sweep).runs ?? 0;
  const seconds = round((performance.now() - t0) / 1000, 1);
  const steps = (await commitStats(fx, false))?.steps ?? null;
  await pool.close();
  await probe.close();
  ctx.log(
    `  sweep: ${removed} runs removed in ${seconds} s; meanwhile ${during.writes.n} single writes (longest ${during.writes.maxMs} ms, ending at ${during.longestWriteAt}) and ${during.calls.n} webhook calls (longest ${during.calls.maxMs} ms); the bench's own event loop paused up to ${during.benchLoopMaxMs} ms`,
  );
  return {
    expired,
    removed,
    seconds,
    writesDuring: during.writes.n,
    maxStallMs: during.writes.maxMs,
    maxStallAt: during.longestWriteAt,
    p99Ms: during.writes.p99Ms,
    beforeMaxMs: before.writes.maxMs,
    callsDuring: during.calls.n,
    callMaxMs: during.calls.maxMs,
    callP99Ms: during.calls.p99Ms,
    callBeforeMaxMs: before.calls.maxMs,
    benchLoopMaxMs: during.benchLoopMaxMs,
    commitSteps: steps,
  };
}

export async function growthScenario(
  ctx: BenchContext,
  o: { dataDir: string; cacheDir: string; sizes: number[]; sweepRuns: number; effort: GrowthEffort },
  stopDatabase: () => Promise<void>,
): Promise<GrowthResult> {
  const dbName = `${ctx.runTag}_grow`;
  const store = await openStore(ctx, dbName);
  const records = Array.from({ length: BURST }, (_, i) => ({ id: `r${i}`, status: "new" }));
  const w = await benchWorld(ctx, store, { steps: [...STEPS], records });
  const others = [await benchWorld(ctx, store, { steps: [...STEPS] }), await benchWorld(ctx, store, { steps: [...STEPS] })];
  await seed(store, w);
  const server = await spawnFor(ctx, "grow", "start", dbName);
  const sizes: SizeFigures[] = [];
  const file = join(o.dataDir, "mongo", "runhook.mv");
  let stored = 0;
  try {
    for (const size of o.sizes) {
      let fillSeconds: number | null = null;
      let settleSeconds: number | null = null;
      if (size > stored) {
        ctx.log(`- adding ${size - stored} finished runs and ${size - stored} activity entries…`);
        const t = performance.now();
        await fill(store, [w, ...others], size - stored, ctx.log);
        fillSeconds = round((performance.now() - t) / 1000, 0);
        stored = size;
        settleSeconds = await spaceReuseCaughtUp(storeFixtures(store), ctx.log, o.effort.quietMs);
      }
      ctx.log(`- measuring at ${stored} stored…`);
      const measured = await measure(ctx, store, server, w, stored, o.effort);
      const figures = { ...measured, fillSeconds, settleSeconds, fileMb: round(statSync(file).size / 2 ** 20, 0) };
      ctx.log(`  ${JSON.stringify(figures)}`);
      sizes.push(figures);
    }
    const sweep = await sweepUnderWrites(ctx, store, server, w, others[0]!, o.sweepRuns, dbName, o.effort.sweepBeforeMs);
    await server.stop();
    await store.close();
    // The database's restart: stopped (its file closed), then started until it answers.
    await stopDatabase();
    const fileMb = round(statSync(file).size / 2 ** 20, 0);
    const t = performance.now();
    const again = await startEmbeddedServer({
      noTableScan: true,
      dataDir: o.dataDir,
      cacheDir: o.cacheDir,
      persistent: true,
      javaOptions: benchJavaOptions(),
      progress: ctx.log,
    });
    const restartSeconds = round((performance.now() - t) / 1000, 1);
    await again.stop();
    const empty = sizes[0]!;
    const end = sizes.at(-1)!;
    const pageRatios = Object.keys(empty.logPagesP50Ms).map((k) => ratio(end.logPagesP50Ms[k], empty.logPagesP50Ms[k]));
    const worstPage = pageRatios.reduce<number | null>((a, r) => (r !== null && (a === null || r > a) ? r : a), null);
    return {
      sizes,
      sweep,
      fileMb,
      restartSeconds,
      javaRssMbAtEnd: end.javaRssMb,
      ratios: {
        growthAcceptRatio: ratio(Math.min(end.accept16.perSec / empty.accept16.perSec, end.accept64.perSec / empty.accept64.perSec), 1),
        growthLogPageRatio: worstPage,
        growthPickupP99Ms: end.pickup.p99Ms,
        growthDrainRatio: ratio(end.drainMs, empty.drainMs),
        sweepMaxStallMs: sweep?.maxStallMs ?? null,
        ...(end.stored === 1_000_000
          ? { restartSecondsAt1M: restartSeconds, javaRssMbAt1M: end.javaRssMb }
          : { restartSecondsAtEnd: restartSeconds, javaRssMbAtEnd: end.javaRssMb }),
      },
    };
  } finally {
    if (server.alive()) await server.stop();
  }
}

/** The issue's targets for the largest size, against the empty database. */
export const GROWTH_TARGETS = {
  acceptRatioMin: 0.9,
  logPageRatioMax: 1.5,
  pickupP99MsMax: 50,
  drainRatioMax: 1.5,
  sweepStallMsMax: 100,
  restartSecondsMax: 10,
  javaRssMbMax: 300,
};

export function renderGrowthMarkdown(r: GrowthResult, meta: { date: string; commit: string; dirty: boolean; quick: boolean }): string {
  const t = GROWTH_TARGETS;
  const v = (x: number | null | undefined, unit = "") => (x == null ? "–" : `${x}${unit}`);
  const sizes = r.sizes;
  const row = (name: string, f: (s: SizeFigures) => string) => `| ${name} | ${sizes.map(f).join(" | ")} |`;
  const pageNames = Object.keys(sizes[0]?.logPagesP50Ms ?? {});
  const runPageNames = Object.keys(sizes[0]?.runPagesMs ?? {});
  const verdict = (ok: boolean | null) => (ok === null ? "–" : ok ? "met" : "missed");
  const x = r.ratios;
  return [
    `# Growth: the same calls as the database grows (${meta.date.slice(0, 10)}${meta.quick ? ", quick" : ""})`,
    "",
    `\`npm run bench -- --grow${meta.quick ? " --quick" : ""}\` on commit ${meta.commit}${meta.dirty ? " (with uncommitted changes)" : ""}. runhook (\`start\`, executors on) on the`,
    "embedded file backend, as `npm start` runs it. Stored: finished runs and activity entries (as many of each), a tenth in the",
    `measured environment, the rest in two other tenants'. Log pages have limit 100; p50 of each over 40 rounds that ask for every page in turn. The measured environment starts with ${SEED_ENTRIES.toLocaleString("en-US")}`,
    "entries (so that every page, filtered or not, is a full page at every size, the empty database included).",
    "",
    `| stored runs + entries (each) | ${sizes.map((s) => s.stored.toLocaleString("en-US")).join(" | ")} |`,
    `|---|${sizes.map(() => "---:").join("|")}|`,
    row("time to add them (s)", (s) => v(s.fillSeconds)),
    row("then space reuse caught up in (s)", (s) => v(s.settleSeconds)),
    row("chunks live when measured (%)", (s) => v(s.liveChunkPercent)),
    row("webhook 202/s at c=16, median trial (p99 ms)", (s) => `${s.accept16.perSec} (${v(s.accept16.p99Ms)})`),
    row("webhook 202/s at c=64, median trial (p99 ms)", (s) => `${s.accept64.perSec} (${v(s.accept64.p99Ms)})`),
    row("webhook 202/s trials at c=16 / c=64", (s) => `${s.accept16.trialsPerSec.join(", ")} / ${s.accept64.trialsPerSec.join(", ")}`),
    ...(
      [
        ["accept16", 16],
        ["accept64", 64],
      ] as const
    ).map(([k, c]) =>
      row(
        `per call at c=${c}: checkpoints / journal groups, checkpoint / sync / journal / space-reuse slice ms, KB moved, file reads, KB read / written / journaled, cache hits since the database opened %`,
        (s) => {
          const d = s[k].perCall;
          return d
            ? `${d.commits} / ${d.journals}, ${d.commitMs} / ${d.syncMs} / ${d.journalMs} / ${d.sliceMs}, ${d.movedKb}, ${d.fileReads}, ${d.readKb} / ${d.writtenKb} / ${d.journalKb}, ${d.cacheHitPercent}`
            : "–";
        },
      ),
    ),
    row("cores used at c=16 / c=64: database, runhook, load generator", (s) =>
      [s.accept16, s.accept64].map((a) => (a.cores ? `${v(a.cores.database)}, ${v(a.cores.runhook)}, ${v(a.cores.loadGenerator)}` : "–")).join(" / "),
    ),
    row("pick-up p50 / p99 (ms)", (s) => `${v(s.pickup.p50Ms)} / ${v(s.pickup.p99Ms)}`),
    row(`${BURST} runs to finish (ms)`, (s) => v(s.drainMs)),
    ...pageNames.map((p) => row(`log page: ${p} (ms)`, (s) => v(s.logPagesP50Ms[p]))),
    row("NDJSON export (entries/s)", (s) => v(s.exportPerSec)),
    row("GET run (ms)", (s) => v(s.getRunP50Ms)),
    ...runPageNames.map((p) => row(`run search: ${p} p50 / p99 (ms)`, (s) => `${v(s.runPagesMs[p]?.p50Ms)} / ${v(s.runPagesMs[p]?.p99Ms)}`)),
    row("WatchRun first message (ms)", (s) => v(s.watchFirstP50Ms)),
    row("Java RSS (MB)", (s) => v(s.javaRssMb)),
    row("file (MB)", (s) => v(s.fileMb)),
    "",
    r.sweep
      ? `Retention sweep: ${r.sweep.removed.toLocaleString("en-US")} of ${r.sweep.expired.toLocaleString("en-US")} expired runs removed in ${r.sweep.seconds} s while one writer inserted small documents one at a time and 4 callers triggered runs. Single writes: ${r.sweep.writesDuring}, p99 ${v(r.sweep.p99Ms, " ms")}, longest ${v(r.sweep.maxStallMs, " ms")} (longest in the 3 s before the sweep: ${v(r.sweep.beforeMaxMs, " ms")}). Webhook calls: ${r.sweep.callsDuring}, p99 ${v(r.sweep.callP99Ms, " ms")}, longest ${v(r.sweep.callMaxMs, " ms")} (before: ${v(r.sweep.callBeforeMaxMs, " ms")}). The single writes come from a thread of their own; the sweep and the webhook calls share the bench's event loop, which paused up to ${v(r.sweep.benchLoopMaxMs, " ms")} during the sweep.${
          r.sweep.commitSteps
            ? ` The group commit meanwhile (each write waits for one of each step; longest, when it ended): ${Object.entries(r.sweep.commitSteps)
                .map(
                  ([name, x]) => `${name} ${round(x.maxMs)} ms at ${x.maxAt?.slice(11, 23) ?? "–"} (${x.count} times, ${round(x.totalMs / 1000, 1)} s in all)`,
                )
                .join("; ")}; the longest single write ended at ${r.sweep.maxStallAt?.slice(11, 23) ?? "–"}.`
            : ""
        }`
      : "Retention sweep: not measured.",
    `File: ${v(r.fileMb, " MB")}; the database's restart (stopped, started until it answers): ${v(r.restartSeconds, " s")}.`,
    "",
    "| at the largest size | measured | target | |",
    "|---|---:|---:|---|",
    `| accepts vs empty (worse of c=16, c=64) | ${v(x.growthAcceptRatio)} | ≥ ${t.acceptRatioMin} | ${verdict(x.growthAcceptRatio === null ? null : x.growthAcceptRatio >= t.acceptRatioMin)} |`,
    `| log pages vs empty (worst) | ${v(x.growthLogPageRatio)} | ≤ ${t.logPageRatioMax} | ${verdict(x.growthLogPageRatio === null ? null : x.growthLogPageRatio <= t.logPageRatioMax)} |`,
    `| pick-up p99 | ${v(x.growthPickupP99Ms, " ms")} | ≤ ${t.pickupP99MsMax} ms | ${verdict(x.growthPickupP99Ms === null ? null : x.growthPickupP99Ms <= t.pickupP99MsMax)} |`,
    `| ${BURST} runs to finish vs empty | ${v(x.growthDrainRatio)} | ≤ ${t.drainRatioMax} | ${verdict(x.growthDrainRatio === null ? null : x.growthDrainRatio <= t.drainRatioMax)} |`,
    `| longest single write during a sweep | ${v(x.sweepMaxStallMs, " ms")} | ≤ ${t.sweepStallMsMax} ms | ${verdict(x.sweepMaxStallMs === null ? null : x.sweepMaxStallMs <= t.sweepStallMsMax)} |`,
    `| restart | ${v(r.restartSeconds, " s")} | ≤ ${t.restartSecondsMax} s | ${verdict(r.restartSeconds === null ? null : r.restartSeconds <= t.restartSecondsMax)} |`,
    `| Java RSS | ${v(r.javaRssMbAtEnd, " MB")} | ≤ ${t.javaRssMbMax} MB | ${verdict(r.javaRssMbAtEnd === null ? null : r.javaRssMbAtEnd <= t.javaRssMbMax)} |`,
    "",
  ].join("\n");
}
