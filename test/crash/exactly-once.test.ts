// Exactly once, through a crash loop: two `runhook start` servers and two `runhook worker`
// processes on one file-backed database, under webhook load (8 callers) over a workflow
// load_record, update_record, add_note on existing records. Round after round, some of them
// are killed with SIGKILL at random moments and started again on the same data. Once the load
// has stopped and every run has finished, the database is read directly: each run and its
// entries must be one fact — one triggered entry, one entry per data step that writes one
// (update_record's record.updated, add_note's note.created), one end entry, one note — and
// nothing acknowledged is missing, nothing names what does not exist.
//
// A seeded PRNG draws each round's length, victims (among the processes that are up) and kill
// moments, and the records called; its seed is printed, and
// `RUNHOOK_CRASH_LOOP_SEED=<seed> npm run test:crash -- test/crash/exactly-once.test.ts` draws
// the same again (the processes' timing, not the PRNG, decides what each kill cuts off).
// RUNHOOK_CRASH_LOOP_ROUNDS (default 30) sets the number of rounds.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { derivedUuid } from "../../src/domain/ids.js";
import { startEmbeddedServer, type EmbeddedServer } from "../../src/embedded/index.js";
import { ensureIndexes, openStore, storeFixtures, type Store, type StoreFixtures } from "../../src/store/index.js";
import type { RunState, StepDoc } from "../../src/store/types.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { spawnServer, testAppOn, testDbName, type ChildServer } from "../helpers/server.js";
import { tally, timedFetch } from "../helpers/load.js";
import { FINISHED } from "../helpers/runs.js";
import { prng, type Rng } from "../helpers/prng.js";
import { sleep } from "../helpers/webhook.js";

const ROUNDS = Number(process.env.RUNHOOK_CRASH_LOOP_ROUNDS || 30);
const SEED = Number(process.env.RUNHOOK_CRASH_LOOP_SEED || Math.floor(Math.random() * 2 ** 31));
const CALLERS = 8;
const RECORDS = 300;
/** A round's load lasts this long plus up to twice as much; its kills fall inside it. */
const ROUND_MS = 1000;
/** Each process is a victim of a round with this chance (one at least is). */
const KILL_CHANCE = 0.4;
const LEASE_MS = 2000;
/** How long the runs may take to finish once the load stops: runs cut off wait out their lease. */
const DRAIN_MS = 120_000;
/** Offending runs named per kind of failure. */
const SHOWN = 5;

const steps: StepDoc[] = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }, { type: "add_note", content: "<p>ran</p>", title: "" }];
const UPDATE_STEP = 1;
const NOTE_STEP = 2;
const END_ACTIONS: Partial<Record<RunState, string>> = {
  SUCCEEDED: "workflow.run.succeeded",
  FAILED: "workflow.run.failed",
  CANCELLED: "workflow.run.cancelled",
};

interface Member {
  name: string;
  mode: "start" | "worker";
  proc: ChildServer;
  /** False from its kill until it listens again: callers leave a server that is down. */
  up: boolean;
  /** Its start after a kill, while it is under way. */
  restarting?: Promise<void>;
}

let database: EmbeddedServer | undefined;
let store: Store | undefined;
let db: StoreFixtures;
let dbName: string;
let world: World;
const fleet: Member[] = [];
/** Starts after a kill that failed: the loop cannot go on as it should. */
const restartFailures: string[] = [];
/** How long each start after a kill took, ms (what sets the length of the loop). */
const restartMs: number[] = [];

const env = () => ({
  MONGODB_URI: `${database!.uri}${dbName}`,
  RUNHOOK_EXECUTOR_LEASE_MS: String(LEASE_MS),
  RUNHOOK_EXECUTOR_POLL_MS: "100",
});

beforeAll(async () => {
  // The database is the test's own, on the file backend: the kills are the runhook processes'.
  const dataDir = mkdtempSync(join(inject("serversDir"), "exactly-once-"));
  const { cacheDir } = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
  database = await startEmbeddedServer({ dataDir, cacheDir, persistent: true, noTableScan: true, progress: () => {} });
  dbName = testDbName();
  store = await openStore(`${database.uri}${dbName}`, { dbName });
  await ensureIndexes(store);
  db = storeFixtures(store);
  const app = testAppOn(store);
  const records = Array.from({ length: RECORDS }, (_, i) => ({ id: `r${i}`, status: "new" }));
  world = await createWorld(app, { records, steps, rateLimitPerMinute: 1_000_000 });
  app.stop();
  const roles = [
    ["server-a", "start"],
    ["server-b", "start"],
    ["worker-a", "worker"],
    ["worker-b", "worker"],
  ] as const;
  fleet.push(...(await Promise.all(roles.map(async ([name, mode]) => ({ name, mode, proc: await spawnServer(dbName, { mode, env: env() }), up: true })))));
});

afterAll(async () => {
  await Promise.allSettled(fleet.map((m) => m.proc.stop()));
  await store?.close();
  await database?.stop();
});

/** Webhook calls on random existing records by CALLERS callers, to the servers that are up, until stopped. */
function startLoad(rng: Rng) {
  const acked = new Set<string>();
  const statuses: Record<string, number> = {};
  let stopped = false;
  const caller = async () => {
    while (!stopped) {
      const servers = fleet.filter((m) => m.mode === "start" && m.up);
      if (servers.length === 0) {
        await sleep(50);
        continue;
      }
      const c = await timedFetch("hook", rng.pick(servers).proc.baseUrl, world.hookPath, {
        method: "POST",
        headers: { authorization: `Bearer ${world.userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ record_id: world.recordIds[rng.int(RECORDS)] }),
        hangMs: 15_000,
      });
      statuses[c.status] = (statuses[c.status] ?? 0) + 1;
      if (c.status === 202 && c.runId) acked.add(c.runId);
      if (c.status === "error") await sleep(20); // a server killed under it: it is marked down at once
    }
  };
  const callers = Array.from({ length: CALLERS }, caller);
  return {
    acked,
    statuses,
    stop: async () => {
      stopped = true;
      await Promise.all(callers);
    },
  };
}

/** SIGKILL of a member that is up, and its start again on the same data, which goes on in the background. */
function killAndRestart(m: Member): void {
  m.up = false;
  m.restarting = (async () => {
    await m.proc.kill();
    const t0 = Date.now();
    m.proc = await spawnServer(dbName, { mode: m.mode, env: env() });
    m.up = true;
    restartMs.push(Date.now() - t0);
  })()
    .catch((err: Error) => void restartFailures.push(`${m.name}: ${err.message.slice(0, 2000)}`))
    .finally(() => {
      m.restarting = undefined;
    });
}

/** Waits until at most `down` members are down (still starting after a kill). */
async function untilDown(down: number): Promise<void> {
  for (let starting = fleet.filter((m) => m.restarting); starting.length > down; starting = fleet.filter((m) => m.restarting)) {
    await Promise.race(starting.map((m) => m.restarting));
  }
}

/**
 * One round, once at most one member is still starting: the load goes on for the round's
 * length while its victims, drawn among the members that are up, are killed, each at its
 * moment, and started again at once (in the background: the next round may begin meanwhile).
 */
async function crashRound(round: number, rng: Rng): Promise<{ line: string; kills: number }> {
  await untilDown(1);
  const up = fleet.filter((m) => m.up);
  const lengthMs = ROUND_MS + rng.int(2 * ROUND_MS);
  const chosen = up.filter(() => rng.chance(KILL_CHANCE));
  const victims = (chosen.length > 0 ? chosen : [rng.pick(up)]).map((m) => ({ m, atMs: rng.int(lengthMs) }));
  const t0 = Date.now();
  await Promise.all(
    victims.map(async ({ m, atMs }) => {
      await sleep(atMs);
      killAndRestart(m);
    }),
  );
  await sleep(t0 + lengthMs - Date.now());
  return { line: `round ${round}: ${lengthMs} ms, SIGKILL ${victims.map(({ m, atMs }) => `${m.name}@${atMs}`).join(" ")}`, kills: victims.length };
}

/** Waits until no run is QUEUED or RUNNING, at most DRAIN_MS; the number still ongoing. */
async function drain(): Promise<number> {
  let ongoing = 0;
  for (const deadline = Date.now() + DRAIN_MS; Date.now() < deadline; await sleep(250)) {
    ongoing = await db.runs.countDocuments({ state: { $in: ["QUEUED", "RUNNING"] } });
    if (ongoing === 0) break;
  }
  return ongoing;
}

/**
 * The environment's activity log read to its end through the public API (its NDJSON export),
 * as a reader does: every position taken is resolved on the way (an entry, or a tombstone for a
 * hole). The number of entries read.
 */
async function readLogToItsEnd(): Promise<number> {
  const server = fleet.find((m) => m.mode === "start")!.proc;
  const res = await fetch(`${server.baseUrl}/v1/project/${world.projectName}/environment/${world.environmentName}/activity-logs?order=asc`, {
    headers: { authorization: `Bearer ${world.apiToken}`, accept: "application/x-ndjson" },
    signal: AbortSignal.timeout(120_000),
  });
  expect(res.status).toBe(200);
  let lines = 0;
  for await (const chunk of res.body!) for (const byte of chunk as Uint8Array) if (byte === 10) lines++;
  return lines;
}

/** What the database holds about one run: its state, whether its update changed the record, whether a kill cut off a step, and its entries by action. */
interface RunFacts {
  state: RunState;
  updateChanged: boolean;
  stepRetried: boolean;
  entries: Record<string, number>;
}

type Failures = Map<string, string[]>;
function failed(f: Failures, kind: string, what: string): void {
  const list = f.get(kind) ?? [];
  list.push(what);
  f.set(kind, list);
}

/** The workflow's runs, streamed: a few facts each. */
async function readRuns(): Promise<Map<string, RunFacts>> {
  const runs = new Map<string, RunFacts>();
  for await (const r of db.runs.find({ workflowId: world.workflowId }, { projection: { state: 1, steps: 1 } })) {
    const changed = r.steps[UPDATE_STEP]?.output?.changed;
    const stepRetried = r.steps.some((step) => (step.attempts ?? 0) > 1);
    runs.set(r._id, { state: r.state, updateChanged: Array.isArray(changed) && changed.length > 0, stepRetried, entries: {} });
  }
  return runs;
}

/** The environment's notes (their ids), streamed. */
async function readNoteIds(): Promise<Set<string>> {
  const ids = new Set<string>();
  for await (const n of db.notes.find({ environmentId: world.environmentId }, { projection: { _id: 1 } })) ids.add(n._id);
  return ids;
}

/**
 * The environment's activity entries (tombstones are no entries: they name no environment),
 * streamed: each counted on its run. An entry naming a run that is not stored, or a note that
 * is not, is a failure. True when an update that changed nothing has an entry.
 */
async function countEntries(runs: Map<string, RunFacts>, noteIds: Set<string>, failures: Failures): Promise<{ noOpUpdateEntries: boolean }> {
  let noOpUpdateEntries = false;
  const entries = db.activityLogs.find({ environmentId: world.environmentId }, { projection: { seq: 1, runId: 1, action: 1, details: 1 } });
  for await (const e of entries) {
    if (!e.runId) continue;
    const run = runs.get(e.runId);
    if (!run) failed(failures, "entry naming a run that is not stored", `entry ${e.seq} (${e.action}) names run ${e.runId}`);
    else run.entries[e.action] = (run.entries[e.action] ?? 0) + 1;
    if (e.action === "note.created" && !noteIds.has(String(e.details.noteId)))
      failed(failures, "note.created naming a note that is not stored", `entry ${e.seq} of run ${e.runId} names note ${String(e.details.noteId)}`);
    if (e.action === "record.updated" && Object.keys((e.details.fields as object | undefined) ?? {}).length === 0) noOpUpdateEntries = true;
  }
  return { noOpUpdateEntries };
}

/**
 * The rules, run by run. Every run: one `workflow.run.triggered`; at most one entry per data
 * step. A finished run: one end entry, the one of its state, and no other. A SUCCEEDED run: its
 * note (the id add_note derives from the run and the step) and one `note.created`; one
 * `record.updated` when its update changed the record (the step's output names the fields) or
 * when runhook writes the entry of an update that changed nothing (seen in the log: an entry
 * with no fields). Otherwise — runhook skips that entry, and the finishing attempt found
 * nothing to change, perhaps because an attempt cut off by a kill had changed it — at most one.
 */
function checkRun(id: string, run: RunFacts, noteIds: Set<string>, noOpUpdateEntries: boolean, failures: Failures): void {
  const n = (action: string) => run.entries[action] ?? 0;
  const where = `run ${id} (${run.state})`;
  if (n("workflow.run.triggered") !== 1) failed(failures, "workflow.run.triggered not exactly once", `${where}: ${n("workflow.run.triggered")}`);
  for (const action of ["record.updated", "note.created"]) if (n(action) > 1) failed(failures, `${action} more than once`, `${where}: ${n(action)}`);
  if (!FINISHED.includes(run.state)) return void failed(failures, "run not finished", `${where}: still ${run.state} after ${DRAIN_MS / 1000} s`);
  const ends = Object.values(END_ACTIONS).map((a) => `${a} ×${n(a)}`);
  if (Object.values(END_ACTIONS).some((a) => n(a) !== (a === END_ACTIONS[run.state] ? 1 : 0)))
    failed(failures, "end entry not exactly once (its state's)", `${where}: ${ends.join(", ")}`);
  if (run.state !== "SUCCEEDED") return;
  if (!noteIds.has(derivedUuid(`note:${id}:${NOTE_STEP}`))) failed(failures, "succeeded run without its note", where);
  if (n("note.created") === 0) failed(failures, "note.created missing", where);
  if (n("record.updated") === 0 && (run.updateChanged || noOpUpdateEntries))
    failed(failures, "record.updated missing", `${where}${run.updateChanged ? ": its update changed the record" : ""}`);
}

/** Every check on the stored runs, notes and entries, and the acknowledged runs; the failures by kind, and the figures. */
async function checkAll(acked: Set<string>) {
  const failures: Failures = new Map();
  const runs = await readRuns();
  const noteIds = await readNoteIds();
  const { noOpUpdateEntries } = await countEntries(runs, noteIds, failures);
  for (const id of acked) if (!runs.has(id)) failed(failures, "acknowledged run not stored", `run ${id}`);
  for (const [id, run] of runs) checkRun(id, run, noteIds, noOpUpdateEntries, failures);
  // A note is one run's: its id is the one add_note derives from that run.
  const noteOf = new Set([...runs.keys()].map((id) => derivedUuid(`note:${id}:${NOTE_STEP}`)));
  for (const note of noteIds) if (!noteOf.has(note)) failed(failures, "note written by no stored run", `note ${note}`);
  const states = tally([...runs.values()], (r) => r.state);
  const figures = {
    stored: runs.size,
    storedUnacknowledged: [...runs.keys()].filter((id) => !acked.has(id)).length,
    succeeded: states.SUCCEEDED ?? 0,
    states,
    // Runs a kill cut off in a step, which ran it again: those the data-step rules are about.
    withARetriedStep: [...runs.values()].filter((r) => r.stepRetried).length,
    notes: noteIds.size,
    noOpUpdateEntries,
  };
  return { failures, figures };
}

/** The failures, kind by kind: how many, and the first few. */
function describeFailures(failures: Failures): string {
  const lines: string[] = [];
  for (const [kind, list] of failures) {
    lines.push(`${kind}: ${list.length}`, ...list.slice(0, SHOWN).map((w) => `  - ${w}`));
    if (list.length > SHOWN) lines.push(`  - and ${list.length - SHOWN} more`);
  }
  return lines.join("\n");
}

describe("exactly once through a crash loop", () => {
  it(
    `${ROUNDS} rounds of SIGKILLed servers and workers under webhook load (seed ${SEED}): each run and its entries and note are one fact`,
    async () => {
      console.log(`[exactly-once] seed ${SEED} (RUNHOOK_CRASH_LOOP_SEED=${SEED} draws this schedule again)`);
      const schedule = prng(SEED);
      const load = startLoad(prng(SEED ^ 0x10ad));
      const t0 = Date.now();
      let kills = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const done = await crashRound(round, schedule);
        console.log(`[exactly-once] ${done.line}`);
        kills += done.kills;
      }
      // Everything started again before the load stops.
      await untilDown(0);
      expect(restartFailures, "a process killed by the loop did not start again").toEqual([]);
      await load.stop();
      const loadMs = Date.now() - t0;
      const ongoing = await drain();
      const drainMs = Date.now() - t0 - loadMs;
      const logEntries = ongoing === 0 ? await readLogToItsEnd() : undefined;
      const { failures, figures } = await checkAll(load.acked);
      const found = [...failures.values()].reduce((sum, list) => sum + list.length, 0);
      const failuresByKind = Object.fromEntries([...failures].map(([kind, list]) => [kind, list.length]));
      const restartsMs = { median: restartMs.sort((a, b) => a - b)[restartMs.length >> 1], max: restartMs.at(-1) };
      const summary = { seed: SEED, rounds: ROUNDS, kills, acknowledged: load.acked.size, ...figures, logEntries, failures: found, failuresByKind };
      console.log(`[exactly-once] ${JSON.stringify(summary)}`);
      console.log(`[exactly-once] calls ${JSON.stringify(load.statuses)}, loop ${loadMs} ms, restarts ${JSON.stringify(restartsMs)} ms, drain ${drainMs} ms`);
      if (found > 0) console.log(`[exactly-once] failures (seed ${SEED}):\n${describeFailures(failures)}`);
      // The loop did something: processes were killed, runs acknowledged and succeeded through it.
      expect(kills).toBeGreaterThan(0);
      expect(load.acked.size, JSON.stringify(load.statuses)).toBeGreaterThan(0);
      expect(figures.succeeded).toBeGreaterThan(0);
      expect(found, `seed ${SEED}: ${found} failures\n${describeFailures(failures)}`).toBe(0);
    },
    120_000 + ROUNDS * 20_000 + DRAIN_MS,
  );
});
