// Power cut: `runhook start` on the file-backed embedded database under webhook load (distinct
// records, 16 callers); right after a 202, at a random point, runhook and its Java database are
// killed with SIGKILL in the same instant. After each restart on the same data: every
// acknowledged run exists and finishes, no (workflow, record) has two runs, every index holds
// one entry per document, and the activity log, read to its end (the public API's tail,
// order=asc), has exactly one triggerWorkflow entry per acknowledged run.
// Then the database alone is killed while it writes large batches: its file must open again.
// `npm run test:crash`; RUNHOOK_CRASH_ROUNDS (default 3) sets the number of power cuts.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { pidAlive, startEmbeddedServer } from "../../src/embedded/index.js";
import { openStore, storeFixtures, type Store } from "../../src/store/index.js";
import { spawnServer, testAppOn, testDbName, type ChildServer } from "../helpers/server.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { adminClient, sleep } from "../helpers/webhook.js";
import { FINISHED } from "../helpers/runs.js";
import { tally, timedFetch } from "../helpers/load.js";

const ROUNDS = Number(process.env.RUNHOOK_CRASH_ROUNDS || 3);
const CALLERS = 16;
const RECORDS_PER_ROUND = 3000;
/** A kill comes after this much load, plus up to as much again at random. */
const KILL_AFTER_MS = 1500;
const LEASE_MS = 2000;

const dataDir = mkdtempSync(join(tmpdir(), "runhook-power-cut-"));
const env = {
  MONGODB_URI: "",
  RUNHOOK_EMBEDDED: "file",
  RUNHOOK_DATA_DIR: dataDir,
  RUNHOOK_EXECUTOR_LEASE_MS: String(LEASE_MS),
  METRICS_PORT: "off", // a server on the embedded database serves them on 9464, which another runhook may hold
};
const steps = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }] as const;

let server: ChildServer | undefined;
let javaPid = 0;
let db: Store | undefined;
let world: World;
let hookPath: string;

/** The launcher's record of the running database server (pid, port), if any. */
function runningState(): { pid: number; port: number } | undefined {
  try {
    return JSON.parse(readFileSync(join(dataDir, "mongo", "running.json"), "utf8")) as { pid: number; port: number };
  } catch {
    return undefined;
  }
}

/** `runhook start` on the data dir, and its Java database's pid and port. */
async function start(): Promise<void> {
  server = await spawnServer(testDbName(), { env });
  await db?.close();
  db = undefined;
  let last = "";
  for (const deadline = Date.now() + 15_000; !db && Date.now() < deadline; ) {
    const found = runningState();
    if (!found) {
      last = `no running.json; runhook exit ${server.child.exitCode ?? server.child.signalCode}`;
      await sleep(500);
      continue;
    }
    javaPid = found.pid;
    db = await openStore(`mongodb://127.0.0.1:${found.port}/runhook`, { dbName: "runhook", timeoutMs: 2000 }).catch((err: Error) => {
      last = `${err.message}; java ${found.pid} alive ${pidAlive(found.pid)}; runhook exit ${server!.child.exitCode ?? server!.child.signalCode}`;
      return undefined;
    });
  }
  if (!db) throw new Error(`runhook's database does not answer: ${last}; its output:\n${server!.logs.raw().slice(-3000)}`);
}

beforeAll(async () => {
  await start();
  const records = Array.from({ length: ROUNDS * RECORDS_PER_ROUND }, (_, i) => ({ id: `r${i}`, status: "new" }));
  const app = testAppOn(db!);
  world = await createWorld(app, { records, steps: [...steps], rateLimitPerMinute: 1_000_000 });
  app.stop();
  hookPath = new URL((await adminClient(server!.baseUrl, world.adminToken).getWorkflow({ workflowId: world.workflowId })).workflow!.webhook!.url).pathname;
});

afterAll(async () => {
  await server?.stop();
  await db?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Webhook load on distinct records until, after `killAfterMs`, a 202 arrives: then both processes die at once. */
async function loadAndCut(round: number, killAfterMs: number): Promise<{ acked: string[]; statuses: Record<string, number> }> {
  const acked: string[] = [];
  const statuses: string[] = [];
  const pids = [server!.child.pid!, javaPid];
  const t0 = Date.now();
  let next = round * RECORDS_PER_ROUND;
  let cut = false;
  const caller = async () => {
    while (!cut && next < (round + 1) * RECORDS_PER_ROUND) {
      const c = await timedFetch("hook", server!.baseUrl, hookPath, {
        method: "POST",
        headers: { authorization: `Bearer ${world.userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ record_id: `r${next++}` }),
        hangMs: 15_000,
      });
      statuses.push(String(c.status));
      if (c.status === 202 && c.runId) acked.push(c.runId);
      if (!cut && c.status === 202 && Date.now() - t0 >= killAfterMs) {
        cut = true;
        for (const pid of pids) process.kill(pid, "SIGKILL"); // the same instant: a power cut
      }
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, caller));
  expect(
    cut,
    `no 202 after ${killAfterMs} ms (${JSON.stringify(tally(statuses, (s) => s))}); runhook exit ${server!.child.exitCode ?? server!.child.signalCode}; its output:\n${server!.logs.raw().slice(-3000)}`,
  ).toBe(true);
  for (const deadline = Date.now() + 10_000; pids.some(pidAlive) && Date.now() < deadline; ) await sleep(20);
  return { acked, statuses: tally(statuses, (s) => s) };
}

/** An activity-log item of the public API, as far as read here. */
type ActivityItem = { action: string; workflow?: { runId: string } };

/** Every page of the environment's activity log, oldest first; fails if it does not end within `ms`. */
async function readActivityLog(ms: number): Promise<ActivityItem[]> {
  const entries: ActivityItem[] = [];
  const deadline = Date.now() + ms;
  const path = `/v1/project/${world.projectName}/environment/${world.environmentName}/activity-logs`;
  for (let cursor: string | undefined; ; ) {
    expect(Date.now(), "the activity log did not end").toBeLessThan(deadline);
    const qs = new URLSearchParams({ order: "asc", limit: "100", ...(cursor ? { cursor } : {}) });
    const res = await fetch(`${server!.baseUrl}${path}?${qs}`, {
      headers: { authorization: `Bearer ${world.apiToken}` },
      signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: ActivityItem[]; hasMore: boolean; nextCursor?: string };
    entries.push(...body.data);
    if (!body.hasMore) return entries;
    cursor = body.nextCursor;
  }
}

describe("power cut", () => {
  it(
    `${ROUNDS} × SIGKILL of runhook and its database together right after a 202: nothing acknowledged is lost`,
    async () => {
      const allAcked: string[] = [];
      const figures: Array<{ round: number; killAfterMs: number; acked: number; statuses: Record<string, number>; lost: number }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        const killAfterMs = KILL_AFTER_MS + Math.floor(Math.random() * KILL_AFTER_MS);
        const { acked, statuses } = await loadAndCut(round, killAfterMs);
        // A round with nothing acknowledged would check nothing.
        expect(acked.length, `round ${round}: no acknowledged runId (${JSON.stringify(statuses)})`).toBeGreaterThan(0);
        allAcked.push(...acked);
        await start();
        const found = await storeFixtures(db!)
          .runs.countDocuments({ _id: { $in: acked } })
          .catch((err: Error) => {
            throw new Error(
              `round ${round}: ${err.message}; runhook exit ${server!.child.exitCode ?? server!.child.signalCode}, java alive ${pidAlive(javaPid)}; its output:\n${server!.logs.raw().slice(-3000)}`,
            );
          });
        figures.push({ round, killAfterMs, acked: acked.length, statuses, lost: acked.length - found });
        // The indexes were written in the same commits as their documents: one entry each, none
        // missing (a run's pending entries, an array, have one each: at least one per run).
        for (const handle of ["runs", "activityLogs"] as const) {
          const fx = storeFixtures(db!);
          const { nrecords, keysPerIndex } = await fx.validate(fx.collectionNameOf(handle));
          const multikey = new Set(["pendingLog.key_1"]);
          expect(
            Object.entries(keysPerIndex).filter(([name, keys]) => (multikey.has(name) ? keys < nrecords : keys !== nrecords)),
            `round ${round}: ${handle} has ${nrecords}`,
          ).toEqual([]);
        }
        console.log(`[power-cut] ${JSON.stringify(figures.at(-1))}`);
      }
      expect(figures.filter((f) => f.lost > 0)).toEqual([]);
      // Every run finishes (those cut off once their lease expired), one run per record.
      let runs = await storeFixtures(db!).runs.find({ workflowId: world.workflowId }).toArray();
      for (const deadline = Date.now() + 60_000; runs.some((r) => !FINISHED.includes(r.state)) && Date.now() < deadline; await sleep(200)) {
        runs = await storeFixtures(db!).runs.find({ workflowId: world.workflowId }).toArray();
      }
      expect(runs.filter((r) => !FINISHED.includes(r.state)).map((r) => `${r._id} ${r.state}`)).toEqual([]);
      const byId = new Map(runs.map((r) => [r._id, r]));
      expect(allAcked.filter((id) => byId.get(id)?.state !== "SUCCEEDED")).toEqual([]);
      expect(Object.entries(tally(runs, (r) => r.recordId)).filter(([, n]) => n > 1)).toEqual([]);
      // The activity log ends, and holds one trigger entry per acknowledged run.
      const log = await readActivityLog(60_000);
      const triggered = tally(
        log.filter((e) => e.action === "triggerWorkflow"),
        (e) => e.workflow?.runId ?? "",
      );
      expect(allAcked.filter((id) => triggered[id] !== 1).map((id) => `${id}: ${triggered[id] ?? 0}`)).toEqual([]);
      expect(Object.entries(triggered).filter(([, n]) => n > 1)).toEqual([]);
      console.log(`[power-cut] ${JSON.stringify({ rounds: ROUNDS, acked: allAcked.length, runs: runs.length, activityEntries: log.length })}`);
    },
    120_000 + ROUNDS * 90_000,
  );

  it(
    "SIGKILL of the database while it writes large batches: the file opens again with every acknowledged batch",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "runhook-mid-commit-"));
      const { cacheDir } = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dir });
      const open = async () => {
        const s = await startEmbeddedServer({ dataDir: dir, cacheDir, persistent: true, progress: () => {} });
        const { pid } = JSON.parse(readFileSync(join(dir, "mongo", "running.json"), "utf8")) as { pid: number };
        return { s, pid, client: await openStore(`${s.uri}bulk`, { dbName: "bulk" }) };
      };
      try {
        let acked = 0;
        const payload = "x".repeat(4000);
        for (let round = 0; round < ROUNDS; round++) {
          const { s, pid, client } = await open();
          const docs = storeFixtures(client).scratch<{ _id: string; b: number; payload: string }>("docs");
          await docs.createIndex({ b: 1 });
          expect(await docs.countDocuments()).toBeGreaterThanOrEqual(acked);
          // The index was written in the same commits as the documents, none lost, none left over.
          const { nrecords, keysPerIndex } = await storeFixtures(client).validate("docs");
          expect(keysPerIndex).toEqual({ _id_: nrecords, b_1: nrecords });
          let writing = true;
          const writer = (async () => {
            for (let b = 0; writing; b++) {
              const batch = Array.from({ length: 1000 }, (_, i) => ({ _id: `${round}-${b}-${i}`, b, payload }));
              try {
                await docs.insertMany(batch); // 4 MB: a commit of some length
                acked += batch.length;
              } catch {
                return;
              }
            }
          })();
          // Once a batch has been answered, at a random point of the following ones.
          const before = acked;
          for (const deadline = Date.now() + 20_000; acked === before && Date.now() < deadline; ) await sleep(10);
          await sleep(Math.floor(Math.random() * 500));
          process.kill(pid, "SIGKILL");
          writing = false;
          await writer;
          await client.close();
          await s.stop();
          expect(acked).toBeGreaterThan(before);
        }
        const { s, client } = await open();
        const docs = storeFixtures(client).scratch<{ _id: string }>("docs");
        expect(await docs.countDocuments()).toBeGreaterThanOrEqual(acked);
        await docs.insertOne({ _id: "after" });
        await client.close();
        await s.stop();
        console.log(`[mid-commit] ${JSON.stringify({ rounds: ROUNDS, ackedDocs: acked })}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000 + ROUNDS * 30_000,
  );
});
