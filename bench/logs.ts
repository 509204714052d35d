// Entries per second of the public log API on 100,000 activity entries: paging (limit
// 1000) and the NDJSON export, against a raw driver scan of the same range; then two ways
// to read a whole unfiltered stream in process (no HTTP): walking it by `_id` point lookups,
// and the export's one driver cursor sorted by seq (after the watermark advance).
//   node --import tsx bench/logs.ts
// Env: MONGODB_URI (default: the embedded FerretDB in a temp dir), BENCH_ENTRIES (100000),
// BENCH_MAX_PAGES (all), BENCH_SQLITE_ID_INDEX=1 (embedded FerretDB only: create the SQLite
// index on FerretDB's `_id` query expression with the sqlite3 CLI and run the server with
// RUNHOOK_FERRETDB_ID_INDEX=1, so unfiltered reads walk the stream by point lookups).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config.js";
import { startEmbeddedDb } from "../src/db/embedded.js";
import type { ActivityLogDoc } from "../src/db/types.js";
import { createLogger } from "../src/logging.js";
import { cursorCodec, paging } from "../src/logs/cursor.js";
import { createLogReader } from "../src/logs/reader.js";
import { streamLog, type LogQuery } from "../src/logs/service.js";
import { activityStream, streamKey, watermarkId } from "../src/logs/writer.js";
import { startRunhook } from "../src/main.js";
import { createWorld } from "../test/helpers/world.js";

const N = Number(process.env.BENCH_ENTRIES ?? 100_000);
const MAX_PAGES = Number(process.env.BENCH_MAX_PAGES ?? Infinity);
const ID_INDEX = process.env.BENCH_SQLITE_ID_INDEX === "1" && !process.env.MONGODB_URI;
if (ID_INDEX) process.env.RUNHOOK_FERRETDB_ID_INDEX = "1"; // read by the log reader the server creates
const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-"));
const base = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
let uri = process.env.MONGODB_URI;
const embedded = uri ? undefined : await startEmbeddedDb({ dataDir, cacheDir: base.cacheDir, progress: () => {} });
uri ??= embedded!.uri;
const dbName = `bench_logs_${Date.now()}`;
const config = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir, MONGODB_URI: uri.replace(/\/[^/?]*(\?|$)/, `/${dbName}$1`), PORT: "0", GRPC_PORT: "0", HOST: "127.0.0.1", RUNHOOK_DEMO: "false", RUNHOOK_EXECUTOR: "false", RUNHOOK_API_RATE_LIMIT: "1000000" });
const rh = await startRunhook(config, { mode: "server", logger: createLogger("silent") });
const db = rh.deps.db;
const rate = (n: number, ms: number) => `${n} entries in ${ms} ms → ${Math.round((n / Math.max(ms, 1)) * 1000)} entries/s`;
try {
  const w = await createWorld(db);
  const stream = activityStream(w.environmentId);
  let t = Date.now();
  for (let b = 0; b < N; b += 10_000) {
    const docs: ActivityLogDoc[] = [];
    for (let k = 1; k <= Math.min(10_000, N - b); k++) {
      docs.push({ _id: streamKey(stream, b + k), seq: b + k, timestamp: new Date(), projectId: w.projectId, environmentId: w.environmentId, environment: "production", rendering: null, user: { id: w.admin._id, email: w.admin.email }, action: "record.updated", via: "workflow", collection: "orders", recordId: `r${b + k}`, runId: null, details: { field: "status", value: "done" } });
    }
    await db.activityLogs.insertMany(docs, { ordered: false });
  }
  // The counter only: the API resolves the positions (and stores the watermark) as it reads.
  await db.counters.updateOne({ _id: stream }, { $set: { seq: N } }, { upsert: true });
  console.log(`inserted ${N} entries in ${Date.now() - t} ms (${db.serializedUpdates ? "FerretDB" : "MongoDB"})`);
  if (ID_INDEX) {
    // FerretDB queries `_id` as `_ferretdb_sjson->'$._id'`; its own index is on `->"_id"`, which SQLite does not match.
    const dir = join(dataDir, "ferretdb");
    const file = join(dir, readdirSync(dir).find((f) => f === `${dbName}.sqlite`)!);
    const sql = (q: string) => execFileSync("sqlite3", [file, q], { encoding: "utf8" }).trim();
    t = Date.now();
    for (const coll of ["activity_logs", "admin_logs"]) {
      const table = sql(`SELECT table_name FROM _ferretdb_collections WHERE name = '${coll}'`);
      if (table) sql(`CREATE INDEX IF NOT EXISTS "${table}_id_path" ON "${table}" (_ferretdb_sjson->'$._id')`);
    }
    console.log(`created the SQLite _id path index in ${Date.now() - t} ms`);
  }

  t = Date.now();
  let k = 0;
  for await (const _ of db.activityLogs.find({ environmentId: w.environmentId }).sort({ seq: 1 }).batchSize(1000)) k++;
  console.log(`raw driver scan find({environmentId}).sort({seq: 1}): ${rate(k, Date.now() - t)}`);

  const url = `${rh.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
  const headers = { authorization: `Bearer ${w.apiToken}` };
  t = Date.now();
  let n = 0;
  let pages = 0;
  let cursor = "";
  for (;;) {
    const res = await fetch(`${url}?limit=1000${cursor ? `&cursor=${cursor}` : ""}`, { headers });
    const body = (await res.json()) as { activityLogs: unknown[]; hasMore: boolean; nextCursor: string };
    n += body.activityLogs.length;
    pages++;
    cursor = body.nextCursor;
    if (!body.hasMore || pages >= MAX_PAGES) break;
  }
  console.log(`REST paging (limit 1000, ${pages} pages): ${rate(n, Date.now() - t)}`);

  t = Date.now();
  const res = await fetch(url, { headers: { ...headers, accept: "application/x-ndjson" } });
  let lines = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) for (const byte of chunk) if (byte === 10) lines++;
  console.log(`REST NDJSON export: ${rate(lines, Date.now() - t)}`);

  // The two ways to export an unfiltered stream, in process. The watermark is stored by now
  // (the paging above resolved every position), so the cursor's watermark advance is one read.
  const codec = cursorCodec(config);
  const q: LogQuery<ActivityLogDoc> = { stream, base: { environmentId: w.environmentId }, filtered: false, hash: "bench" };
  console.log(`(watermark stored: ${(await db.counters.findOne({ _id: watermarkId(stream) }))?.seq ?? 0})`);
  if (ID_INDEX || !db.serializedUpdates) {
    t = Date.now();
    let m = 0;
    for await (const r of createLogReader(db, { pointReads: true }).forward("activity", stream, 0, { until: N })) if (r.doc) m++;
    console.log(`in-process, walk by _id point lookups (32 in flight): ${rate(m, Date.now() - t)}`);
  }
  t = Date.now();
  let m = 0;
  for await (const _ of streamLog(createLogReader(db), codec, "activity", q, paging(undefined, { ignoreLimit: true }))) m++;
  console.log(`in-process, streamLog (driver cursor sorted by seq): ${rate(m, Date.now() - t)}`);
} finally {
  await db.db.dropDatabase().catch(() => {});
  await rh.stop();
  await embedded?.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
