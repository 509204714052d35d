// Soak mode (`npm run bench -- --soak 10m`): a mixed load at about half of the measured
// capacity for a long time, on one server (executors off) and worker processes, with per-minute
// figures: RSS of every runhook process and of the Java database, p50/p99 latency of each
// request kind, accepted/s, the run backlog. At the end a verdict: is RSS flat (slope after
// the first minute) and p99 stable (max/min of the per-minute p99 after the first minute)?
//
// The mix (per 100 arrivals): webhook triggers over REST on many records (50), native gRPC
// TriggerRun (3), GET /v1/runs/{id} of a run accepted about a second earlier (20), the next
// activity-log page after the tail's nextCursor (10), note create (7) and list (10). Two
// tenants (organizations with one workflow each), their records taken in rotation, so that a
// (workflow, record) pair comes back only long after its run finished; every 50th REST trigger of a
// tenant is sent twice at once (the arrival's request and a duplicate on the same record): one
// of the two is accepted, the other answered 409 — a 409 for every 50 triggers, by construction.
//
// Capacity: a closed loop of the same mix at concurrency 16 (executors running), then the
// backlog it left is drained with the load off. See `capacity` below for how the two combine.
// The soak itself is an open loop (fixed arrival rate, lib/open-loop.ts) at `share` (50%) of
// it, so that a slower server shows as latency, not as a lower rate.
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Pool } from "undici";
import { TriggerRunRequestSchema, TriggerRunResponseSchema } from "../../gen/runhook/v1/trigger_pb.js";
import { FINISHED_STATES } from "../../src/domain/runs/model.js";
import { runStateMachine } from "../../src/domain/runs/state.js";
import type { Store } from "../../src/store/index.js";
import type { RunState } from "../../src/store/types.js";
import { benchWorld, openStore, spawnFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { closedLoop, percentile, round, sleep } from "../lib/load.js";
import { openLoop } from "../lib/open-loop.js";
import { rssMb, type Proc } from "../lib/procs.js";

export type Kind = "webhook" | "grpc" | "runGet" | "logsPage" | "noteCreate" | "noteList";
export const KINDS: Kind[] = ["webhook", "grpc", "runGet", "logsPage", "noteCreate", "noteList"];
/** Arrivals per 100 of each kind. */
export const MIX: Record<Kind, number> = { webhook: 50, grpc: 3, runGet: 20, logsPage: 10, noteCreate: 7, noteList: 10 };
export const KIND_LABEL: Record<Kind, string> = {
  webhook: "POST /hooks/{key}",
  grpc: "gRPC TriggerRun",
  runGet: "GET /v1/runs/{id}",
  logsPage: "GET …/activity-logs (tail)",
  noteCreate: "POST …/notes",
  noteList: "GET …/notes",
};
const SHORT: Record<Kind, string> = {
  webhook: "webhook",
  grpc: "gRPC",
  runGet: "run GET",
  logsPage: "logs page",
  noteCreate: "note POST",
  noteList: "note list",
};
const TRIGGER_SHARE = (MIX.webhook + MIX.grpc) / 100;

const REQUEST_TIMEOUT_MS = 30_000;
/** GET /v1/runs/{id} reads the newest run accepted at least this long before. */
const FOLLOW_AFTER_MS = 1000;
/** Every CONFLICT_EVERY-th REST trigger of a tenant goes out twice at once on the same record (→ one 409). */
const CONFLICT_EVERY = 50;
const LOG_PAGE = 200;
const RSS_EVERY_MS = 5000;
/** A minute is printed once all its requests answered, or this long after it ended. */
const PRINT_GRACE_MS = 10_000;
/** RSS slope (MB/min) below which a process counts as flat; max/min of per-minute p99 below which it counts as stable. */
export const FLAT_MB_PER_MIN = 1;
export const STABLE_P99_RATIO = 2;
/** A minute's p99 is judged only above this many requests of its kind: at 100 or fewer it is simply the slowest one. */
export const MIN_P99_REQUESTS = 101;

export interface SoakOptions {
  durationMs: number;
  /** Length of one reporting window ("minute"). */
  windowMs: number;
  /** Worker processes (executors); 0 = executors inside the server. */
  workers: number;
  /** Fixed arrival rate (req/s) instead of measuring capacity. */
  ratePerSec?: number;
  /** Share of the measured capacity to run at. */
  share: number;
  capacityMs: number;
  capacityConcurrency: number;
  /** Records per tenant. */
  records: number;
}

export interface KindFigures {
  n: number;
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** Answers other than the expected ones (202/409, 200, 201), by status. */
  errors: number;
  statuses: Record<string, number>;
}

export interface SoakWindow {
  /** 1-based. */
  minute: number;
  fromS: number;
  durationS: number;
  arrivals: number;
  dropped: number;
  acceptedPerSec: number;
  conflicts: number;
  errors: number;
  /** Runs whose finishedAt falls in the window, per second (all tenants). */
  finishedPerSec: number | null;
  /** QUEUED + RUNNING runs at the window's end. */
  backlog: number | null;
  runsStored: number | null;
  activityEntries: number | null;
  /** VmRSS at the window's end, and the highest sample in it (every 5 s). */
  rssMb: Record<string, number | null>;
  rssPeakMb: Record<string, number | null>;
  kinds: Record<Kind, KindFigures>;
  /** Of the followed runs (GET /v1/runs about 1 s after the accept), the share already finished. */
  followedFinished: number | null;
  logEntriesRead: number;
  /** How late the generator issued requests (included in the latencies). */
  genLagP99Ms: number | null;
  /** The machine's 1-minute load average at the window's end (the machine may be shared). */
  loadAvg1: number | null;
}

export interface Capacity {
  concurrency: number;
  durationMs: number;
  /** The mix in the closed loop, arrivals/s. */
  mixPerSec: number;
  kinds: Record<Kind, KindFigures>;
  acceptedPerSec: number;
  /** Runs finished per second during the closed loop (executors sharing the machine with it). */
  finishedPerSec: number;
  backlogAfter: number;
  /** Runs finished per second while the backlog drained with the load off (null: under 2 s of backlog). */
  drainRunsPerSec: number | null;
  drainMs: number;
  cancelled: number;
  /** The mix's capacity, requests/s, and how it was obtained. */
  capacityPerSec: number;
  how: string;
}

export interface SoakVerdict {
  warmupMinutes: number;
  rss: { process: string; slopeMbPerMin: number | null; firstMb: number | null; lastMb: number | null; flat: boolean | null; note?: string }[];
  /** judged: every minute compared had at least MIN_P99_REQUESTS of the kind (below that its p99 is its max). */
  p99: { kind: Kind; minMs: number | null; maxMs: number | null; ratio: number | null; judged: boolean; stable: boolean | null }[];
  rssFlat: boolean | null;
  p99Stable: boolean | null;
  text: string;
}

export interface SoakResult {
  options: SoakOptions;
  mix: Record<Kind, number>;
  processes: Record<string, number | undefined>;
  tenants: number;
  capacity: Capacity | null;
  targetPerSec: number;
  windows: SoakWindow[];
  rssSamples: { t: number; mb: Record<string, number | null> }[];
  totals: {
    arrivals: number;
    issued: number;
    dropped: number;
    unanswered: number;
    maxInFlight: number;
    accepted: number;
    conflicts: number;
    errors: number;
    elapsedS: number;
  };
  verdict: SoakVerdict;
}

/** `90s`, `3m`, `10m`, `1h`, `1.5m`, `500ms` → ms; undefined when malformed (a unit is required). */
export function parseDuration(s: string | undefined): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec((s ?? "").trim());
  if (!m) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ms" | "s" | "m" | "h"];
  const v = Math.round(Number(m[1]) * unit);
  return v > 0 ? v : undefined;
}

// ---------------------------------------------------------------- requests

interface Tenant {
  w: BenchWorld;
  envPath: string;
  hookHeaders: Record<string, string>;
  userHeaders: Record<string, string>;
  apiHeaders: Record<string, string>;
  apiJsonHeaders: Record<string, string>;
  grpcMd: grpc.Metadata;
  nextRecord: number;
  triggers: number;
  /** Runs accepted, in order (trimmed). */
  runs: { id: string; at: number }[];
  cursor: string;
}

interface Answer {
  status: string;
  expected: boolean;
  accepted?: boolean;
  conflict?: boolean;
  /** Nothing to ask yet (no run accepted): not a request. */
  skipped?: boolean;
  /** GET of a run accepted ≥ 1 s before: was it finished? */
  finished?: boolean;
  entries?: number;
}

const FINISHED = new Set<string>(FINISHED_STATES);
const TRIGGER_PATH = "/runhook.v1.TriggerService/TriggerRun";
const encodeReq = (m: { webhookUrl: string; recordId: string }) => Buffer.from(toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, m)));
const errStatus = (err: unknown) => String((err as { code?: string }).code ?? (err as Error).name ?? "error");

function tenantOf(w: BenchWorld): Tenant {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${w.userToken}`);
  return {
    w,
    envPath: `/v1/project/${encodeURIComponent(w.projectName)}/environment/${encodeURIComponent(w.environmentName)}`,
    hookHeaders: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
    userHeaders: { authorization: `Bearer ${w.userToken}` },
    apiHeaders: { authorization: `Bearer ${w.apiToken}` },
    apiJsonHeaders: { authorization: `Bearer ${w.apiToken}`, "content-type": "application/json" },
    grpcMd: md,
    nextRecord: 0,
    triggers: 0,
    runs: [],
    cursor: "",
  };
}

/** The mixed load's requests against one server. */
function requests(pool: Pool, client: grpc.Client, tenants: Tenant[], records: number) {
  const counters: Record<Kind, number> = { webhook: 0, grpc: 0, runGet: 0, logsPage: 0, noteCreate: 0, noteList: 0 };

  /** The tenant's records in rotation: a pair comes back after `records` triggers, long after its run finished. */
  const pickRecord = (t: Tenant) => `r${t.nextRecord++ % records}`;
  function accepted(t: Tenant, id: string) {
    t.runs.push({ id, at: performance.now() });
    if (t.runs.length > 4000) t.runs.splice(0, 2000);
  }

  async function webhook(t: Tenant): Promise<Answer[]> {
    const body = JSON.stringify({ record_id: pickRecord(t) });
    const n = ++t.triggers;
    return Promise.all(Array.from({ length: n % CONFLICT_EVERY === 0 ? 2 : 1 }, () => webhookOnce(t, body)));
  }

  async function webhookOnce(t: Tenant, body: string): Promise<Answer> {
    const res = await pool.request({ path: t.w.hookPath, method: "POST", headers: t.hookHeaders, body });
    const text = await res.body.text();
    if (res.statusCode === 202) {
      const id = /"runId"\s*:\s*"([^"]+)"/.exec(text)?.[1];
      if (!id) return { status: "202-without-runId", expected: false };
      accepted(t, id);
      return { status: "202", expected: true, accepted: true };
    }
    return { status: String(res.statusCode), expected: res.statusCode === 409, conflict: res.statusCode === 409 };
  }

  function grpcTrigger(t: Tenant): Promise<Answer> {
    const webhookUrl = `http://localhost${t.w.hookPath}`;
    return new Promise((resolve) =>
      client.makeUnaryRequest(
        TRIGGER_PATH,
        encodeReq,
        (b: Buffer) => fromBinary(TriggerRunResponseSchema, b),
        { webhookUrl, recordId: pickRecord(t) },
        t.grpcMd,
        { deadline: Date.now() + REQUEST_TIMEOUT_MS },
        (err, value) => {
          if (err)
            return resolve({
              status: `grpc-${grpc.status[err.code] ?? err.code}`,
              expected: err.code === grpc.status.ALREADY_EXISTS,
              conflict: err.code === grpc.status.ALREADY_EXISTS,
            });
          if (!value?.runId) return resolve({ status: "ok-without-runId", expected: false });
          accepted(t, value.runId);
          resolve({ status: "OK", expected: true, accepted: true });
        },
      ),
    );
  }

  async function runGet(t: Tenant): Promise<Answer> {
    const cutoff = performance.now() - FOLLOW_AFTER_MS;
    let pick: { id: string; at: number } | undefined;
    for (let k = t.runs.length - 1; k >= 0; k--) {
      if (t.runs[k]!.at <= cutoff) {
        pick = t.runs[k];
        break;
      }
    }
    const aged = pick !== undefined;
    pick ??= t.runs[t.runs.length - 1];
    if (!pick) return { status: "no-run-yet", expected: true, skipped: true };
    const res = await pool.request({ path: `/v1/runs/${pick.id}`, method: "GET", headers: t.userHeaders });
    const text = await res.body.text();
    if (res.statusCode !== 200) return { status: String(res.statusCode), expected: false };
    const state = /"state"\s*:\s*"([A-Z_]+)"/.exec(text)?.[1] ?? "";
    return { status: "200", expected: true, ...(aged ? { finished: FINISHED.has(state) } : {}) };
  }

  async function logsPage(t: Tenant): Promise<Answer> {
    const used = t.cursor;
    const res = await pool.request({
      path: `${t.envPath}/activity-logs?limit=${LOG_PAGE}${used ? `&cursor=${encodeURIComponent(used)}` : ""}`,
      method: "GET",
      headers: t.apiHeaders,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) return { status: String(res.statusCode), expected: false };
    const body = JSON.parse(text) as { activityLogs?: unknown[]; nextCursor?: string };
    // Two pages of one cursor in flight read the same entries: only the first to answer moves the tail on.
    if (body.nextCursor && t.cursor === used) {
      t.cursor = body.nextCursor;
      return { status: "200", expected: true, entries: body.activityLogs?.length ?? 0 };
    }
    return { status: "200", expected: true };
  }

  async function noteCreate(t: Tenant, n: number): Promise<Answer> {
    const body = JSON.stringify({
      collection: t.w.collection,
      recordId: `r${(n * 7919) % records}`,
      title: `soak ${n}`,
      content: `Soak note ${n}: <b>checked</b> at ${new Date().toISOString()}`,
    });
    const res = await pool.request({ path: `${t.envPath}/notes`, method: "POST", headers: t.apiJsonHeaders, body });
    await res.body.text();
    return { status: String(res.statusCode), expected: res.statusCode === 201 };
  }

  async function noteList(t: Tenant, n: number): Promise<Answer> {
    const filter = n % 2 === 0 ? "" : `&collection=${encodeURIComponent(t.w.collection)}&recordId=r${(n * 7919) % records}`;
    const res = await pool.request({ path: `${t.envPath}/notes?limit=20${filter}`, method: "GET", headers: t.apiHeaders });
    await res.body.text();
    return { status: String(res.statusCode), expected: res.statusCode === 200 };
  }

  const once = async (p: () => Promise<Answer>): Promise<Answer> => {
    try {
      return await p();
    } catch (err) {
      return { status: errStatus(err), expected: false };
    }
  };
  /** One arrival of `kind`: its answer (two for a duplicated trigger). */
  return async function call(kind: Kind): Promise<Answer[]> {
    const n = counters[kind]++;
    const t = tenants[n % tenants.length]!;
    switch (kind) {
      case "webhook":
        return webhook(t).catch((err: unknown) => [{ status: errStatus(err), expected: false }]);
      case "grpc":
        return [await once(() => grpcTrigger(t))];
      case "runGet":
        return [await once(() => runGet(t))];
      case "logsPage":
        return [await once(() => logsPage(t))];
      case "noteCreate":
        return [await once(() => noteCreate(t, n))];
      case "noteList":
        return [await once(() => noteList(t, n))];
    }
  };
}

/** The kind of arrival j: MIX's proportions in every 100 arrivals, in a fixed shuffled order. */
function kindSequence(): (j: number) => Kind {
  const pattern: Kind[] = KINDS.flatMap((k) => Array.from({ length: MIX[k] }, () => k));
  let seed = 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = pattern.length - 1; i > 0; i--) {
    const k = Math.floor(rand() * (i + 1));
    [pattern[i], pattern[k]] = [pattern[k]!, pattern[i]!];
  }
  return (j) => pattern[j % pattern.length]!;
}

// ---------------------------------------------------------------- figures

interface KindAcc {
  lat: number[];
  statuses: Record<string, number>;
  errors: number;
}

interface DbFigures {
  finished: number | null;
  backlog: number | null;
  runs: number | null;
  activity: number | null;
}

interface WindowAcc {
  minute: number;
  fromMs: number;
  toMs: number;
  arrivals: number;
  dropped: number;
  pending: number;
  accepted: number;
  conflicts: number;
  lag: number[];
  kinds: Record<Kind, KindAcc>;
  followed: { finished: number; unfinished: number };
  logEntries: number;
  rssEnd?: Record<string, number | null>;
  loadAvg1?: number;
  db?: DbFigures;
  dbAtEnd?: Promise<DbFigures>;
  printed: boolean;
}

function newWindow(minute: number, fromMs: number, toMs: number): WindowAcc {
  return {
    minute,
    fromMs,
    toMs,
    arrivals: 0,
    dropped: 0,
    pending: 0,
    accepted: 0,
    conflicts: 0,
    lag: [],
    kinds: Object.fromEntries(KINDS.map((k) => [k, { lat: [], statuses: {}, errors: 0 }])) as unknown as Record<Kind, KindAcc>,
    followed: { finished: 0, unfinished: 0 },
    logEntries: 0,
    printed: false,
  };
}

function kindFigures(a: KindAcc): KindFigures {
  const s = Float64Array.from(a.lat).sort();
  return {
    n: s.length,
    p50Ms: percentile(s, 50),
    p99Ms: percentile(s, 99),
    maxMs: s.length ? round(s[s.length - 1]!, 1) : null,
    errors: a.errors,
    statuses: { ...a.statuses },
  };
}

function windowFigures(w: WindowAcc, samples: SoakResult["rssSamples"], names: string[]): SoakWindow {
  const durationS = (w.toMs - w.fromMs) / 1000;
  const inWin = samples.filter((s) => s.t * 1000 >= w.fromMs && s.t * 1000 <= w.toMs + RSS_EVERY_MS / 2);
  const peak: Record<string, number | null> = {};
  for (const n of names) {
    const v = [...inWin.map((s) => s.mb[n]), w.rssEnd?.[n]].filter((x): x is number => x != null);
    peak[n] = v.length ? Math.max(...v) : null;
  }
  const kinds = Object.fromEntries(KINDS.map((k) => [k, kindFigures(w.kinds[k])])) as Record<Kind, KindFigures>;
  const followed = w.followed.finished + w.followed.unfinished;
  const lag = Float64Array.from(w.lag).sort();
  return {
    minute: w.minute,
    fromS: round(w.fromMs / 1000, 1),
    durationS: round(durationS, 1),
    arrivals: w.arrivals,
    dropped: w.dropped,
    acceptedPerSec: round(w.accepted / durationS, 1),
    conflicts: w.conflicts,
    errors: KINDS.reduce((a, k) => a + w.kinds[k].errors, 0) + w.dropped,
    finishedPerSec: w.db?.finished == null ? null : round(w.db.finished / durationS, 1),
    backlog: w.db?.backlog ?? null,
    runsStored: w.db?.runs ?? null,
    activityEntries: w.db?.activity ?? null,
    rssMb: { ...(w.rssEnd ?? {}) },
    rssPeakMb: peak,
    kinds,
    followedFinished: followed ? round(w.followed.finished / followed, 3) : null,
    logEntriesRead: w.logEntries,
    genLagP99Ms: percentile(lag, 99),
    loadAvg1: w.loadAvg1 ?? null,
  };
}

const f0 = (v: number | null | undefined) => (v == null ? "–" : String(Math.round(v)));
const f1 = (v: number | null | undefined) => (v == null ? "–" : String(round(v, 1)));
const lat = (k: KindFigures) => `${f1(k.p50Ms)} / ${f1(k.p99Ms)}`;
const rssCell = (w: SoakWindow, n: string) => `${f0(w.rssMb[n])}${w.rssPeakMb[n] != null && w.rssPeakMb[n] !== w.rssMb[n] ? ` (${f0(w.rssPeakMb[n])})` : ""}`;

function consoleLine(w: SoakWindow, names: string[]): string {
  return [
    `  min ${w.minute} (${w.durationS} s): accepted ${w.acceptedPerSec}/s, 409 ×${w.conflicts}, finished ${f1(w.finishedPerSec)}/s, backlog ${f0(w.backlog)}, errors ${w.errors}`,
    ` | RSS MB ${names.map((n) => `${n} ${rssCell(w, n)}`).join(", ")}`,
    ` | p50/p99 ms ${KINDS.map((k) => `${SHORT[k]} ${lat(w.kinds[k])}`).join(", ")}`,
    ` | gen lag p99 ${f1(w.genLagP99Ms)} ms, load ${w.loadAvg1 ?? "–"}`,
  ].join("");
}

/** Least-squares slope of (t seconds, v) in units of v per minute. */
function slopePerMin(points: { t: number; v: number }[]): number | null {
  if (points.length < 3) return null;
  const n = points.length;
  const mt = points.reduce((a, p) => a + p.t, 0) / n;
  const mv = points.reduce((a, p) => a + p.v, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.v - mv);
    den += (p.t - mt) ** 2;
  }
  return den === 0 ? null : round((num / den) * 60, 2);
}

export function verdictOf(windows: SoakWindow[], samples: SoakResult["rssSamples"], names: string[], windowMs: number, javaName?: string): SoakVerdict {
  const warmupMinutes = 1;
  const afterS = (warmupMinutes * windowMs) / 1000;
  const after = samples.filter((s) => s.t >= afterS).sort((a, b) => a.t - b.t);
  const spanS = after.length ? after[after.length - 1]!.t - after[0]!.t : 0;
  const measured = windows.filter((w) => w.minute > warmupMinutes && w.durationS * 1000 >= windowMs / 2);
  // What the database took on after the warm-up, per window.
  const w0 = windows[warmupMinutes - 1];
  const wN = windows[windows.length - 1];
  const spanMin = w0 && wN && wN !== w0 ? (wN.fromS + wN.durationS - (w0.fromS + w0.durationS)) / (windowMs / 1000) : 0;
  const per = (a: number | null | undefined, b: number | null | undefined) =>
    a == null || b == null || !spanMin ? "–" : String(Math.round((b - a) / spanMin));
  const growth = `+${per(w0?.runsStored, wN?.runsStored)} runs and +${per(w0?.activityEntries, wN?.activityEntries)} activity entries a minute`;
  const lines: string[] = [];
  const rss = names.map((name) => {
    const pts = after.map((s) => ({ t: s.t, v: s.mb[name] })).filter((p): p is { t: number; v: number } => p.v != null);
    const slope = spanS >= Math.min(30, windowMs / 2000) ? slopePerMin(pts) : null;
    const firstMb = pts[0]?.v ?? null;
    const lastMb = pts[pts.length - 1]?.v ?? null;
    // Flat: not growing. A fall (a heap given back after a collection) is no leak.
    const flat = slope === null ? null : slope < FLAT_MB_PER_MIN;
    const note = name === javaName ? `the memory backend keeps every document in the JVM heap, so its RSS follows the data (${growth})` : undefined;
    return { process: name, slopeMbPerMin: slope, firstMb, lastMb, flat, ...(note ? { note } : {}) };
  });
  const p99 = KINDS.map((kind) => {
    const ws = measured.filter((w) => w.kinds[kind].p99Ms != null);
    const v = ws.map((w) => w.kinds[kind].p99Ms!);
    const judged = ws.length >= 2 && ws.every((w) => w.kinds[kind].n >= MIN_P99_REQUESTS);
    if (v.length < 2) return { kind, minMs: v[0] ?? null, maxMs: v[0] ?? null, ratio: null, judged: false, stable: null };
    const minMs = Math.min(...v);
    const maxMs = Math.max(...v);
    const ratio = minMs > 0 ? round(maxMs / minMs, 2) : null;
    return { kind, minMs, maxMs, ratio, judged, stable: judged && ratio !== null ? ratio <= STABLE_P99_RATIO : null };
  });
  const runhook = rss.filter((r) => r.process !== javaName);
  const rssFlat = runhook.some((r) => r.flat === null) ? null : runhook.every((r) => r.flat);
  const judged = p99.filter((p) => p.stable !== null);
  const p99Stable = judged.length === 0 ? null : judged.every((p) => p.stable);

  lines.push(`RSS after minute ${warmupMinutes} (least-squares slope over the ${RSS_EVERY_MS / 1000}-s samples, flat below +${FLAT_MB_PER_MIN} MB/min):`);
  for (const r of rss) {
    const judgement = r.note
      ? `not judged: ${r.note}`
      : r.flat === null
        ? "too short to tell"
        : !r.flat
          ? "growing"
          : r.slopeMbPerMin! <= -FLAT_MB_PER_MIN
            ? "falling: flat (not growing)"
            : "flat";
    lines.push(
      `  ${r.process}: ${r.slopeMbPerMin == null ? "–" : `${r.slopeMbPerMin >= 0 ? "+" : ""}${r.slopeMbPerMin}`} MB/min (${f0(r.firstMb)} → ${f0(r.lastMb)} MB) — ${judgement}`,
    );
  }
  lines.push(
    `p99 per minute after minute ${warmupMinutes} (stable when max/min ≤ ${STABLE_P99_RATIO}; judged for kinds with ≥ ${MIN_P99_REQUESTS} requests in each of those minutes, below that a minute's p99 is its slowest request):`,
  );
  for (const p of p99) {
    const minN = Math.min(...measured.map((w) => w.kinds[p.kind].n));
    const judgement =
      p.stable !== null ? (p.stable ? "stable" : "unstable") : `not judged (as few as ${measured.length ? minN : 0} requests in a minute: p99 = max)`;
    lines.push(
      `  ${KIND_LABEL[p.kind]}: ${p.ratio === null ? "too few minutes or requests to tell" : `${f1(p.minMs)}–${f1(p.maxMs)} ms, max/min ${p.ratio} — ${judgement}`}`,
    );
  }
  const loads = measured.map((w) => w.loadAvg1).filter((x): x is number => x != null);
  if (loads.length) lines.push(`Machine load average (1 min) at the ends of those minutes: ${Math.min(...loads)}–${Math.max(...loads)}.`);
  const say = (v: boolean | null, yes: string, no: string) => (v === null ? `${yes}: too short to tell` : v ? yes : no);
  lines.push(`Verdict: ${say(rssFlat, "RSS flat", "RSS not flat")} (runhook processes); ${say(p99Stable, "p99 stable", "p99 not stable")}.`);
  if (measured.length < 2)
    lines.push(`(Only ${measured.length} full minute(s) after the warm-up minute: a soak of 3 minutes or more gives a slope and a ratio worth reading.)`);
  else if (measured.length < 9)
    lines.push(`(${measured.length} minutes after the warm-up: the slope also catches V8 heaps still settling in; 10 minutes or more give a steadier figure.)`);
  return { warmupMinutes, rss, p99, rssFlat, p99Stable, text: lines.join("\n") };
}

export function renderSoakMarkdown(
  r: SoakResult,
  meta: {
    date: string;
    database: string;
    commit: string;
    dirty: boolean;
    loadAvgStart: number[];
    loadAvgEnd: number[];
    cpus: number;
    node: string;
    uptimeStart: string;
    uptimeEnd: string;
  },
): string {
  const names = Object.keys(r.processes);
  const o = r.options;
  const c = r.capacity;
  const out: string[] = [];
  out.push(`# runhook soak — ${meta.date}`);
  out.push("");
  out.push(`${meta.database}; commit ${meta.commit}${meta.dirty ? " (dirty)" : ""}; ${meta.cpus} CPUs; node ${meta.node}.`);
  out.push(`Machine at the start: \`${meta.uptimeStart}\`; at the end: \`${meta.uptimeEnd}\`.`);
  out.push("");
  out.push(
    `Soak of ${o.durationMs / 1000} s, figures per ${o.windowMs / 1000}-s window ("minute"). Processes: ${names.map((n) => `${n} (pid ${r.processes[n] ?? "–"})`).join(", ")}. ${r.tenants} tenants, ${o.records} records each.`,
  );
  out.push("");
  out.push(`Mix per 100 arrivals: ${KINDS.map((k) => `${KIND_LABEL[k]} ${MIX[k]}`).join(", ")}.`);
  out.push("");
  if (c) {
    out.push(
      `Capacity: closed loop of the mix at concurrency ${c.concurrency} for ${c.durationMs / 1000} s: ${c.mixPerSec} req/s, ${c.acceptedPerSec} runs accepted/s, ${c.finishedPerSec} runs finished/s meanwhile; backlog ${c.backlogAfter} runs, drained with the load off at ${c.drainRunsPerSec ?? "–"} runs/s in ${round(c.drainMs / 1000, 1)} s${c.cancelled ? ` (${c.cancelled} cancelled at the drain's time limit)` : ""}. ${c.how}`,
    );
  } else {
    out.push("Capacity: not measured (--soak-rate given).");
  }
  out.push(
    `Open loop at **${r.targetPerSec} req/s**${c ? ` (${Math.round(o.share * 100)}% of ${c.capacityPerSec} req/s)` : ""}, i.e. about ${round(r.targetPerSec * TRIGGER_SHARE, 1)} triggers/s.`,
  );
  out.push("");
  out.push(
    `| min | s | accepted/s | 409 | errors | finished/s | backlog | ${names.map((n) => `${n} RSS MB`).join(" | ")} | ${KINDS.map((k) => `${SHORT[k]} p50 / p99 ms`).join(" | ")} | gen lag p99 ms | load |`,
  );
  out.push(`|---:|---:|---:|---:|---:|---:|---:|${names.map(() => "---:|").join("")}${KINDS.map(() => "---:|").join("")}---:|---:|`);
  for (const w of r.windows) {
    out.push(
      `| ${w.minute} | ${w.durationS} | ${w.acceptedPerSec} | ${w.conflicts} | ${w.errors} | ${f1(w.finishedPerSec)} | ${f0(w.backlog)} | ${names.map((n) => rssCell(w, n)).join(" | ")} | ${KINDS.map((k) => lat(w.kinds[k])).join(" | ")} | ${f1(w.genLagP99Ms)} | ${w.loadAvg1 ?? "–"} |`,
    );
  }
  out.push("");
  out.push(
    "RSS: at the window's end (peak of the 5-s samples in it, when higher). Latency from each request's due time (includes the generator's own lag, shown apart). finished/s: runs whose `finishedAt` falls in the window; backlog: QUEUED + RUNNING runs at its end; load: the machine's 1-minute load average at its end.",
  );
  const t = r.totals;
  const other = r.windows.flatMap((w) =>
    KINDS.flatMap((k) =>
      Object.entries(w.kinds[k].statuses)
        .filter(([s]) => !["200", "201", "202", "409", "OK", "grpc-ALREADY_EXISTS"].includes(s))
        .map(([s, n]) => `${SHORT[k]} ${s}×${n}`),
    ),
  );
  const followed = r.windows.map((w) => w.followedFinished).filter((x): x is number => x != null);
  out.push("");
  out.push(
    `Totals: ${t.arrivals} arrivals in ${t.elapsedS} s, ${t.accepted} runs accepted, ${t.conflicts} answered 409 / ALREADY_EXISTS, ${t.errors} errors${other.length ? ` (${other.slice(0, 12).join(", ")})` : ""}, ${t.dropped} dropped (more than the in-flight limit outstanding), ${t.unanswered} unanswered at the end, at most ${t.maxInFlight} in flight. Runs followed about 1 s after their accept and already finished: ${followed.length ? `${round(Math.min(...followed) * 100, 1)}% (lowest minute), ${round(Math.max(...followed) * 100, 1)}% (highest)` : "–"}. Runs stored at the end: ${f0(r.windows[r.windows.length - 1]?.runsStored)}, activity entries: ${f0(r.windows[r.windows.length - 1]?.activityEntries)}.`,
  );
  out.push("");
  out.push("## Verdict");
  out.push("");
  out.push("```");
  out.push(r.verdict.text);
  out.push("```");
  return `${out.join("\n")}\n`;
}

// ---------------------------------------------------------------- the scenario

async function dbFigures(store: Store, fromWall: number, toWall: number): Promise<DbFigures> {
  const runs = store.db.runs;
  const q = <T>(p: Promise<T>) => p.catch(() => null);
  const [finished, backlog, total, activity] = await Promise.all([
    q(runs.countDocuments({ finishedAt: { $gte: new Date(fromWall), $lt: new Date(toWall) } })),
    q(runs.countDocuments({ state: { $in: ["QUEUED", "RUNNING"] as RunState[] } })),
    q(runs.estimatedDocumentCount()),
    q(store.db.activityLogs.estimatedDocumentCount()),
  ]);
  return { finished, backlog, runs: total, activity };
}

/** Waits until no run is QUEUED or RUNNING (at most `limitMs`), then cancels what is left. */
async function drain(store: Store, limitMs: number): Promise<{ ms: number; finished: number; cancelled: number }> {
  const t0 = Date.now();
  const ongoing = { state: { $in: ["QUEUED", "RUNNING"] as RunState[] } };
  while (Date.now() - t0 < limitMs && (await store.db.runs.countDocuments(ongoing)) > 0) await sleep(250);
  const ms = Date.now() - t0;
  const finished = await store.db.runs.countDocuments({ finishedAt: { $gte: new Date(t0) } });
  let cancelled = 0;
  const machine = runStateMachine(store);
  for (const d of await store.db.runs.find(ongoing).toArray()) {
    if (await machine.cancel(d, "cancelled by the soak benchmark (capacity phase backlog)")) cancelled++;
  }
  return { ms, finished, cancelled };
}

export async function soakScenario(ctx: BenchContext, o: SoakOptions): Promise<SoakResult> {
  const dbName = `${ctx.runTag}_soak`;
  const store = await openStore(ctx, dbName);
  const records = Array.from({ length: o.records }, (_, k) => ({ id: `r${k}`, status: "new", region: k % 2 ? "eu" : "us" }));
  const steps = [{ type: "load_record" as const }, { type: "update_record" as const, set: { status: "done" } }];
  const worlds = [await benchWorld(ctx, store, { steps, records }), await benchWorld(ctx, store, { steps, records })];
  const tenants = worlds.map(tenantOf);
  const env = { RUNHOOK_API_RATE_LIMIT: "1000000" };
  const procs: Proc[] = [];
  try {
    procs.push(await spawnFor(ctx, "soak", "start", dbName, { ...env, RUNHOOK_EXECUTOR: o.workers > 0 ? "false" : "true" }));
    for (let i = 0; i < o.workers; i++) procs.push(await spawnFor(ctx, "soak", "worker", dbName, env));
    const server = procs[0]!;
    const pids: Record<string, number | undefined> = { server: server.pid };
    for (const [i, p] of procs.slice(1).entries()) pids[o.workers > 1 ? `worker${i + 1}` : "worker"] = p.pid;
    if (ctx.javaPid) pids.java = ctx.javaPid;
    const names = Object.keys(pids);
    const javaName = ctx.javaPid ? "java" : undefined;
    const rssNow = () => Object.fromEntries(names.map((n) => [n, pids[n] ? rssMb(pids[n]!) : null]));
    ctx.log(
      `  server pid ${server.pid}${
        o.workers
          ? `, ${o.workers} worker(s) (pids ${procs
              .slice(1)
              .map((p) => p.pid)
              .join(", ")})`
          : " with executors"
      }; ${tenants.length} tenants × ${o.records} records; RSS ${JSON.stringify(rssNow())} MB`,
    );

    const pool = new Pool(server.baseUrl!, { connections: 64, pipelining: 1, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
    const client = new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure());
    try {
      const call = requests(pool, client, tenants, o.records);
      const kindOf = kindSequence();
      const probe = (await call("webhook"))[0]!;
      if (!probe.accepted) throw new Error(`the webhook answered ${probe.status} to the first trigger`);

      // ---- capacity
      let capacity: Capacity | null = null;
      let target = o.ratePerSec ?? 0;
      if (!o.ratePerSec) {
        let measuring = false;
        let acceptedN = 0;
        const perKind = newWindow(0, 0, 0).kinds;
        let fromWall = 0;
        let j = 0;
        const st = await closedLoop({
          concurrency: o.capacityConcurrency,
          durationMs: o.capacityMs,
          warmupPerWorker: 3,
          onMeasureStart: () => {
            measuring = true;
            fromWall = Date.now();
          },
          fn: async () => {
            const kind = kindOf(j++);
            const t0 = performance.now();
            const answers = await call(kind);
            if (measuring) {
              perKind[kind].lat.push(performance.now() - t0);
              for (const a of answers) {
                if (a.accepted) acceptedN++;
                perKind[kind].statuses[a.status] = (perKind[kind].statuses[a.status] ?? 0) + 1;
                if (!a.expected) perKind[kind].errors++;
              }
            }
            const bad = answers.find((a) => !a.expected);
            return { ok: !bad, status: bad?.status ?? answers[0]!.status };
          },
        });
        const toWall = Date.now();
        const finishedN = await store.db.runs.countDocuments({ finishedAt: { $gte: new Date(fromWall), $lt: new Date(toWall) } });
        const backlogAfter = await store.db.runs.countDocuments({ state: { $in: ["QUEUED", "RUNNING"] as RunState[] } });
        const mixPerSec = round((st.requests / st.durationMs) * 1000, 1);
        const acceptedPerSec = round((acceptedN / st.durationMs) * 1000, 1);
        const finishedPerSec = round((finishedN / st.durationMs) * 1000, 1);
        const kinds = Object.fromEntries(KINDS.map((k) => [k, kindFigures(perKind[k])])) as Record<Kind, KindFigures>;
        ctx.log(
          `  capacity: closed loop c=${o.capacityConcurrency} ${st.durationMs} ms: ${mixPerSec} req/s (p50 ${st.p50Ms} p99 ${st.p99Ms} ms), ${acceptedPerSec} accepted/s, ${finishedPerSec} finished/s; backlog ${backlogAfter}; errors ${KINDS.reduce((a, k) => a + kinds[k].errors, 0)}`,
        );
        ctx.log(`    p50/p99 ms ${KINDS.map((k) => `${SHORT[k]} ${lat(kinds[k])}`).join(", ")}; draining…`);
        const d = await drain(store, 30_000);
        const drainRunsPerSec = d.ms >= 2000 && d.finished > 0 ? round((d.finished / d.ms) * 1000, 1) : null;
        let capacityPerSec: number;
        let how: string;
        if (drainRunsPerSec === null || acceptedPerSec <= finishedPerSec * 1.1) {
          capacityPerSec = mixPerSec;
          how = "The executors kept up with the closed loop (under 2 s of backlog): capacity = the closed loop's rate.";
        } else {
          // Both halves of the load share the machine. During the loop the executors ran at
          // finished/drain of their speed alone, so the requests had the rest: alone they would
          // have reached mix / (1 − finished/drain). R req/s of the mix then need R / that of
          // the machine for the requests and R × triggers share / drain for their runs.
          const execShare = Math.min(0.9, finishedPerSec / drainRunsPerSec);
          const requestsAlone = mixPerSec / (1 - execShare);
          capacityPerSec = 1 / (1 / requestsAlone + TRIGGER_SHARE / drainRunsPerSec);
          how = `The executors fell behind (${acceptedPerSec} accepted/s vs ${finishedPerSec} finished/s), so the runs bound the capacity: requests alone ≈ ${round(mixPerSec)} / (1 − ${round(execShare, 2)}) = ${round(requestsAlone)} req/s, runs alone ${drainRunsPerSec}/s (the drain), so capacity = 1 / (1/${round(requestsAlone)} + ${TRIGGER_SHARE}/${drainRunsPerSec}) ≈ ${round(capacityPerSec, 1)} req/s of the mix.`;
        }
        capacityPerSec = round(capacityPerSec, 1);
        target = round(capacityPerSec * o.share, 1);
        capacity = {
          concurrency: o.capacityConcurrency,
          durationMs: st.durationMs,
          mixPerSec,
          kinds,
          acceptedPerSec,
          finishedPerSec,
          backlogAfter,
          drainRunsPerSec,
          drainMs: d.ms,
          cancelled: d.cancelled,
          capacityPerSec,
          how,
        };
        ctx.log(
          `  drained in ${round(d.ms / 1000, 1)} s${drainRunsPerSec ? ` at ${drainRunsPerSec} runs/s` : ""}${d.cancelled ? `, ${d.cancelled} cancelled` : ""}. ${how}`,
        );
      }
      if (!(target > 0)) throw new Error(`no rate to run at (capacity ${capacity?.capacityPerSec})`);
      ctx.log(
        `  soak: open loop at ${target} req/s (≈ ${round(target * TRIGGER_SHARE, 1)} triggers/s) for ${o.durationMs / 1000} s, figures every ${o.windowMs / 1000} s`,
      );
      await sleep(1000);

      // ---- soak
      const nWindows = Math.ceil(o.durationMs / o.windowMs);
      const wins = Array.from({ length: nWindows }, (_, k) => newWindow(k + 1, k * o.windowMs, Math.min(o.durationMs, (k + 1) * o.windowMs)));
      const winAt = (relMs: number) => wins[Math.min(nWindows - 1, Math.max(0, Math.floor(relMs / o.windowMs)))]!;
      const samples: SoakResult["rssSamples"] = [];
      const start = performance.now() + 50;
      const wallStart = Date.now() + 50;
      const rel = () => performance.now() - start;
      const sample = () => samples.push({ t: round(rel() / 1000, 1), mb: rssNow() });
      const sampler = setInterval(sample, RSS_EVERY_MS);
      let accepted = 0;
      let conflicts = 0;
      let errors = 0;
      let finishedLoad = false;

      const report = async (w: WindowAcc) => {
        w.db = await w.dbAtEnd!;
        w.printed = true;
        ctx.log(consoleLine(windowFigures(w, samples, names), names));
      };
      const reporter = (async () => {
        for (;;) {
          const now = rel();
          // At a window's end: RSS and the database's figures (the runs that finished in it, the backlog).
          for (const w of wins) {
            if (now < w.toMs) break;
            if (!w.rssEnd) {
              w.rssEnd = rssNow();
              w.loadAvg1 = round(loadavg()[0]!, 2);
              samples.push({ t: round(now / 1000, 1), mb: w.rssEnd });
            }
            w.dbAtEnd ??= dbFigures(store, wallStart + w.fromMs, wallStart + w.toMs);
          }
          // Printed in order, once every request of the window answered (or after a grace time).
          for (const w of wins) {
            if (w.printed) continue;
            if (now < w.toMs || !(w.pending === 0 || now >= w.toMs + PRINT_GRACE_MS || finishedLoad)) break;
            await report(w);
          }
          if (wins.every((w) => w.printed)) return;
          await sleep(250);
        }
      })();

      const loop = await openLoop({
        ratePerSec: target,
        durationMs: o.durationMs,
        maxInFlight: 2000,
        drainMs: REQUEST_TIMEOUT_MS + 5000,
        startMs: start,
        onDrop: (_j, due) => {
          const w = winAt(due - start);
          w.arrivals++;
          w.dropped++;
        },
        issue: async (j, due, lagMs) => {
          const w = winAt(due - start);
          w.arrivals++;
          w.pending++;
          w.lag.push(lagMs);
          const kind = kindOf(j);
          const answers = await call(kind);
          const ms = performance.now() - due;
          w.pending--;
          for (const a of answers) {
            if (a.skipped) continue;
            const k = w.kinds[kind];
            k.lat.push(ms);
            k.statuses[a.status] = (k.statuses[a.status] ?? 0) + 1;
            if (!a.expected) {
              k.errors++;
              errors++;
            }
            if (a.accepted) {
              w.accepted++;
              accepted++;
            }
            if (a.conflict) {
              w.conflicts++;
              conflicts++;
            }
            if (a.finished !== undefined) w.followed[a.finished ? "finished" : "unfinished"]++;
            if (a.entries) w.logEntries += a.entries;
          }
        },
      });
      finishedLoad = true;
      await reporter;
      clearInterval(sampler);
      sample();
      const windows = wins.map((w) => windowFigures(w, samples, names));
      const verdict = verdictOf(windows, samples, names, o.windowMs, javaName);
      const totals = {
        arrivals: loop.issued + loop.dropped,
        issued: loop.issued,
        dropped: loop.dropped,
        unanswered: loop.unanswered,
        maxInFlight: loop.maxInFlight,
        accepted,
        conflicts,
        errors,
        elapsedS: round((loop.endMs - start) / 1000, 1),
      };
      return { options: o, mix: MIX, processes: pids, tenants: tenants.length, capacity, targetPerSec: target, windows, rssSamples: samples, totals, verdict };
    } finally {
      client.close();
      await pool.close().catch(() => {});
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
}
