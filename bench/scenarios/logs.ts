// Scenario 3: reading activity logs over the public REST API — paging with limit=1000
// following nextCursor, and the NDJSON export — against a raw driver cursor scan of the
// same range (find({environmentId}).sort({seq: 1})).
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import type { ActivityLogDoc } from "../../src/db/types.js";
import { activityStream, streamKey } from "../../src/logs/writer.js";
import { benchWorld, openDb, spawnFor, type BenchContext } from "../lib/context.js";
import { ratio, round } from "../lib/load.js";
import { rssMb, rssSampler } from "../lib/procs.js";

export interface RateFigure {
  entries: number;
  ms: number;
  entriesPerSec: number;
  /** Stopped at the time limit before the end. */
  partial?: boolean;
}

export interface LogsResult {
  entries: number;
  insertMs: number;
  available: boolean;
  reason?: string;
  rawScan: RateFigure;
  /** Raw driver, paged by an indexed query: seq > last, limit 1000 (informational; the API walks `_id`s when unfiltered). */
  rawPaged: RateFigure & { pages: number };
  paging?: RateFigure & { pages: number; pageP50Ms: number | null; pageMaxMs: number | null };
  export?: RateFigure;
  pagingVsRawScan: number | null;
  exportVsRawScan: number | null;
  rss?: { idleMb: number | null; endMb: number | null; peakMb: number | null };
}

const fig = (entries: number, ms: number, partial = false): RateFigure => ({ entries, ms: round(ms, 0), entriesPerSec: round((entries / Math.max(ms, 1)) * 1000, 0), ...(partial ? { partial } : {}) });

export async function logsScenario(ctx: BenchContext, o: { entries: number; timeLimitMs: number }): Promise<LogsResult> {
  const dbName = `${ctx.runTag}_logs`;
  const db = await openDb(ctx, dbName);
  const w = await benchWorld(ctx, db);
  const serverP = spawnFor(ctx, "logs", "start", dbName, { RUNHOOK_EXECUTOR: "false", RUNHOOK_API_RATE_LIMIT: "1000000" });
  serverP.catch(() => undefined);

  let t = performance.now();
  const base = Date.now() - o.entries;
  const stream = activityStream(w.environmentId);
  for (let b = 0; b < o.entries; b += 10_000) {
    const docs: ActivityLogDoc[] = [];
    for (let k = 1; k <= Math.min(10_000, o.entries - b); k++) {
      const n = b + k;
      docs.push({ _id: streamKey(stream, n), seq: n, timestamp: new Date(base + n), projectId: w.projectId, environmentId: w.environmentId, environment: w.environmentName, rendering: w.renderingId, user: { id: w.admin._id, email: w.admin.email }, action: "record.updated", via: "workflow", collection: w.collection, recordId: `r${n % 5000}`, runId: null, details: { field: "status", value: "done" } });
    }
    await db.activityLogs.insertMany(docs, { ordered: false });
  }
  // The counter only, no watermark: the API resolves the positions itself as it reads them.
  await db.counters.updateOne({ _id: stream }, { $set: { seq: o.entries } }, { upsert: true });
  const insertMs = round(performance.now() - t, 0);
  ctx.log(`  inserted ${o.entries} entries in ${insertMs} ms`);

  // Raw driver: one cursor over the range.
  t = performance.now();
  let n = 0;
  for await (const _ of db.activityLogs.find({ environmentId: w.environmentId }).sort({ seq: 1 }).batchSize(1000)) n++;
  const rawScan = fig(n, performance.now() - t);
  ctx.log(`  raw cursor scan: ${rawScan.entries} entries, ${rawScan.entriesPerSec}/s`);

  // Raw driver, paged the way an API page is read (informational: the cost of paging itself).
  t = performance.now();
  let last = 0;
  let pagedN = 0;
  let rawPages = 0;
  let partial = false;
  for (;;) {
    const page = await db.activityLogs.find({ environmentId: w.environmentId, seq: { $gt: last } }).sort({ seq: 1 }).limit(1000).toArray();
    rawPages++;
    pagedN += page.length;
    if (page.length < 1000) break;
    last = page[page.length - 1]!.seq;
    if (performance.now() - t > o.timeLimitMs) { partial = true; break; }
  }
  const rawPaged = { ...fig(pagedN, performance.now() - t, partial), pages: rawPages };
  ctx.log(`  raw paged (limit 1000): ${rawPaged.entries} entries, ${rawPaged.entriesPerSec}/s${partial ? " (time limit)" : ""}`);

  const res: LogsResult = { entries: o.entries, insertMs, available: false, rawScan, rawPaged, pagingVsRawScan: null, exportVsRawScan: null };
  const server = await serverP;
  const idleMb = rssMb(server.pid);
  const sampler = rssSampler(server.pid);
  const pool = new Pool(server.baseUrl!, { connections: 1, pipelining: 1, bodyTimeout: 300_000, headersTimeout: 300_000 });
  const path = `/v1/project/${encodeURIComponent(w.projectName)}/environment/${encodeURIComponent(w.environmentName)}/activity-logs`;
  const headers = { authorization: `Bearer ${w.apiToken}` };
  try {
    // Paging: limit=1000, following nextCursor until hasMore is false.
    t = performance.now();
    let count = 0;
    let pages = 0;
    let cursor = "";
    const pageMs: number[] = [];
    partial = false;
    const maxPages = Math.ceil(o.entries / 1000) + 5;
    for (;;) {
      const p0 = performance.now();
      const r = await pool.request({ path: `${path}?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, method: "GET", headers });
      const text = await r.body.text();
      pageMs.push(performance.now() - p0);
      let body: { activityLogs?: unknown[]; hasMore?: boolean; nextCursor?: string } = {};
      try {
        body = JSON.parse(text);
      } catch { /* reported below */ }
      if (r.statusCode !== 200 || !Array.isArray(body.activityLogs)) {
        res.reason = `activity-logs API not available yet: GET answered ${r.statusCode} ${text.slice(0, 200)}`;
        ctx.log(`  ${res.reason}`);
        return res;
      }
      count += body.activityLogs.length;
      pages++;
      if (!body.hasMore) break;
      if (!body.nextCursor) {
        res.reason = "activity-logs API: hasMore without nextCursor";
        return res;
      }
      cursor = body.nextCursor;
      if (pages >= maxPages || performance.now() - t > o.timeLimitMs) { partial = true; break; }
    }
    const sortedPages = pageMs.sort((a, b) => a - b);
    res.paging = { ...fig(count, performance.now() - t, partial), pages, pageP50Ms: round(sortedPages[Math.floor(sortedPages.length / 2)] ?? 0), pageMaxMs: round(sortedPages[sortedPages.length - 1] ?? 0) };
    res.available = true;
    res.pagingVsRawScan = ratio(res.paging.entriesPerSec, rawScan.entriesPerSec);
    ctx.log(`  REST paging: ${count} entries in ${pages} pages, ${res.paging.entriesPerSec}/s (page p50 ${res.paging.pageP50Ms} ms, max ${res.paging.pageMaxMs} ms)${partial ? " (time limit)" : ""}`);
    if (count !== o.entries && !partial) ctx.log(`  WARNING: paging returned ${count} entries, expected ${o.entries}`);

    // NDJSON export of the same selection.
    t = performance.now();
    const r = await pool.request({ path, method: "GET", headers: { ...headers, accept: "application/x-ndjson" } });
    const ctype = String(r.headers["content-type"] ?? "");
    let lines = 0;
    partial = false;
    if (r.statusCode === 200 && ctype.includes("ndjson")) {
      for await (const chunk of r.body as AsyncIterable<Buffer>) {
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
        if (performance.now() - t > o.timeLimitMs) { partial = true; break; }
      }
      if (partial) r.body.destroy();
      res.export = fig(lines, performance.now() - t, partial);
      res.exportVsRawScan = ratio(res.export.entriesPerSec, rawScan.entriesPerSec);
      ctx.log(`  NDJSON export: ${lines} entries, ${res.export.entriesPerSec}/s${partial ? " (time limit)" : ""}`);
    } else {
      await r.body.dump();
      ctx.log(`  NDJSON export not available: ${r.statusCode} ${ctype}`);
    }
    return res;
  } finally {
    await pool.close().catch(() => undefined);
    res.rss = { idleMb, endMb: rssMb(server.pid), peakMb: sampler.stop() };
    await server.stop();
  }
}
