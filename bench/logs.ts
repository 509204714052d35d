// Entries per second of the public log API: paging (limit 1000) and the NDJSON export.
//   node --import tsx bench/logs.ts
// Env: MONGODB_URI (default: the embedded FerretDB in a temp dir), BENCH_ENTRIES (100000),
// BENCH_MAX_PAGES (all; paging on FerretDB's SQLite backend scans the collection per query).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config.js";
import { startEmbeddedDb } from "../src/db/embedded.js";
import type { ActivityLogDoc } from "../src/db/types.js";
import { createLogger } from "../src/logging.js";
import { ACTIVITY_COUNTER } from "../src/logs/writer.js";
import { startRunhook } from "../src/main.js";
import { createWorld } from "../test/helpers/world.js";

const N = Number(process.env.BENCH_ENTRIES ?? 100_000);
const MAX_PAGES = Number(process.env.BENCH_MAX_PAGES ?? Infinity);
const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-"));
const base = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
let uri = process.env.MONGODB_URI;
const embedded = uri ? undefined : await startEmbeddedDb({ dataDir, cacheDir: base.cacheDir, progress: () => {} });
uri ??= embedded!.uri;
const dbName = `bench_logs_${Date.now()}`;
const config = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir, MONGODB_URI: uri.replace(/\/[^/?]*(\?|$)/, `/${dbName}$1`), PORT: "0", GRPC_PORT: "0", HOST: "127.0.0.1", RUNHOOK_DEMO: "false", RUNHOOK_EXECUTOR: "false", RUNHOOK_API_RATE_LIMIT: "1000000" });
const rh = await startRunhook(config, { mode: "server", logger: createLogger("silent") });
const db = rh.deps.db;
try {
  const w = await createWorld(db);
  let t = Date.now();
  for (let b = 0; b < N; b += 10_000) {
    const docs: ActivityLogDoc[] = [];
    for (let k = 1; k <= Math.min(10_000, N - b); k++) {
      docs.push({ _id: b + k, timestamp: new Date(), projectId: w.projectId, environmentId: w.environmentId, environment: "production", rendering: null, user: { id: w.admin._id, email: w.admin.email }, action: "record.updated", via: "workflow", collection: "orders", recordId: `r${b + k}`, runId: null, details: { field: "status", value: "done" } });
    }
    await db.activityLogs.insertMany(docs, { ordered: false });
  }
  await db.counters.updateOne({ _id: ACTIVITY_COUNTER }, { $set: { seq: N } }, { upsert: true });
  console.log(`inserted ${N} entries in ${Date.now() - t} ms`);
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
  let ms = Date.now() - t;
  console.log(`paging (limit 1000): ${n} entries, ${pages} pages in ${ms} ms → ${Math.round((n / ms) * 1000)} entries/s`);

  t = Date.now();
  const res = await fetch(url, { headers: { ...headers, accept: "application/x-ndjson" } });
  let lines = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) for (const byte of chunk) if (byte === 10) lines++;
  ms = Date.now() - t;
  console.log(`NDJSON export: ${lines} entries in ${ms} ms → ${Math.round((lines / ms) * 1000)} entries/s`);
} finally {
  await db.db.dropDatabase().catch(() => {});
  await rh.stop();
  await embedded?.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
