// Scenario 3: reading activity logs over the public REST API (the published list: pages of at
// most 100 items).
// - Paging: GET …/activity-logs?order=asc&limit=100 following nextCursor (the tail's way), on
//   entries appended through the store (store.logs.appendActivity). The first pass finds every
//   position above the stream's watermark (nothing has read the stream yet) and raises it; a
//   second pass reads below the watermark (range reads). Then newest first the published way,
//   each page `createdAt.lt` the last item's createdAt. Then the NDJSON export (oldest first).
//   All against one raw driver cursor over the same entries
//   (find({environmentId}).sort({seq: 1})).
// - Tail: 4 writers (2 processes × 2 loops, scripts/append-activity.ts) append 20,000 entries
//   through the store while a consumer polls nextCursor (order=asc); the time until it has
//   received every entry, exactly once and in each writer's order (the writer and its count
//   are each entry's record id).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import type { Store } from "../../src/store/index.js";
import { storeFixtures } from "../../src/store/index.js";
import { activityStream, type NewActivity } from "../../src/store/logs.js";
import { PUBLISHED_MAX_LIMIT } from "../../src/http/published.js";
import { benchWorld, openStore, spawnFor, uriFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { httpLimitMet } from "../lib/limits.js";
import { ratio, round, sleep } from "../lib/load.js";
import { ROOT, rssMb, rssSampler } from "../lib/procs.js";

export interface RateFigure {
  entries: number;
  ms: number;
  entriesPerSec: number;
  /** Stopped at the time limit before the end. */
  partial?: boolean;
}

export type PagingFigure = RateFigure & { pages: number; pageP50Ms: number | null; pageMaxMs: number | null };

export interface TailResult {
  writers: number;
  processes: number;
  entries: number;
  received: number;
  /** From the writers' start until the consumer had every entry (or the time limit). */
  ms: number;
  /** The slowest writer process's own time. */
  writersMs: number | null;
  polls: number;
  duplicates: number;
  outOfOrder: number;
  tombstones: number;
  partial: boolean;
  error?: string;
}

export interface LogsResult {
  entries: number;
  /** The fixture: entries appended through the store, 32 in flight. */
  append: RateFigure;
  available: boolean;
  reason?: string;
  rawScan: RateFigure;
  /** Raw driver, paged by `_id` ranges of PAGE (the shape of an unfiltered page below the watermark). */
  rawPaged: RateFigure & { pages: number };
  /** The page size of the REST reads: the most the published list allows. */
  pageSize: number;
  /** First pass (order=asc + cursor): positions above the watermark, found one by one (32 look-ups in flight). */
  paging?: PagingFigure;
  /** Second pass (order=asc + cursor): below the watermark the first pass raised, range reads. */
  pagingAgain?: PagingFigure;
  /** Newest first, each page `createdAt.lt` the last item's createdAt (the published document's paging). */
  pagingNewestFirst?: PagingFigure;
  export?: RateFigure;
  pagingVsRawScan: number | null;
  pagingAgainVsRawScan: number | null;
  pagingNewestFirstVsRawScan: number | null;
  exportVsRawScan: number | null;
  tail?: TailResult;
  rss?: { idleMb: number | null; endMb: number | null; peakMb: number | null };
}

const fig = (entries: number, ms: number, partial = false): RateFigure => ({
  entries,
  ms: round(ms, 0),
  entriesPerSec: round((entries / Math.max(ms, 1)) * 1000, 0),
  ...(partial ? { partial } : {}),
});

function activityPath(w: BenchWorld): string {
  return `/v1/project/${encodeURIComponent(w.projectName)}/environment/${encodeURIComponent(w.environmentName)}/activity-logs`;
}

/** The page size of every REST read. */
const PAGE = PUBLISHED_MAX_LIMIT;

interface Page {
  status: number;
  text: string;
  body: { data?: { id: string; createdAt: string; recordIds: string[] }[]; hasMore?: boolean; nextCursor?: string };
}

/** A page of the list: oldest first after `cursor` (the tail), or with `query` as given. */
async function getPage(pool: Pool, w: BenchWorld, at: { cursor: string } | { query: Record<string, string> }, limit = PAGE): Promise<Page> {
  const query = "query" in at ? at.query : { order: "asc", ...(at.cursor ? { cursor: at.cursor } : {}) };
  const r = await pool.request({
    path: `${activityPath(w)}?${new URLSearchParams({ limit: String(limit), ...query })}`,
    method: "GET",
    headers: { authorization: `Bearer ${w.apiToken}` },
  });
  const text = await r.body.text();
  const met = httpLimitMet(r.statusCode, text);
  if (met) throw met;
  let body: Page["body"] = {};
  try {
    body = JSON.parse(text) as Page["body"];
  } catch {
    /* reported by the caller */
  }
  return { status: r.statusCode, text, body };
}

/**
 * Pages through the whole log, oldest first following nextCursor, or (newestFirst) newest first
 * with `createdAt.lt` the last item's createdAt; null and a reason when the API does not answer
 * pages.
 */
async function pageAll(
  pool: Pool,
  w: BenchWorld,
  o: { expected: number; timeLimitMs: number; newestFirst?: boolean },
): Promise<{ fig: PagingFigure } | { reason: string }> {
  const t = performance.now();
  let count = 0;
  let pages = 0;
  let at: Parameters<typeof getPage>[2] = o.newestFirst ? { query: {} } : { cursor: "" };
  let partial = false;
  const pageMs: number[] = [];
  const maxPages = Math.ceil(o.expected / PAGE) + 5;
  for (;;) {
    const p0 = performance.now();
    const p = await getPage(pool, w, at);
    pageMs.push(performance.now() - p0);
    const data = p.body.data;
    if (p.status !== 200 || !Array.isArray(data)) return { reason: `activity-logs API: GET answered ${p.status} ${p.text.slice(0, 200)}` };
    count += data.length;
    pages++;
    if (!p.body.hasMore) break;
    if (o.newestFirst) {
      const last = data[data.length - 1];
      if (!last) return { reason: "activity-logs API: hasMore on an empty page" };
      at = { query: { "createdAt.lt": last.createdAt } };
    } else {
      if (!p.body.nextCursor) return { reason: "activity-logs API: hasMore without nextCursor" };
      at = { cursor: p.body.nextCursor };
    }
    if (pages >= maxPages || performance.now() - t > o.timeLimitMs) {
      partial = true;
      break;
    }
  }
  const sorted = pageMs.sort((a, b) => a - b);
  return {
    fig: {
      ...fig(count, performance.now() - t, partial),
      pages,
      pageP50Ms: round(sorted[Math.floor(sorted.length / 2)] ?? 0),
      pageMaxMs: round(sorted[sorted.length - 1] ?? 0),
    },
  };
}

function entry(w: BenchWorld, n: number): NewActivity {
  return {
    projectId: w.projectId,
    environmentId: w.environmentId,
    environment: w.environmentName,
    rendering: w.renderingId,
    user: { id: w.admin._id, email: w.admin.email },
    action: "record.updated",
    via: "workflow",
    collection: w.collection,
    recordId: `r${n % 5000}`,
    runId: null,
    details: { field: "status", value: "done" },
  };
}

function writerProcess(uri: string, w: BenchWorld, name: string, count: number, loops: number): { done: Promise<number>; kill(): void } {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "scripts/append-activity.ts")], {
    cwd: ROOT,
    env: { ...process.env, MONGODB_URI: uri, COUNT: String(count), LOOPS: String(loops), WRITER: name, PROJECT_ID: w.projectId, ENV_ID: w.environmentId },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const done = new Promise<number>((resolve, reject) =>
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`writer ${name} exited ${code}: ${out.slice(-2000)}`));
      const m = /"ms":(\d+)/.exec(out);
      resolve(m ? Number(m[1]) : NaN);
    }),
  );
  return { done, kill: () => child.kill("SIGKILL") };
}

async function tail(
  ctx: BenchContext,
  dbName: string,
  store: Store,
  pool: Pool,
  w: BenchWorld,
  o: { entries: number; timeLimitMs: number },
): Promise<TailResult> {
  const PROCESSES = 2;
  const LOOPS = 2;
  const perLoop = Math.ceil(o.entries / (PROCESSES * LOOPS));
  const total = perLoop * PROCESSES * LOOPS;
  const res: TailResult = {
    writers: PROCESSES * LOOPS,
    processes: PROCESSES,
    entries: total,
    received: 0,
    ms: 0,
    writersMs: null,
    polls: 0,
    duplicates: 0,
    outOfOrder: 0,
    tombstones: 0,
    partial: false,
  };
  const first = await getPage(pool, w, { cursor: "" }, 1);
  let cursor = first.body.nextCursor ?? "";
  if (first.status !== 200 || !cursor) throw new Error(`tail: the first page answered ${first.status} ${first.text.slice(0, 200)}`);
  const t0 = performance.now();
  const writers = Array.from({ length: PROCESSES }, (_, i) => writerProcess(uriFor(ctx.uri, dbName), w, `p${i}`, perLoop, LOOPS));
  let writersDone = false;
  const all = Promise.all(writers.map((x) => x.done)).finally(() => (writersDone = true));
  all.catch(() => {});
  const seen = new Set<string>();
  const nextI = new Map<string, number>();
  let lastId = 0;
  try {
    for (;;) {
      const doneBefore = writersDone;
      const p = await getPage(pool, w, { cursor });
      res.polls++;
      if (p.status !== 200 || !p.body.nextCursor) throw new Error(`tail: a page answered ${p.status} ${p.text.slice(0, 200)}`);
      cursor = p.body.nextCursor;
      for (const e of p.body.data ?? []) {
        const id = Number(e.id);
        if (id <= lastId) res.outOfOrder++;
        lastId = id;
        // The writer's record id: `<writer>:<its count>`.
        const key = e.recordIds[0] ?? "";
        const cut = key.lastIndexOf(":");
        const writer = key.slice(0, cut);
        const i = Number(key.slice(cut + 1));
        if (seen.has(key)) res.duplicates++;
        seen.add(key);
        if (i !== (nextI.get(writer) ?? 0)) res.outOfOrder++;
        nextI.set(writer, i + 1);
      }
      res.received = seen.size;
      if (doneBefore && !p.body.hasMore) break;
      if (performance.now() - t0 > o.timeLimitMs) {
        res.partial = true;
        break;
      }
      if (!p.body.hasMore) await sleep(100); // caught up: poll again shortly
    }
    res.ms = round(performance.now() - t0, 0);
    const times = await all;
    res.writersMs = Math.max(...times);
  } catch (err) {
    res.ms = round(performance.now() - t0, 0);
    res.error = err instanceof Error ? err.message : String(err);
    for (const x of writers) x.kill();
  }
  const stream = activityStream(w.environmentId);
  res.tombstones = await storeFixtures(store).activityLogs.countDocuments({ _id: { $gt: `${stream}:`, $lt: `${stream};` }, tomb: true });
  return res;
}

export async function logsScenario(
  ctx: BenchContext,
  o: { entries: number; timeLimitMs: number; tailEntries: number; tailTimeLimitMs: number },
): Promise<LogsResult> {
  const dbName = `${ctx.runTag}_logs`;
  const store = await openStore(ctx, dbName);
  const w = await benchWorld(ctx, store);
  const serverP = spawnFor(ctx, "logs", "start", dbName, { RUNHOOK_EXECUTOR: "false" });
  serverP.catch(() => undefined);

  // The entries, appended through the store: 32 appends in flight.
  let t = performance.now();
  let n = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (n < o.entries) await store.logs.appendActivity(entry(w, ++n));
    }),
  );
  const append = fig(o.entries, performance.now() - t);
  ctx.log(`  appended ${o.entries} entries through the store (32 in flight): ${append.entriesPerSec}/s`);

  // Raw driver: one cursor over the entries.
  t = performance.now();
  let k = 0;
  for await (const _ of storeFixtures(store).activityLogs.find({ environmentId: w.environmentId }).sort({ seq: 1 }).batchSize(1000)) k++;
  const rawScan = fig(k, performance.now() - t);
  ctx.log(`  raw cursor scan: ${rawScan.entries} entries, ${rawScan.entriesPerSec}/s`);

  // Raw driver, paged by `_id` ranges the way an unfiltered page below the watermark is read, in pages of the API's size.
  t = performance.now();
  const stream = activityStream(w.environmentId);
  let last = `${stream}:`;
  let pagedN = 0;
  let rawPages = 0;
  let partial = false;
  for (;;) {
    const page = await storeFixtures(store)
      .activityLogs.find({ _id: { $gt: last, $lt: `${stream};` } })
      .sort({ _id: 1 })
      .limit(PAGE)
      .toArray();
    rawPages++;
    pagedN += page.length;
    if (page.length < PAGE) break;
    last = page[page.length - 1]!._id;
    if (performance.now() - t > o.timeLimitMs) {
      partial = true;
      break;
    }
  }
  const rawPaged = { ...fig(pagedN, performance.now() - t, partial), pages: rawPages };
  ctx.log(`  raw paged by _id (limit ${PAGE}): ${rawPaged.entries} entries, ${rawPaged.entriesPerSec}/s${partial ? " (time limit)" : ""}`);

  const res: LogsResult = {
    entries: o.entries,
    append,
    available: false,
    rawScan,
    rawPaged,
    pageSize: PAGE,
    pagingVsRawScan: null,
    pagingAgainVsRawScan: null,
    pagingNewestFirstVsRawScan: null,
    exportVsRawScan: null,
  };
  const server = await serverP;
  const idleMb = rssMb(server.pid);
  const sampler = rssSampler(server.pid);
  const pool = new Pool(server.baseUrl!, { connections: 1, pipelining: 1, bodyTimeout: 300_000, headersTimeout: 300_000 });
  try {
    const first = await pageAll(pool, w, { expected: o.entries, timeLimitMs: o.timeLimitMs });
    if ("reason" in first) {
      res.reason = first.reason;
      ctx.log(`  ${res.reason}`);
      return res;
    }
    res.available = true;
    res.paging = first.fig;
    res.pagingVsRawScan = ratio(first.fig.entriesPerSec, rawScan.entriesPerSec);
    ctx.log(
      `  REST paging, first pass: ${first.fig.entries} entries in ${first.fig.pages} pages, ${first.fig.entriesPerSec}/s (page p50 ${first.fig.pageP50Ms} ms, max ${first.fig.pageMaxMs} ms)${first.fig.partial ? " (time limit)" : ""}`,
    );
    if (first.fig.entries !== o.entries && !first.fig.partial) ctx.log(`  WARNING: paging returned ${first.fig.entries} entries, expected ${o.entries}`);
    const again = await pageAll(pool, w, { expected: o.entries, timeLimitMs: o.timeLimitMs });
    if ("fig" in again) {
      res.pagingAgain = again.fig;
      res.pagingAgainVsRawScan = ratio(again.fig.entriesPerSec, rawScan.entriesPerSec);
      ctx.log(
        `  REST paging, again: ${again.fig.entries} entries, ${again.fig.entriesPerSec}/s (page p50 ${again.fig.pageP50Ms} ms, max ${again.fig.pageMaxMs} ms)`,
      );
    }
    const newest = await pageAll(pool, w, { expected: o.entries, timeLimitMs: o.timeLimitMs, newestFirst: true });
    if ("fig" in newest) {
      res.pagingNewestFirst = newest.fig;
      res.pagingNewestFirstVsRawScan = ratio(newest.fig.entriesPerSec, rawScan.entriesPerSec);
      ctx.log(
        `  REST paging, newest first by createdAt.lt: ${newest.fig.entries} entries, ${newest.fig.entriesPerSec}/s (page p50 ${newest.fig.pageP50Ms} ms, max ${newest.fig.pageMaxMs} ms)${newest.fig.partial ? " (time limit)" : ""}`,
      );
      if (newest.fig.entries !== o.entries && !newest.fig.partial)
        ctx.log(`  WARNING: paging by createdAt.lt returned ${newest.fig.entries} entries, expected ${o.entries}`);
    } else ctx.log(`  REST paging, newest first by createdAt.lt: ${newest.reason}`);

    // NDJSON export of the same selection, oldest first.
    t = performance.now();
    const r = await pool.request({
      path: `${activityPath(w)}?order=asc`,
      method: "GET",
      headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
    });
    const ctype = String(r.headers["content-type"] ?? "");
    let lines = 0;
    partial = false;
    if (r.statusCode === 200 && ctype.includes("ndjson")) {
      for await (const chunk of r.body as AsyncIterable<Buffer>) {
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
        if (performance.now() - t > o.timeLimitMs) {
          partial = true;
          break;
        }
      }
      if (partial) r.body.destroy();
      res.export = fig(lines, performance.now() - t, partial);
      res.exportVsRawScan = ratio(res.export.entriesPerSec, rawScan.entriesPerSec);
      ctx.log(`  NDJSON export: ${lines} entries, ${res.export.entriesPerSec}/s${partial ? " (time limit)" : ""}`);
    } else {
      await r.body.dump();
      ctx.log(`  NDJSON export not available: ${r.statusCode} ${ctype}`);
    }

    // Tail: a new tenant (its own, empty stream) on the same server.
    const tw = await benchWorld(ctx, store);
    res.tail = await tail(ctx, dbName, store, pool, tw, { entries: o.tailEntries, timeLimitMs: o.tailTimeLimitMs });
    const tl = res.tail;
    ctx.log(
      `  tail: ${tl.received}/${tl.entries} entries from ${tl.writers} writers in ${tl.processes} processes in ${tl.ms} ms (writers done in ${tl.writersMs} ms), ${tl.polls} polls, ${tl.tombstones} tombstones, ${tl.duplicates} duplicates, ${tl.outOfOrder} out of order${tl.partial ? " (time limit)" : ""}${tl.error ? `; ${tl.error}` : ""}`,
    );
    return res;
  } finally {
    await pool.close().catch(() => undefined);
    res.rss = { idleMb, endMb: rssMb(server.pid), peakMb: sampler.stop() };
    await server.stop();
  }
}
