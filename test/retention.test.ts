// Durability settings and retention, on the real server and database: the write concern in
// force is logged at start (and a bad one refused); finished runs and log entries past their
// retention are removed by the sweep (MongoDB's TTL indexes on the embedded server), ongoing
// and fresh ones kept; the TTL indexes follow the settings; a cursor into removed entries is
// refused clearly, over /v1 and by `runhook logs tail`.
import { spawn } from "node:child_process";
import { storeFixtures } from "../src/store/index.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { startRunhook } from "../src/main.js";
import { Code } from "@connectrpc/connect";
import { errorBody, toConnectError } from "../src/rpc/errors.js";
import { ensureIndexes, MongoServerError, openStore, sweepExpired, ttlIndexes, type Store } from "../src/store/index.js";
import { activityStream } from "../src/store/logs.js";
import { apiClient, qs } from "./helpers/api.js";
import { ROOT, startServer, testDbName, testEnv, uriFor, type TestServer } from "./helpers/server.js";
import { adminClient, postHook } from "./helpers/webhook.js";
import { waitForRun } from "./helpers/runs.js";
import { createWorld, type World } from "../fixtures/world.js";

const DAY_MS = 86_400_000;
const daysFromNow = (days: number) => new Date(Date.now() + days * DAY_MS);

describe("write concern", () => {
  it("is majority and journaled by default, and the start-up log names it", async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split("\n")) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const config = loadConfig({ ...process.env, ...testEnv(testDbName()) });
    expect(config.writeConcern).toEqual({ w: "majority", journal: true });
    const rh = await startRunhook(config, { mode: "offline", logger: pino({ level: "info" }, sink) });
    try {
      const line = lines.find((l) => typeof l.msg === "string" && l.msg.startsWith("write concern in force"));
      expect(line?.msg).toBe("write concern in force: w=majority, journal=true");
      expect(line?.writeConcern).toEqual({ w: "majority", journal: true, wtimeoutMS: 10_000 });
      expect(rh.deps.store.writeConcern).toEqual({ w: "majority", journal: true, wtimeoutMS: 10_000 });
      // The embedded server takes writes under it (it accepts the write concern).
      await rh.deps.store.counters.next("write-concern-probe");
    } finally {
      await rh.stop();
    }
  });

  it("is configurable, and what the URI sets wins", async () => {
    const env = { ...process.env, ...testEnv(testDbName()) };
    expect(loadConfig({ ...env, RUNHOOK_WRITE_CONCERN: "2", RUNHOOK_WRITE_JOURNAL: "false" }).writeConcern).toEqual({ w: 2, journal: false });
    let store: Store | undefined;
    try {
      store = await openStore(`${uriFor(testDbName())}?w=1`, { writeConcern: { w: "majority", journal: true } });
      expect(store.writeConcern).toEqual({ w: 1, journal: true, wtimeoutMS: 10_000 });
    } finally {
      await store?.close();
    }
  });

  it("answers a write whose write concern timed out (a replica set without its majority) 503 unavailable", () => {
    const timedOut = new MongoServerError({ code: 64, codeName: "WriteConcernFailed", errmsg: "waiting for replication timed out" });
    expect(toConnectError(timedOut).code).toBe(Code.Unavailable);
  });

  it("refuses a write concern that acknowledges nothing, or that it cannot read", async () => {
    const env = { ...process.env, ...testEnv(testDbName()) };
    expect(() => loadConfig({ ...env, RUNHOOK_WRITE_CONCERN: "0" })).toThrow(ConfigError);
    expect(() => loadConfig({ ...env, RUNHOOK_WRITE_CONCERN: "all" })).toThrow(
      /RUNHOOK_WRITE_CONCERN must be "majority" or a number of members from 1 to 99, got "all"/,
    );
    expect(() => loadConfig({ ...env, MONGODB_URI: `${uriFor(testDbName())}?w=0` })).toThrow(/MONGODB_URI must not set w=0/);
    expect(() => loadConfig({ ...env, RUNHOOK_WRITE_JOURNAL: "maybe" })).toThrow(/RUNHOOK_WRITE_JOURNAL must be true or false/);
    expect(() => loadConfig({ ...env, RUNHOOK_RUN_RETENTION_DAYS: "0" })).toThrow(/RUNHOOK_RUN_RETENTION_DAYS must be between 1 and 36500/);
    // `runhook start` stops at once with the variable's name.
    const child = spawn(process.execPath, [join(ROOT, "bin/runhook.js"), "start"], {
      cwd: ROOT,
      env: { ...env, RUNHOOK_WRITE_CONCERN: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(code).not.toBe(0);
    expect(err).toContain('RUNHOOK_WRITE_CONCERN must be "majority" or a number of members from 1 to 99, got "0"');
  });
});

describe("retention", () => {
  let server: TestServer;
  let quick: World;
  let slow: World;
  const tmp = mkdtempSync(join(tmpdir(), "runhook-retention-"));
  beforeAll(async () => {
    server = await startServer();
    quick = await createWorld(server);
    slow = await createWorld(server, { steps: [{ type: "wait", seconds: 3600 }] });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  const trigger = async (w: World, recordId: string) => {
    const url = (await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId })).workflow!.webhook!.url;
    const a = await postHook(server.baseUrl + new URL(url).pathname, w.userToken, { record_id: recordId });
    expect(a.status).toBe(202);
    return a.body.runId!;
  };
  const sweep = (now: Date) => sweepExpired(server.deps.store, server.deps.config.retention, now);
  const activity = (w: World) => `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
  /** The runs a page of the activity log names (published items name a run in their workflow). */
  const runsOf = (page: { data: { workflow?: { runId: string } }[] }) => page.data.map((e) => e.workflow?.runId);
  /** The tail's paging: oldest first, nextCursor always. */
  const tail = { order: "asc" };

  it("declares the TTL indexes with the configured expiry, and follows a changed setting", async () => {
    const db = storeFixtures(server.deps.store);
    const ttlOf = async () => {
      const found: Record<string, number[]> = {};
      for (const t of ttlIndexes()) {
        const idx = (await db[t.collection].listIndexes().toArray()).filter(
          (i) => i.expireAfterSeconds !== undefined && Object.keys(i.key as object).join() === t.field,
        );
        found[`${t.collection}.${t.field}`] = idx.map((i) => i.expireAfterSeconds as number);
      }
      return found;
    };
    expect(await ttlOf()).toEqual({
      "rateLimits.expiresAt": [0],
      "consoleSessions.expiresAt": [0],
      "idempotencyKeys.expiresAt": [0],
      "runs.finishedAt": [30 * 86_400],
      "runBatches.finishedAt": [30 * 86_400],
      "runBatchItems.at": [30 * 86_400],
      "activityLogs.timestamp": [400 * 86_400],
      "adminLogs.timestamp": [400 * 86_400],
      "logDigests.timestamp": [400 * 86_400],
    });
    // A restart with other settings: the same indexes, once each, with the new expiry.
    await ensureIndexes(server.deps.store, { runDays: 7, logDays: 90 });
    expect(await ttlOf()).toEqual({
      "rateLimits.expiresAt": [0],
      "consoleSessions.expiresAt": [0],
      "idempotencyKeys.expiresAt": [0],
      "runs.finishedAt": [7 * 86_400],
      "runBatches.finishedAt": [7 * 86_400],
      "runBatchItems.at": [7 * 86_400],
      "activityLogs.timestamp": [90 * 86_400],
      "adminLogs.timestamp": [90 * 86_400],
      "logDigests.timestamp": [90 * 86_400],
    });
    await ensureIndexes(server.deps.store, server.deps.config.retention);
    expect((await ttlOf())["runs.finishedAt"]).toEqual([30 * 86_400]);
    // Every TTL index in the database is one of ttlIndexes(), which the sweep reads.
    const declared = new Set(ttlIndexes().map((t) => `${db.collectionNameOf(t.collection)}.${t.field}`));
    for (const [name, indexes] of await db.indexesByCollection()) {
      for (const i of indexes) {
        if (i.expireAfterSeconds !== undefined) expect(declared).toContain(`${name}.${Object.keys(i.key as object).join()}`);
      }
    }
  });

  it("removes finished runs after 30 days and log entries after 400, never an ongoing run", async () => {
    const finished = await trigger(quick, quick.recordIds[0]!);
    await waitForRun(server.deps.store, finished);
    const ongoing = await trigger(slow, slow.recordIds[0]!);
    await waitForRun(server.deps.store, ongoing, (r) => r.state === "RUNNING");
    await adminClient(server.baseUrl, quick.adminToken).setWebhookRateLimit({ workflowId: quick.workflowId, rateLimitPerMinute: 120 });
    const api = apiClient(server.gateway, quick.apiToken);
    const adminLogs = async () => (await api.get(`/v1/project/${quick.projectName}/admin-logs`)).body.data as unknown[];
    const runStatus = async (id: string) => (await api.get(`/v1/runs/${id}`)).status;
    expect(await runStatus(finished)).toBe(200);
    expect((await adminLogs()).length).toBeGreaterThan(0); // the world's making, and the change above

    // Within the retention, nothing goes.
    await sweep(daysFromNow(29));
    expect(await runStatus(finished)).toBe(200);
    // Past it, the finished run goes; the ongoing one (finished for no one) stays, its log too.
    const removed = await sweep(daysFromNow(31));
    expect(removed.runs).toBeGreaterThanOrEqual(1);
    expect(await runStatus(finished)).toBe(404);
    expect((await server.deps.store.runs.get(ongoing))?.state).toBe("RUNNING");
    expect(runsOf((await api.get(activity(quick))).body)).toContain(finished);
    // The logs go after 400 days: the activity log (entries and placeholders) and the admin log.
    await sweep(daysFromNow(401));
    expect((await server.deps.store.runs.get(ongoing))?.state).toBe("RUNNING");
    expect((await api.get(activity(quick))).body.data).toEqual([]);
    expect(await adminLogs()).toEqual([]);
    // What comes later is listed as usual.
    const fresh = await trigger(quick, quick.recordIds[1]!);
    await waitForRun(server.deps.store, fresh);
    await sweep(daysFromNow(1));
    expect(await runStatus(fresh)).toBe(200);
    expect(runsOf((await api.get(activity(quick))).body)).toContain(fresh);
  });

  it("refuses a cursor into removed entries (400 failed_precondition), over /v1 and in `runhook logs tail`; a caught-up cursor goes on", async () => {
    const w = await createWorld(server);
    const api = apiClient(server.gateway, w.apiToken);
    for (const r of w.recordIds.slice(0, 2)) await waitForRun(server.deps.store, await trigger(w, r));
    // A cursor after the first entry (its successors not yet passed by any reader), one
    // mid-way (below the watermark of a full read), one of a filtered list, and one caught up.
    const early = (await api.get(activity(w) + qs({ ...tail, limit: 1 }))).body.nextCursor as string;
    const second = (await api.get(activity(w) + qs({ ...tail, limit: 1, cursor: early }))).body.nextCursor as string;
    const filter = { ...tail, action: "triggerWorkflow" };
    const filtered = (await api.get(activity(w) + qs({ ...filter, limit: 1 }))).body.nextCursor as string;
    const all = await api.get(activity(w) + qs({ ...tail, limit: 100 }));
    expect(all.body.data.length).toBeGreaterThanOrEqual(4);
    const caughtUp = all.body.nextCursor as string;

    await sweep(daysFromNow(401));
    const later = await trigger(w, w.recordIds[2]!);

    for (const [cursor, more] of [
      [early, tail],
      [second, tail],
      [filtered, filter],
    ] as const) {
      const r = await api.get(activity(w) + qs({ ...more, cursor }));
      expect(r.status).toBe(400);
      expect(r.body).toEqual(
        errorBody(
          "failed_precondition",
          "the cursor points into activity log entries already removed by retention (entries are kept 400 days): start again without a cursor, or from a time (createdAt.gte; gRPC: from_time)",
        ),
      );
    }
    const caught = await api.get(activity(w) + qs({ ...tail, cursor: caughtUp }));
    expect(caught.status).toBe(200);
    expect(runsOf(caught.body)).toContain(later);
    // Started again: the oldest entry kept is the later run's trigger; newest first (no cursor), it is the last.
    const fromStart = await api.get(activity(w) + qs(tail));
    expect(fromStart.body.data[0]).toMatchObject({ action: "triggerWorkflow", workflow: { runId: later } });
    expect((await api.get(activity(w))).body.data.at(-1)).toEqual(fromStart.body.data[0]);

    // `runhook logs tail` on such a cursor stops with the reason and the way out (exit 4). (--limit: the
    // published lists take at most 100 a page.)
    const cursorFile = join(tmp, "stale.cursor");
    writeFileSync(cursorFile, `${early}\n`);
    const child = spawn(
      process.execPath,
      [
        join(ROOT, "bin/runhook.js"),
        "logs",
        "tail",
        "--project",
        w.projectName,
        "--environment",
        w.environmentName,
        "--cursor-file",
        cursorFile,
        "--limit",
        "100",
      ],
      {
        cwd: tmp,
        env: { ...process.env, RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: w.apiToken },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    clearTimeout(timer);
    expect(code).toBe(4);
    expect(err).toContain("400 failed_precondition: the cursor points into activity log entries already removed by retention");
    expect(err).toContain(`delete ${cursorFile} to follow from the oldest entry kept`);
  });

  it("does not let a hole (a number taken, never written) hold a tail, nor call it removed", async () => {
    const w = await createWorld(server);
    const api = apiClient(server.gateway, w.apiToken);
    await trigger(w, w.recordIds[0]!);
    const caughtUp = (await api.get(activity(w) + qs({ ...tail, limit: 100 }))).body.nextCursor as string;
    // A writer that took its number and died before writing its entry.
    await server.deps.store.counters.next(activityStream(w.environmentId));
    const after = await trigger(w, w.recordIds[1]!);
    // The page comes (after the readers' short grace, the number is filled with a placeholder).
    const r = await api.get(activity(w) + qs({ ...tail, cursor: caughtUp }));
    expect(r.status).toBe(200);
    expect(runsOf(r.body)).toContain(after);
  });

  it("does not call a hole at the first position removed under a cursor issued on an empty log", async () => {
    const w = await createWorld(server);
    const api = apiClient(server.gateway, w.apiToken);
    const empty = await api.get(activity(w) + qs(tail));
    expect(empty.body.data).toEqual([]);
    const start = empty.body.nextCursor as string;
    // Position 1 taken by a writer that never writes it; the next entries land at 2 and on.
    await server.deps.store.counters.next(activityStream(w.environmentId));
    const run = await trigger(w, w.recordIds[0]!);
    const r = await api.get(activity(w) + qs({ ...tail, cursor: start }));
    expect(r.status).toBe(200);
    expect(runsOf(r.body)).toContain(run);
  });
});
