// Crash under load: two server processes and one worker share runs through one database while
// webhook calls go to both servers; mid-load one server is killed with SIGKILL, then the
// worker. Every accepted run exists and finishes; a killed executor's runs are taken over once
// their lease expires; no (workflow, record) ever has two ongoing runs; the webhook rate limit
// stays exact across the servers and the crash.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storeFixtures, type StoreFixtures } from "../../src/store/index.js";
import type { RunDoc } from "../../src/store/types.js";
import { openTestApp, spawnServer, testDbName, type ChildServer } from "../helpers/server.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { adminClient, awaitFreshWindow, sleep } from "../helpers/webhook.js";
import { ms, tally, timedFetch, type Call } from "../helpers/load.js";

const LEASE_MS = 2000;
const POLL_MS = 100;
/** Requests per minute of the rate-limited webhook: reached during the load. */
const LIMIT = 40;
const RECORDS = 10;
/** The load, from its start: server A is killed, then the worker. */
const KILL_SERVER_AT = 4000;
const KILL_WORKER_AT = 8000;
/** A loaded machine's scheduling on top of lease + poll: how late a takeover may come. */
const SLACK_MS = 2000;
/** How far apart two processes' "finished" and "started" times of consecutive runs may be out of order. */
const CLOCK_SLACK_MS = 1000;

let dbName: string;
let app: Awaited<ReturnType<typeof openTestApp>> | undefined;
let db: StoreFixtures;
let a: ChildServer;
let b: ChildServer;
let worker: ChildServer;
let main: World;
let limited: World;
let mainUrl: string;
let limitedUrl: string;

const env = { RUNHOOK_EXECUTOR_LEASE_MS: String(LEASE_MS), RUNHOOK_EXECUTOR_POLL_MS: String(POLL_MS) };
const steps = [
  { type: "load_record" },
  { type: "wait", seconds: 1 },
  { type: "update_record", set: { status: "done" } },
  { type: "add_note", content: "<p>ran</p>", title: "" },
] as const;

beforeAll(async () => {
  dbName = testDbName();
  app = await openTestApp(dbName);
  app.stop(); // its services make the worlds; nothing here watches the database
  db = storeFixtures(app.deps.store);
  const records = Array.from({ length: RECORDS }, (_, i) => ({ id: `r${i}`, status: "new" }));
  main = await createWorld(app, { records, steps: [...steps], rateLimitPerMinute: 1_000_000 });
  limited = await createWorld(app, { records, steps: [...steps], rateLimitPerMinute: LIMIT });
  [a, b, worker] = await Promise.all([spawnServer(dbName, { env }), spawnServer(dbName, { env }), spawnServer(dbName, { mode: "worker", env })]);
  const path = async (w: World) =>
    new URL((await adminClient(a.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId })).workflow!.webhook!.url).pathname;
  [mainUrl, limitedUrl] = [await path(main), await path(limited)];
});

afterAll(async () => {
  await Promise.allSettled([a, b, worker].filter(Boolean).map((c) => c.kill()));
  await app?.deps.store.close();
});

const ongoing = (r: RunDoc) => r.state === "QUEUED" || r.state === "RUNNING";
const pidOf = (owner: string | undefined) => owner?.split(":")[1];

describe("crash under load", () => {
  it("kill -9 of a server, then of the worker: every run finishes, one ongoing run per record, the rate limit stays exact", async () => {
    const workflows = [main.workflowId, limited.workflowId];
    // The whole load lands in one rate-limit window.
    await awaitFreshWindow(28_000);
    const windowEnd = Date.now() - (Date.now() % 60_000) + 60_000;
    const loadStart = Date.now();
    const calls: Call[] = [];
    const runIds = new Set<string>();
    const dead = new Set<ChildServer>();
    const live = () => [a, b].filter((s) => !dead.has(s));
    let stop = false;

    const lane = async (w: World, url: string, kind: string, i: number, pauseMs: number) => {
      for (let k = 0; !stop; k++) {
        const servers = live();
        const server = servers[k % servers.length]!;
        const c = await timedFetch(kind, server.baseUrl, url, {
          method: "POST",
          headers: { authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
          body: JSON.stringify({ record_id: `r${(k * 3 + i) % RECORDS}` }),
          hangMs: 15_000,
        });
        if (c.status === 202 && c.runId) runIds.add(c.runId);
        calls.push(c);
        await sleep(pauseMs);
      }
    };

    // Sampling the runs: never two ongoing runs of one (workflow, record); every ongoing run holds
    // its slot; no RUNNING run's lease stays expired for longer than a poll (plus slack).
    const violations: string[] = [];
    let samples = 0;
    let maxOverdueMs = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const now = Date.now();
        const runs = await db.runs.find({ workflowId: { $in: workflows }, state: { $in: ["QUEUED", "RUNNING"] } }).toArray();
        samples++;
        const seen = new Map<string, string>();
        for (const r of runs) {
          const key = `${r.workflowId}|${r.recordId}`;
          if (seen.has(key)) violations.push(`two ongoing runs on ${key}: ${seen.get(key)} and ${r._id}`);
          seen.set(key, r._id);
          if (r.activeKey !== key) violations.push(`ongoing run ${r._id} does not hold its slot (activeKey ${r.activeKey})`);
          if (r.state === "RUNNING" && r.lease) maxOverdueMs = Math.max(maxOverdueMs, now - r.lease.expiresAt.getTime());
        }
        await sleep(100);
      }
    })();

    /** Kills a process and follows the runs it held: when each was taken over (new owner) or finished. */
    const takeovers: Array<{ who: string; runs: number; maxMs: number }> = [];
    const heldBy = async (pid: string) =>
      (await db.runs.find({ workflowId: { $in: workflows }, state: "RUNNING" }).toArray()).filter((r) => pidOf(r.lease?.owner) === pid);
    const kill = async (c: ChildServer, who: string) => {
      const pid = String(c.child.pid);
      dead.add(c);
      // A run holds a lease only between its steps' writes (a wait holds none), a few ms each, so
      // a kill at a fixed instant mostly cuts off none. Watch the runs until the process is seen
      // holding one, freeze it at once (its writes already sent land) and kill it if it still
      // holds one frozen; else let it go on and watch again. Bounded, so the load's window holds.
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
        if ((await heldBy(pid)).length === 0) continue;
        c.child.kill("SIGSTOP");
        await sleep(100);
        if ((await heldBy(pid)).length > 0) break;
        c.child.kill("SIGCONT");
      }
      await c.kill();
      const at = Date.now();
      const held = await heldBy(pid);
      let maxMs = 0;
      await Promise.all(
        held.map(async (r) => {
          for (;;) {
            const cur = (await db.runs.findOne({ _id: r._id }))!;
            if (!ongoing(cur) || pidOf(cur.lease?.owner) !== pid) {
              maxMs = Math.max(maxMs, Date.now() - at);
              return;
            }
            if (Date.now() - at > 30_000) return void violations.push(`run ${r._id} of the killed ${who} not taken over in 30 s`);
            await sleep(50);
          }
        }),
      );
      takeovers.push({ who, runs: held.length, maxMs });
    };

    const lanes = [0, 1, 2, 3].map((i) => lane(main, mainUrl, "main", i, 30));
    const limitedLanes = [0, 1].map((i) => lane(limited, limitedUrl, "limited", i, 250));
    await sleep(KILL_SERVER_AT);
    const tKillServer = Date.now();
    const serverTakeover = kill(a, "server");
    await sleep(loadStart + KILL_WORKER_AT - Date.now());
    const tKillWorker = Date.now();
    const workerTakeover = kill(worker, "worker");
    await Promise.all([serverTakeover, workerTakeover]);
    // Go on until the limited webhook has refused for a while, staying inside the window.
    const loadBound = windowEnd - 4000;
    while (Date.now() < loadBound && !calls.some((c) => c.kind === "limited" && c.status === 429 && c.start > tKillWorker)) await sleep(200);
    await sleep(Math.min(2000, Math.max(0, loadBound - Date.now())));
    stop = true;
    await Promise.all([...lanes, ...limitedLanes]);
    const loadEnd = Date.now();

    // Every run finishes (a run of a killed process once its lease expired).
    let runs: RunDoc[] = [];
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(200)) {
      runs = await db.runs.find({ workflowId: { $in: workflows } }).toArray();
      if (!runs.some(ongoing)) break;
    }
    const tAllFinished = Date.now();
    sampling = false;
    await sampler;

    const limitedCalls = calls.filter((c) => c.kind === "limited");
    const accepted = limitedCalls.filter((c) => c.status === 202 || c.status === 409);
    const lost = limitedCalls.filter((c) => c.status === "error");
    const windowStart = windowEnd - 60_000;
    const counted = (await db.rateLimits.findOne({ _id: `webhook:${limited.workflowId}:${windowStart}` }))?.count ?? 0;
    const killed = [String(a.child.pid), String(worker.child.pid)];
    const figures = {
      calls: calls.length,
      statuses: tally(calls, (c) => `${c.kind} ${c.status}`),
      maxLatencyMs: Math.max(...calls.map(ms)),
      killServerAtMs: tKillServer - loadStart,
      killWorkerAtMs: tKillWorker - loadStart,
      takeovers,
      maxLeaseOverdueMs: maxOverdueMs,
      samples,
      runs: runs.length,
      runStates: tally(runs, (r) => r.state),
      runsTouchedByKilledProcesses: runs.filter((r) => r.steps.some((s) => killed.includes(pidOf(s.executor) ?? ""))).length,
      runsWithARetriedStep: runs.filter((r) => r.steps.some((s) => (s.attempts ?? 0) > 1)).length,
      limit: LIMIT,
      limitedAccepted: accepted.length,
      limitedRefused429: limitedCalls.filter((c) => c.status === 429).length,
      limitedLost: lost.length,
      rateLimitCounted: counted,
      loadMs: loadEnd - loadStart,
      loadEndToAllFinishedMs: tAllFinished - loadEnd,
    };
    console.log(`[crash-under-load] ${JSON.stringify(figures, null, 2)}`);

    // The surviving server never crashed.
    expect(b.child.exitCode).toBeNull();
    const lines = [a, b, worker].flatMap((c) => c.logs.lines());
    expect(
      lines
        .filter(
          (l) =>
            l.msg === "unhandled error" || l.msg === "webhook trigger failed" || l.msg === "unhandled error in an RPC" || l.msg === "executor failed on a run",
        )
        .map((l) => JSON.stringify(l).slice(0, 300)),
    ).toEqual([]);

    // Every 202'd run exists and finished — and succeeded, even those cut off by a kill.
    const byId = new Map(runs.map((r) => [r._id, r]));
    expect([...runIds].filter((id) => !byId.has(id))).toEqual([]);
    expect(runs.filter((r) => r.state !== "SUCCEEDED").map((r) => `${r._id} ${r.state} ${r.error}`)).toEqual([]);
    // Some runs were under way in a killed process, and were taken over.
    expect(takeovers.reduce((n, t) => n + t.runs, 0)).toBeGreaterThan(0);

    // No run stayed ongoing past lease + poll after the kills (sampled, and run by run).
    expect(violations).toEqual([]);
    expect(maxOverdueMs).toBeLessThan(POLL_MS + SLACK_MS);
    for (const t of takeovers) expect(t.maxMs, t.who).toBeLessThan(LEASE_MS + POLL_MS + SLACK_MS);

    // One ongoing run per (workflow, record) over the whole history: the unique index that
    // enforces it is there, and each run started after the previous one on its record had
    // finished. (Both times are taken by the processes just before their update is sent, so
    // they may be out of order by an update's latency: this catches gross overlaps only; the
    // sampling above is the precise check.)
    expect((await db.runs.indexes()).some((i) => i.unique && JSON.stringify(i.key) === JSON.stringify({ activeKey: 1 }))).toBe(true);
    const byRecord = new Map<string, RunDoc[]>();
    for (const r of runs) byRecord.set(`${r.workflowId}|${r.recordId}`, [...(byRecord.get(`${r.workflowId}|${r.recordId}`) ?? []), r]);
    const overlaps: string[] = [];
    for (const [key, list] of byRecord) {
      list.sort((x, y) => x.startedAt!.getTime() - y.startedAt!.getTime());
      for (let i = 1; i < list.length; i++) {
        const [prev, next] = [list[i - 1]!, list[i]!];
        if (next.startedAt!.getTime() < prev.finishedAt!.getTime() - CLOCK_SLACK_MS)
          overlaps.push(`${key}: ${prev._id} finished ${prev.finishedAt!.toISOString()}, ${next._id} started ${next.startedAt!.toISOString()}`);
      }
    }
    expect(overlaps).toEqual([]);

    // The rate limit is exact across both servers and the crash: the limit was reached, never
    // exceeded, and what was accepted plus what a killed server took with it is the limit.
    expect(limitedCalls.some((c) => c.status === 429)).toBe(true);
    expect(limitedCalls.every((c) => c.end < windowEnd)).toBe(true);
    expect(accepted.length).toBeLessThanOrEqual(LIMIT);
    expect(accepted.length + lost.length).toBeGreaterThanOrEqual(LIMIT);

    // The survivor stops cleanly.
    await b.stop();
    expect(b.child.exitCode).toBe(0);
  }, 90_000);
});
