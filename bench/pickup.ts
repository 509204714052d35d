// Pick-up latency of executors: time from a run's QUEUED insert to its startedAt.
//   same instance: insert + "run.queued" event on the executor's own instance (what the webhook does)
//   other instance: insert only (as if queued by another instance): found by polling
// Usage: node --import tsx bench/pickup.ts [runs=200] [finishedRuns=0]   (RUNHOOK_EXECUTOR_POLL_MS etc. apply)
//   finishedRuns: first store that many finished runs, to show pick-up does not depend on the
//   size of the runs collection (FerretDB scans whole collections for any non-_id query).
// Uses MONGODB_URI when set, otherwise starts the embedded FerretDB in a temp directory.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import { loadConfig } from "../src/config.js";
import { startEmbeddedDb } from "../src/db/embedded.js";
import { createLogger } from "../src/logging.js";
import { startRunhook } from "../src/main.js";
import { RUN_QUEUED } from "../src/runs/model.js";
import { createWorld } from "../test/helpers/world.js";
import { queueRun } from "../test/helpers/runs.js";

const N = Number(process.argv[2] ?? 200);
const PREFILL = Number(process.argv[3] ?? 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-"));
const base = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
const embedded = process.env.MONGODB_URI ? undefined : await startEmbeddedDb({ dataDir, cacheDir: base.cacheDir, progress: () => {} });
const uri = process.env.MONGODB_URI ?? embedded!.uri;
const dbName = `bench_${randomBytes(4).toString("hex")}`;
const config = loadConfig({
  ...process.env,
  MONGODB_URI: uri,
  RUNHOOK_DATA_DIR: dataDir,
  RUNHOOK_SIGNING_KEYS: `k1:${randomBytes(32).toString("base64url")}`,
  RUNHOOK_BOOTSTRAP_SECRET: randomBytes(16).toString("hex"),
  RUNHOOK_DEMO: "false",
});
const rh = await startRunhook(config, { mode: "worker", logger: createLogger("warn"), dbName });
const db = rh.deps.db;
const { pollIntervalMs, leaseMs, concurrency } = config.executor;
console.log(`database: ${embedded ? "embedded FerretDB" : "MONGODB_URI"}; executor concurrency ${concurrency}, poll ${pollIntervalMs} ms, lease ${leaseMs} ms; ${N} runs per case; ${PREFILL} finished runs stored first`);

if (PREFILL > 0) {
  const w = await createWorld(db, { steps: [{ type: "load_record" }] });
  const at = new Date(Date.now() - 86_400_000);
  for (let i = 0; i < PREFILL; i += 1000) {
    await db.runs.insertMany(
      Array.from({ length: Math.min(1000, PREFILL - i) }, () => {
        const id = randomUUID();
        return {
          _id: id, activeKey: id, workflowId: w.workflowId, workflowVersion: 1, renderingId: w.renderingId, projectId: w.projectId,
          environmentId: w.environmentId, collectionId: w.collectionId, collection: w.collection, recordId: "r1", userId: w.user._id,
          userEmail: w.user.email, tokenId: id, via: "webhook" as const, state: "SUCCEEDED" as const,
          steps: [{ type: "load_record" as const, state: "SUCCEEDED" as const, startedAt: at, finishedAt: at, error: "", output: null, attempts: 1 }],
          stepIndex: 1, error: "", lease: null, createdAt: at, startedAt: at, finishedAt: at, updatedAt: at, version: 3,
        };
      }),
    );
  }
}

async function measure(label: string, withEvent: boolean): Promise<void> {
  const records = Array.from({ length: N }, (_, i) => ({ id: `r${i}` }));
  const w = await createWorld(db, { records, steps: [{ type: "wait", seconds: 0 }] });
  // One run at a time on an otherwise idle executor: this measures pick-up, not backlog.
  for (let i = 0; i < N; i++) {
    const run = await queueRun(db, w, `r${i}`);
    if (withEvent) rh.deps.events.emit(RUN_QUEUED, run._id);
    while ((await db.runs.findOne({ _id: run._id }))?.finishedAt == null) await sleep(5);
    // Land the next insert at a random point of the poll cycle.
    await sleep(Math.random() * pollIntervalMs);
  }
  const runs = await db.runs.find({ workflowId: w.workflowId }).toArray();
  const lat = runs.map((r) => r.startedAt!.getTime() - r.createdAt.getTime());
  console.log(`${label}: p50 ${pct(lat, 50)} ms, p90 ${pct(lat, 90)} ms, p99 ${pct(lat, 99)} ms, max ${Math.max(...lat)} ms (n=${lat.length})`);
}

try {
  await measure("same instance (insert + run.queued event)", true);
  await measure("other instance (insert only, found by polling)", false);
} finally {
  await rh.stop();
  await embedded?.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
