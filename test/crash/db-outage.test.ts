// A database outage under load: the embedded database (persistent backend, its own data dir
// and port) is stopped cleanly for 10 s while a bounded loop of webhook, /v1 and native gRPC
// calls runs against a server process, then started again on the same port with its data.
// Callers get 503 `unavailable` with Retry-After (gRPC: UNAVAILABLE with retry-after
// metadata) within the database timeout, never a hang; /readyz and gRPC health follow the
// database; nothing crashes; calls and executors are back within 2 s; every run finishes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { loadConfig } from "../../src/config.js";
import { startEmbeddedServer, type EmbeddedServer } from "../../src/embedded/index.js";
import { ensureIndexes, openStore, storeFixtures, type Store } from "../../src/store/index.js";
import type { RunDoc } from "../../src/store/types.js";
import { spawnServer, testAppOn, testDbName, type ChildServer } from "../helpers/server.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { adminClient, grpcTrigger, grpcUnary, sleep } from "../helpers/webhook.js";
import { FINISHED } from "../helpers/runs.js";
import { freePort, ms, tally, timedFetch, type Call, type Logs } from "../helpers/load.js";

const OUTAGE_MS = 10_000;
/** RUNHOOK_DB_TIMEOUT_MS of the server under test: how long a call waits for the database before its 503. */
const DB_TIMEOUT_MS = 2000;
/** Longer than the outage: runs cut off by it must be resumed by their own executor, not after their lease expired. */
const LEASE_MS = 30_000;
const RECORDS = 12;
/** A call without an answer after this long counts as hanging. */
const HANG_MS = 15_000;

let dataDir: string;
let port: number;
let embedded: EmbeddedServer | undefined;
let db: Store;
let dbName: string;
let server: ChildServer;
let logs: Logs;
let w: World;
let hookUrl: string;
let publicUrl: string;
const cacheDir = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: tmpdir() }).cacheDir;

/** The test's own database: persistent (H2 file) backend in `dataDir`, always on `port`. */
function startDatabase(): Promise<EmbeddedServer> {
  return startEmbeddedServer({ dataDir, cacheDir, persistent: true, port, progress: () => {} });
}
const uri = () => `mongodb://127.0.0.1:${port}/${dbName}`;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "runhook-outage-"));
  port = await freePort();
  embedded = await startDatabase();
  dbName = testDbName();
  db = await openStore(uri(), { dbName, timeoutMs: 30_000 });
  await ensureIndexes(db);
  const app = testAppOn(db);
  app.stop(); // its services make the world; the test watches the database itself
  w = await createWorld(app, {
    // The rate limits are not what this test is about.
    rateLimitPerMinute: 1_000_000,
    records: Array.from({ length: RECORDS }, (_, i) => ({ id: `r${i}`, status: "new" })),
    // Data steps on both sides of a wait: some runs are cut off mid-step by the outage.
    steps: [
      { type: "load_record" },
      { type: "wait", seconds: 1 },
      { type: "update_record", set: { status: "done" } },
      { type: "add_note", content: "<p>ran</p>", title: "" },
    ],
  });
  server = await spawnServer(dbName, {
    env: {
      MONGODB_URI: uri(),
      RUNHOOK_DB_TIMEOUT_MS: String(DB_TIMEOUT_MS),
      RUNHOOK_EXECUTOR_LEASE_MS: String(LEASE_MS),
    },
  });
  logs = server.logs;
  publicUrl = (await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId })).workflow!.webhook!.url;
  hookUrl = new URL(publicUrl).pathname;
});

afterAll(async () => {
  await server?.kill();
  await db?.close().catch(() => {});
  await embedded?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

interface Probe {
  at: number;
  readyz: number | "error";
  grpc: string;
  connect: string;
}

const statusName = (s: HealthCheckResponse_ServingStatus) => HealthCheckResponse_ServingStatus[s];

describe("database outage under load", () => {
  it("503 unavailable with Retry-After, health follows the database, nothing crashes, every run finishes", async () => {
    const calls: Call[] = [];
    const probes: Probe[] = [];
    const runIds = new Set<string>();
    let stop = false;

    const hookLoop = async (lane: number) => {
      for (let k = 0; !stop; k++) {
        const record = `r${(k * 4 + lane) % RECORDS}`;
        const c = await timedFetch("webhook", server.baseUrl, hookUrl, {
          method: "POST",
          headers: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
          body: JSON.stringify({ record_id: record }),
          hangMs: HANG_MS,
        });
        if (c.status === 202 && c.runId) runIds.add(c.runId);
        calls.push(c);
        await sleep(20);
      }
    };
    const v1Loop = async () => {
      for (let k = 0; !stop; k++) {
        const last = [...runIds].at(-1);
        const c =
          k % 2 === 0 || !last
            ? await timedFetch("v1", server.baseUrl, `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs?limit=5&order=desc`, {
                headers: { authorization: `Bearer ${w.apiToken}` },
                hangMs: HANG_MS,
              })
            : await timedFetch("v1", server.baseUrl, `/v1/runs/${last}`, { headers: { authorization: `Bearer ${w.userToken}` }, hangMs: HANG_MS });
        calls.push(c);
        await sleep(20);
      }
    };
    const grpcLoop = async () => {
      for (let k = 0; !stop; k++) {
        const start = Date.now();
        const r = await grpcTrigger(server.grpcAddr, publicUrl, `r${(k * 5) % RECORDS}`, w.userToken, { deadlineMs: HANG_MS });
        const c: Call = { kind: "grpc", target: server.grpcAddr, start, end: Date.now(), status: r.error ? r.error.code : 0 };
        if (r.error?.code === grpc.status.DEADLINE_EXCEEDED) c.status = "hang";
        else if (r.error) {
          c.code = grpc.status[r.error.code];
          c.retryAfter = (r.error.metadata.get("retry-after")[0] as string | undefined) ?? null;
        } else if (r.value?.runId) runIds.add(r.value.runId);
        calls.push(c);
        await sleep(100);
      }
    };
    const connectHealth = createClient(Health, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const probeLoop = async () => {
      while (!stop) {
        const at = Date.now();
        const [readyz, native, viaGateway] = await Promise.all([
          fetch(`${server.baseUrl}/readyz`, { signal: AbortSignal.timeout(HANG_MS) }).then(
            (r) => r.status,
            () => "error" as const,
          ),
          grpcUnary(server.grpcAddr, "/grpc.health.v1.Health/Check", HealthCheckRequestSchema, HealthCheckResponseSchema, { service: "" }, undefined, {
            deadlineMs: HANG_MS,
          }).then((r) => (r.error ? `error ${r.error.code}` : statusName(r.value!.status))),
          connectHealth.check({ service: "" }, { timeoutMs: HANG_MS }).then(
            (r) => statusName(r.status),
            (e: Error) => `error ${e.message}`,
          ),
        ]);
        probes.push({ at, readyz, grpc: native, connect: viaGateway });
        await sleep(200);
      }
    };

    const t0 = Date.now();
    const loops = [hookLoop(0), hookLoop(1), hookLoop(2), hookLoop(3), v1Loop(), grpcLoop(), probeLoop()];
    await sleep(3000);

    const tStop = Date.now();
    await embedded!.stop();
    embedded = undefined;
    const tStopped = Date.now();
    await sleep(tStop + OUTAGE_MS - Date.now());
    const tRestart = Date.now();
    embedded = await startDatabase();
    const tUp = Date.now(); // listening again, with the data it had
    // The database is back when it answers queries again (a fresh connection reading a document
    // of the test's world): from then on, how fast calls succeed is the service's doing.
    let tAnswering = 0;
    for (const giveUp = Date.now() + 20_000; ; ) {
      if (Date.now() > giveUp) throw new Error("the restarted database does not answer, or lost the test's data");
      let probe: Store | undefined;
      try {
        probe = await openStore(uri(), { dbName, timeoutMs: 1000 });
        if (await probe.directory.workflows.get(w.workflowId)) {
          tAnswering = Date.now();
          break;
        }
      } catch {
        await sleep(20);
      } finally {
        await probe?.close().catch(() => {});
      }
    }
    await sleep(5000);
    stop = true;
    await Promise.all(loops);
    const tLoadEnd = Date.now();

    // Every run accepted before, during (none) or after the outage finishes.
    let runs: RunDoc[] = [];
    const finishDeadline = Date.now() + 30_000;
    while (Date.now() < finishDeadline) {
      runs = await storeFixtures(db).runs.find({ workflowId: w.workflowId }).toArray();
      if (runs.every((r) => FINISHED.includes(r.state))) break;
      await sleep(200);
    }
    const tAllFinished = Math.max(...runs.map((r) => r.finishedAt?.getTime() ?? Infinity));

    // ---- the figures
    const during = calls.filter((c) => c.start >= tStopped && c.end <= tUp);
    const straddling = calls.filter((c) => c.start < tUp && c.end > tStop && !during.includes(c));
    const after = calls.filter((c) => c.start >= tUp);
    const answered = (c: Call) =>
      c.kind === "grpc" ? c.status === grpc.status.OK || c.status === grpc.status.ALREADY_EXISTS : typeof c.status === "number" && c.status < 500;
    const firstSuccess = Math.min(...calls.filter((c) => c.end > tUp && answered(c)).map((c) => c.end));
    const preOutageRuns = runs.filter((r) => r.createdAt.getTime() < tStop);
    const stepStartsAfter = runs.flatMap((r) => r.steps.map((s) => s.startedAt?.getTime() ?? 0)).filter((t) => t >= tUp);
    const firstClaimOrStepAfter = Math.min(...stepStartsAfter, ...runs.map((r) => r.startedAt?.getTime() ?? Infinity).filter((t) => t >= tUp));
    const resumedAttempts = runs.filter((r) => r.steps.some((s) => (s.attempts ?? 0) > 1)).length;
    const downProbes = probes.filter((p) => p.at > tStop && p.at < tUp);
    const firstNotServing = probes.find((p) => p.at > tStop && p.grpc === "NOT_SERVING");
    const firstServingAgain = probes.find((p) => p.at > tUp && p.grpc === "SERVING" && p.connect === "SERVING" && p.readyz === 200);
    const lines = logs.lines();
    const count = (msg: string) => lines.filter((l) => typeof l.msg === "string" && l.msg.startsWith(msg)).length;
    const figures = {
      calls: calls.length,
      callsBeforeOutage: calls.filter((c) => c.end < tStop).length,
      callsDuringOutage: during.length,
      duringStatuses: tally(during, (c) => `${c.kind} ${c.status} ${c.code ?? ""}`.trim()),
      duringMaxLatencyMs: Math.max(0, ...during.map(ms)),
      straddlingStatuses: tally(straddling, (c) => `${c.kind} ${c.status} ${c.code ?? ""}`.trim()),
      maxLatencyMs: Math.max(...calls.map(ms)),
      afterStatuses: tally(after, (c) => `${c.kind} ${c.status}`),
      stopMs: tStopped - tStop,
      restartMs: tUp - tRestart,
      restartToAnsweringMs: tAnswering - tUp,
      restartToFirstSuccessMs: firstSuccess - tUp,
      answeringToFirstSuccessMs: firstSuccess - tAnswering,
      restartToFirstStepStartMs: firstClaimOrStepAfter - tUp,
      answeringToFirstStepStartMs: firstClaimOrStepAfter - tAnswering,
      stopToNotServingMs: firstNotServing ? firstNotServing.at - tStop : null,
      restartToServingMs: firstServingAgain ? firstServingAgain.at - tUp : null,
      probesDuringOutage: tally(downProbes, (p) => `readyz ${p.readyz} grpc ${p.grpc} connect ${p.connect}`),
      runs: runs.length,
      runStates: tally(runs, (r) => r.state),
      runsWithARetriedStep: resumedAttempts,
      runsAcceptedBeforeOutage: preOutageRuns.length,
      restartToPreOutageRunsFinishedMs: Math.max(...preOutageRuns.map((r) => r.finishedAt?.getTime() ?? Infinity)) - tUp,
      restartToAllRunsFinishedMs: tAllFinished - tUp,
      loadEndToAllRunsFinishedMs: tAllFinished - tLoadEnd,
      driverClientReplaced: count("the database driver's server monitor was stuck"),
      errorLogLines: tally(
        lines.filter((l) => Number(l.level) >= 50),
        (l) => String(l.msg),
      ),
      testMs: Date.now() - t0,
    };
    console.log(`[db-outage] ${JSON.stringify(figures, null, 2)}`);

    // ---- no process crashed, and the outage was logged once (and its end)
    expect(server.child.exitCode).toBeNull();
    expect(server.child.signalCode).toBeNull();
    expect(count("database unreachable: executors pause claiming")).toBe(1);
    expect(count("database reachable again: executors claim and run again")).toBe(1);
    expect(count("database unreachable: calls answer 503")).toBe(1);
    expect(count("database reachable again: serving")).toBe(1);
    expect(
      lines.filter(
        (l) =>
          l.msg === "unhandled error" || l.msg === "webhook trigger failed" || l.msg === "unhandled error in an RPC" || l.msg === "executor failed on a run",
      ),
    ).toEqual([]);
    expect(logs.raw()).not.toMatch(/Unhandled|uncaught/i);

    // ---- during the outage: 503 unavailable with Retry-After (gRPC: UNAVAILABLE + retry-after), never a hang
    expect(during.length).toBeGreaterThan(10);
    for (const c of during) {
      if (c.kind === "grpc") expect({ status: c.status, retryAfter: c.retryAfter }).toEqual({ status: grpc.status.UNAVAILABLE, retryAfter: "5" });
      else
        expect({ kind: c.kind, status: c.status, code: c.code, retryAfter: c.retryAfter }).toEqual({
          kind: c.kind,
          status: 503,
          code: "unavailable",
          retryAfter: "5",
        });
    }
    expect(new Set(during.map((c) => c.kind))).toEqual(new Set(["webhook", "v1", "grpc"]));
    // Calls cut by the stop or waiting for the restart answered too: never a hang (no answer
    // within HANG_MS, half the request timeout), never a 500.
    expect(
      calls.filter((c) => c.status === "hang" || c.status === "error" || c.status === 500).map((c) => `${c.kind} ${c.status} ${ms(c)} ms ${c.detail ?? ""}`),
    ).toEqual([]);
    // A call made while the database is away is refused after one wait of RUNHOOK_DB_TIMEOUT_MS
    // for it (plus a loaded machine's scheduling).
    expect(during.filter((c) => ms(c) >= DB_TIMEOUT_MS + 2000).map((c) => `${c.kind} ${ms(c)} ms`)).toEqual([]);

    // ---- health: NOT_SERVING / 503 while the database is away, SERVING / 200 before and after
    expect(probes.filter((p) => p.at < tStop - 500).every((p) => p.readyz === 200 && p.grpc === "SERVING" && p.connect === "SERVING")).toBe(true);
    expect(downProbes.some((p) => p.readyz === 503 && p.grpc === "NOT_SERVING" && p.connect === "NOT_SERVING")).toBe(true);
    expect(firstServingAgain).toBeDefined();
    const last = probes.at(-1)!;
    expect(last).toMatchObject({ readyz: 200, grpc: "SERVING", connect: "SERVING" });

    // ---- back within 2 s of the database answering: no call that starts then is refused, and
    // executors claim and run steps again (how long the first calls take on a loaded machine is
    // a figure above, not a test)
    expect(Number.isFinite(firstSuccess)).toBe(true);
    expect(after.filter((c) => c.start >= tAnswering + 2000 && !answered(c)).map((c) => `${c.kind} ${c.status} at +${c.start - tAnswering} ms`)).toEqual([]);
    expect(stepStartsAfter.length).toBeGreaterThan(0);

    // ---- every accepted run (known by its 202, or by its document) is finished, and succeeded
    const byId = new Map(runs.map((r) => [r._id, r]));
    expect([...runIds].filter((id) => !byId.has(id))).toEqual([]);
    expect(runs.filter((r) => r.state !== "SUCCEEDED").map((r) => `${r._id} ${r.state} ${r.error}`)).toEqual([]);
    // Data from before the outage survived the restart (the persistent backend), and the runs
    // the outage cut off were resumed by their own executor once the database was back, long
    // before their lease (LEASE_MS) would have let another executor take them over.
    expect(preOutageRuns.length).toBeGreaterThan(0);
    expect(figures.restartToPreOutageRunsFinishedMs).toBeLessThan(LEASE_MS);
  }, 90_000);
});
