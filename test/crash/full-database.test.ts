// A full database is an answer, not a bug: `runhook start` on its embedded database, filled until
// it refuses writes — the memory backend at its smallest heap (128 MB), the file backend on a
// small tmpfs mounted here (that needs root, as CI has: without it the test fails saying so) —
// under webhook load from 16 callers, with native gRPC triggers and /v1 note writes beside them.
// Every refusal is 503 (gRPC UNAVAILABLE) with Retry-After and "the database is full: retry
// later", never a 500; reads (runs, the activity log to its end, notes, an admin read) still
// answer; the server logs "the database is full" at most once a minute, and no bug; every
// acknowledged run is stored, and every stored run has its triggered entry (in the log, or stored
// with the run until the database takes the entry's write). On the file backend,
// writes are accepted again once space is freed.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, storeFixtures, type Store } from "../../src/store/index.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { spawnServer, testAppOn, testDbName, type ChildServer } from "../helpers/server.js";
import { adminClient, grpcTrigger, sleep } from "../helpers/webhook.js";
import { tally, timedFetch, type Call } from "../helpers/load.js";

const CALLERS = 16;
const FULL_MESSAGE = "the database is full: retry later";
const FULL_RETRY_AFTER = "30";
/** The database is full for good once every webhook call of this long was refused. */
const REFUSED_FOR_MS = 2000;
const LOAD_LIMIT_MS = 120_000;

const env = (dataDir: string, more: Record<string, string>) => ({
  MONGODB_URI: "",
  RUNHOOK_DATA_DIR: dataDir,
  METRICS_PORT: "off", // a server on the embedded database serves them on 9464, which another runhook may hold
  RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT: "100000000",
  ...more,
});

interface Running {
  server: ChildServer;
  /** runhook's database, on the server's embedded database. */
  db: Store;
  world: World;
  /** The webhook's public URL (gRPC TriggerRun names it). */
  publicUrl: string;
}

/** `runhook start` on `dataDir`, its database (found by the launcher's state file `stateFile`) and a world on it. */
async function start(dataDir: string, stateFile: string, more: Record<string, string>): Promise<Running> {
  const server = await spawnServer(testDbName(), { env: env(dataDir, more) });
  const { port } = JSON.parse(readFileSync(join(dataDir, "mongo", stateFile), "utf8")) as { port: number };
  const db = await openStore(`mongodb://127.0.0.1:${port}/runhook`, { dbName: "runhook" });
  const app = testAppOn(db);
  app.stop(); // its services make the world; the server under test runs the runs
  const world = await createWorld(app, { steps: [{ type: "load_record" }], rateLimitPerMinute: 1_000_000 });
  const publicUrl = (await adminClient(server.baseUrl, world.adminToken).getWorkflow({ workflowId: world.workflowId })).workflow!.webhook!.url;
  return { server, db, world, publicUrl };
}

let records = 0;

/**
 * 16 callers until the database is full for good (every webhook call of the last 2 s refused):
 * webhooks, one of them native gRPC TriggerRun, one /v1 note writes. Every call's answer is kept.
 */
async function loadUntilFull(r: Running): Promise<Call[]> {
  const { server, world } = r;
  const calls: Call[] = [];
  const t0 = Date.now();
  let refusedSince: number | undefined;
  const full = () => (refusedSince !== undefined && Date.now() - refusedSince >= REFUSED_FOR_MS) || Date.now() - t0 > LOAD_LIMIT_MS;
  const webhook = async () => {
    while (!full()) {
      const c = await timedFetch("webhook", server.baseUrl, world.hookPath, {
        method: "POST",
        headers: { authorization: `Bearer ${world.userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ record_id: `r${records++}` }),
        hangMs: 15_000,
      });
      calls.push(c);
      if (c.status !== 503) refusedSince = undefined;
      else refusedSince ??= c.start;
      if (c.status === 503) await sleep(10);
    }
  };
  const grpcTriggers = async () => {
    while (!full()) {
      const start = Date.now();
      const g = await grpcTrigger(server.grpcAddr, r.publicUrl, `r${records++}`, world.userToken, { deadlineMs: 15_000 });
      const c: Call = { kind: "grpc", target: server.grpcAddr, start, end: Date.now(), status: g.error ? g.error.code : grpc.status.OK, runId: g.value?.runId };
      if (g.error) {
        c.code = grpc.status[g.error.code];
        c.retryAfter = (g.error.metadata.get("retry-after")[0] as string | undefined) ?? null;
        c.detail = decodeURIComponent(g.error.details); // grpc-js leaves Connect's percent-encoding of `:` in grpc-message
      }
      calls.push(c);
      await sleep(20);
    }
  };
  const notes = async () => {
    while (!full()) {
      const c = await timedFetch("note", server.baseUrl, `/v1/project/${world.projectName}/environment/${world.environmentName}/notes`, {
        method: "POST",
        headers: { authorization: `Bearer ${world.apiToken}`, "content-type": "application/json" },
        body: JSON.stringify({ collection: world.collection, recordId: "r1", title: "full", content: "a note while the database fills" }),
        hangMs: 15_000,
      });
      calls.push(c);
      await sleep(20);
    }
  };
  await Promise.all([...Array.from({ length: CALLERS - 2 }, webhook), grpcTriggers(), notes()]);
  const summary = JSON.stringify(tally(calls, (c) => `${c.kind} ${c.status}`));
  expect(refusedSince, `not full after ${LOAD_LIMIT_MS / 1000} s: ${summary}; its output:\n${server.logs.raw().slice(-3000)}`).toBeDefined();
  console.log(`[full-database] ${summary}`);
  return calls;
}

/** Every refusal was 503 (gRPC UNAVAILABLE) with Retry-After and the words; nothing else failed. */
function expectRefusedAsFull(calls: Call[]): void {
  const http = calls.filter((c) => c.kind !== "grpc");
  const grpcCalls = calls.filter((c) => c.kind === "grpc");
  const accepted = (c: Call) => c.status === 202 || c.status === 201;
  expect(http.filter((c) => !accepted(c) && c.status !== 503).map((c) => `${c.kind} ${c.status} ${c.detail ?? ""}`)).toEqual([]);
  expect(grpcCalls.filter((c) => c.status !== grpc.status.OK && c.status !== grpc.status.UNAVAILABLE).map((c) => `${c.code} ${c.detail}`)).toEqual([]);
  // Accepted first, then refused.
  expect(calls.some((c) => c.kind === "webhook" && accepted(c))).toBe(true);
  for (const kind of ["webhook", "note"]) {
    const refused = http.filter((c) => c.kind === kind && c.status === 503);
    expect(refused.length, `${kind}: no refusal`).toBeGreaterThan(0);
    expect(new Set(refused.map((c) => `${c.code} ${c.retryAfter}`))).toEqual(new Set([`unavailable ${FULL_RETRY_AFTER}`]));
  }
  const refusedRpcs = grpcCalls.filter((c) => c.status === grpc.status.UNAVAILABLE);
  expect(refusedRpcs.length, "gRPC: no refusal").toBeGreaterThan(0);
  expect(new Set(refusedRpcs.map((c) => `${c.detail} ${c.retryAfter}`))).toEqual(new Set([`${FULL_MESSAGE} ${FULL_RETRY_AFTER}`]));
}

/** The message of a refused webhook call, as its caller reads it. */
async function expectWebhookRefusedInWords(r: Running): Promise<void> {
  const res = await fetch(r.server.baseUrl + r.world.hookPath, {
    method: "POST",
    headers: { authorization: `Bearer ${r.world.userToken}`, "content-type": "application/json" },
    body: JSON.stringify({ record_id: `r${records++}` }),
  });
  expect([res.status, res.headers.get("retry-after"), await res.json()]).toEqual([
    503,
    FULL_RETRY_AFTER,
    { code: "unavailable", message: FULL_MESSAGE, error: FULL_MESSAGE },
  ]);
}

/** Reads answer while the database is full: the runs, the activity log read to its end, notes, an admin read. */
async function expectReadsAnswer(r: Running): Promise<void> {
  const { server, world } = r;
  const env = `/v1/project/${world.projectName}/environment/${world.environmentName}`;
  const get = (path: string) => fetch(server.baseUrl + path, { headers: { authorization: `Bearer ${world.apiToken}` }, signal: AbortSignal.timeout(15_000) });
  expect((await get(`${env}/runs?limit=10`)).status).toBe(200);
  expect((await get(`${env}/notes?limit=10`)).status).toBe(200);
  for (let cursor: string | undefined, pages = 0; ; pages++) {
    expect(pages, "the activity log did not end").toBeLessThan(1000);
    const res = await get(`${env}/activity-logs?${new URLSearchParams({ order: "asc", limit: "100", ...(cursor ? { cursor } : {}) })}`);
    expect(res.status).toBe(200);
    const page = (await res.json()) as { hasMore: boolean; nextCursor?: string };
    if (!page.hasMore) break;
    cursor = page.nextCursor;
  }
  expect((await adminClient(server.baseUrl, world.adminToken).getWorkflow({ workflowId: world.workflowId })).workflow?.id).toBe(world.workflowId);
}

/**
 * Every acknowledged run is stored, and every stored run has its triggered entry: in the log, or
 * stored with the run (its pendingLog) while the database refuses the entry's own write, to be put
 * in the log once it takes writes again.
 */
async function expectRunsWithTheirEntries(r: Running, calls: Call[]): Promise<void> {
  const fx = storeFixtures(r.db);
  const runs = await fx.runs.find({ workflowId: r.world.workflowId }, { projection: { _id: 1, pendingLog: 1 } }).toArray();
  const stored = new Set(runs.map((run) => run._id));
  const acked = calls.filter((c) => c.runId && (c.status === 202 || c.status === grpc.status.OK)).map((c) => c.runId!);
  expect(acked.filter((id) => !stored.has(id))).toEqual([]);
  const entries = await fx.activityLogs
    .find({ environmentId: r.world.environmentId, action: "workflow.run.triggered" }, { projection: { runId: 1 } })
    .toArray();
  const logged = new Set(entries.map((e) => e.runId));
  const held = (run: (typeof runs)[number]) => (run.pendingLog ?? []).some((p) => p.entry.action === "workflow.run.triggered");
  expect(
    runs.filter((run) => !logged.has(run._id) && !held(run)).map((run) => run._id),
    `of ${runs.length} stored runs`,
  ).toEqual([]);
}

/** "the database is full" at most once a minute since the first refusal; no bug logged. */
function expectToldOncePerMinute(r: Running, calls: Call[]): void {
  const firstRefusal = Math.min(...calls.filter((c) => c.status === 503 || c.status === grpc.status.UNAVAILABLE).map((c) => c.start));
  const lines = r.server.logs.lines();
  const told = lines.filter((l) => String(l.msg).startsWith("the database is full"));
  expect(told.length).toBeGreaterThanOrEqual(1);
  expect(told.length).toBeLessThanOrEqual(1 + Math.floor((Date.now() - firstRefusal) / 60_000));
  expect(told[0]).toMatchObject({ level: 40, refused: 1 });
  expect(lines.filter((l) => Number(l.level) >= 50).map((l) => `${l.msg} ${JSON.stringify(l.err ?? "")}`.slice(0, 300))).toEqual([]);
}

describe("the memory backend, its heap full", () => {
  let dataDir = "";
  let r: Running | undefined;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "runhook-full-heap-"));
    r = await start(dataDir, "memory.json", { RUNHOOK_EMBEDDED: "memory", RUNHOOK_EMBEDDED_HEAP_MB: "128" });
    // Half the heap taken at once, so that the calls fill the rest in seconds.
    const filler = storeFixtures(r.db).scratch<{ _id: number; payload: string }>("filler");
    const payload = "x".repeat(256 * 1024);
    for (let i = 0; i < 256; i += 8) await filler.insertMany(Array.from({ length: 8 }, (_, j) => ({ _id: i + j, payload })));
  });

  afterAll(async () => {
    await r?.db.close();
    await r?.server.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("refusals are 503 / UNAVAILABLE with Retry-After and words, reads answer, one log line a minute, no run without its entry", async () => {
    const calls = await loadUntilFull(r!);
    expectRefusedAsFull(calls);
    await expectWebhookRefusedInWords(r!);
    await expectReadsAnswer(r!);
    expectToldOncePerMinute(r!, calls);
    await expectRunsWithTheirEntries(r!, calls);
  }, 300_000);
});

describe("the file backend, its disk full", () => {
  const MOUNT_MB = 48;
  /** Left free once the server runs: the calls fill it. */
  const LEFT_FREE_MB = 16;
  let dataDir = "";
  let mounted = false;
  let r: Running | undefined;
  const filler = () => join(dataDir, "filler");

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "runhook-full-disk-"));
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=${MOUNT_MB}m`, "tmpfs", dataDir], { stdio: "pipe" });
    } catch (err) {
      const e = err as { stderr?: Buffer; message: string };
      throw new Error(
        `this test fills a ${MOUNT_MB} MB tmpfs that it mounts, which needs root (CI runs as root): mount failed: ${e.stderr?.toString().trim() || e.message}`,
      );
    }
    mounted = true;
    r = await start(dataDir, "running.json", { RUNHOOK_EMBEDDED: "file" });
    const free = statfsSync(dataDir);
    writeFileSync(filler(), Buffer.alloc(Math.max(0, free.bavail * free.bsize - LEFT_FREE_MB * 2 ** 20)));
  });

  afterAll(async () => {
    await r?.db.close();
    await r?.server.stop();
    if (mounted) execFileSync("umount", [dataDir]);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("refusals are 503 / UNAVAILABLE with Retry-After and words, reads answer, one log line a minute; writes are accepted again once space is freed", async () => {
    const calls = await loadUntilFull(r!);
    expectRefusedAsFull(calls);
    await expectWebhookRefusedInWords(r!);
    await expectReadsAnswer(r!);
    expectToldOncePerMinute(r!, calls);
    // Space freed: a webhook call is accepted again within seconds (the guard reads the free space every 20 ms).
    rmSync(filler());
    let status = 0;
    for (const deadline = Date.now() + 10_000; status !== 202 && Date.now() < deadline; await sleep(200)) {
      status = (
        await timedFetch("webhook", r!.server.baseUrl, r!.world.hookPath, {
          method: "POST",
          headers: { authorization: `Bearer ${r!.world.userToken}`, "content-type": "application/json" },
          body: JSON.stringify({ record_id: `r${records++}` }),
        })
      ).status as number;
    }
    expect(status).toBe(202);
    await expectReadsAnswer(r!);
    await expectRunsWithTheirEntries(r!, calls);
  }, 300_000);
});
