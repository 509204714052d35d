// Exactly once across a crash. A data step cut off by a crash runs again (a new attempt, once the
// dead executor's lease has expired) without doing its effect twice: add_note's note has an id
// derived from the run and the step, so the second attempt finds the first's note. Every entry is
// stored with the change it describes (the run's insert, a step's end, the run's end) and put in
// the log once, by whoever finds it pending: a process that died between its change and the put
// leaves it to readers and the sweep. Real server and database; runs as dead processes leave them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNote } from "../src/domain/notes/threads.js";
import { PENDING_ENTRY_AGE_MS, runEntry } from "../src/domain/runs/activity.js";
import { activityStream } from "../src/store/logs.js";
import { createLogReader } from "../src/domain/logs/reader.js";
import { derivedUuid } from "../src/domain/ids.js";
import { storeFixtures, type StoreFixtures } from "../src/store/index.js";
import type { RunDoc, StepDoc } from "../src/store/types.js";
import { createWorld, worldRun, type World } from "../fixtures/world.js";
import { waitForRun } from "./helpers/runs.js";
import { startServer, type TestServer } from "./helpers/server.js";

let server: TestServer;
let db: StoreFixtures;
let w: World;
const STEPS: StepDoc[] = [
  { type: "load_record" },
  { type: "add_note", title: "Checked", content: "<p>checked</p>" },
  { type: "update_record", set: { status: "once" } },
];

beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR_LEASE_MS: "1000" } });
  db = storeFixtures(server.deps.store);
  w = await createWorld(server, { steps: STEPS });
});
afterAll(async () => {
  await server?.stop();
});

/** A run as a process that died in its step `index` leaves it: RUNNING, that step started once, the lease expired. */
function cutOff(recordId: string, index: number): RunDoc {
  const run = worldRun(w, recordId, STEPS);
  const at = new Date(Date.now() - 60_000);
  return {
    ...run,
    state: "RUNNING",
    startedAt: at,
    stepIndex: index,
    lease: { owner: "dead-executor", expiresAt: new Date(Date.now() - 1000) },
    steps: run.steps.map((s, i) =>
      i < index
        ? { ...s, state: "SUCCEEDED", startedAt: at, finishedAt: at, attempts: 1 }
        : i === index
          ? { ...s, state: "RUNNING", startedAt: at, attempts: 1, executor: "dead-executor" }
          : s,
    ),
  };
}

/** The note the cut-off attempt of step `index` stored, as that attempt stores it. */
function firstAttemptNote(run: RunDoc, index: number) {
  return createNote(server.deps.store, {
    projectId: run.projectId,
    environmentId: run.environmentId,
    collection: run.collection,
    recordId: run.recordId,
    title: "Checked",
    content: "<p>checked</p>",
    user: { id: run.userId, email: run.userEmail },
    renderingId: run.renderingId,
    id: derivedUuid(`note:${run._id}:${index}`),
  });
}

const notesOn = (recordId: string) => db.notes.countDocuments({ environmentId: w.environmentId, recordId });
const entries = (runId: string, action: string) => db.activityLogs.countDocuments({ runId, action });

describe("a data step cut off by a crash", () => {
  it("add_note after its note, before its entry: the next attempt writes the entry, not a second note", async () => {
    const run = cutOff("r2", 1);
    const note = await firstAttemptNote(run, 1);
    await db.insertRuns([run]);
    const done = await waitForRun(server.deps.store, run._id);
    expect(done.state).toBe("SUCCEEDED");
    expect(await notesOn("r2")).toBe(1);
    expect(await entries(run._id, "note.created")).toBe(1);
    expect((await db.activityLogs.findOne({ runId: run._id, action: "note.created" }))?.details).toMatchObject({ noteId: note._id, step: 2 });
  });

  it("update_record cut off after its write: the next attempt writes the entry once, naming the fields it found set", async () => {
    const run = cutOff("r3", 2);
    await db.insertRuns([run]);
    expect((await waitForRun(server.deps.store, run._id)).state).toBe("SUCCEEDED");
    const updated = await db.activityLogs.find({ runId: run._id, action: "record.updated" }).toArray();
    expect(updated).toHaveLength(1);
    expect(updated[0]?.details).toMatchObject({ step: 3 });
  });

  it("update_record that changes nothing says so: its entry names the fields it found set", async () => {
    const first = cutOff("r4", 2);
    await db.insertRuns([first]);
    await waitForRun(server.deps.store, first._id);
    const again = cutOff("r4", 2);
    await db.insertRuns([again]);
    await waitForRun(server.deps.store, again._id);
    const entry = await db.activityLogs.findOne({ runId: again._id, action: "record.updated" });
    expect(entry?.details).toEqual({ fields: {}, unchanged: ["status"], step: 3 });
  });
  it("two runs on the record, or two add_note steps, never share a note: the id is the run's and the step's", () => {
    expect(derivedUuid("note:a:1")).not.toBe(derivedUuid("note:a:2"));
    expect(derivedUuid("note:a:1")).toBe(derivedUuid("note:a:1"));
    expect(derivedUuid("note:a:1")).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

/** Polls `check` until it holds (the sweep runs every 2 s and takes entries PENDING_ENTRY_AGE_MS old). */
async function eventually(check: () => Promise<boolean>, ms = PENDING_ENTRY_AGE_MS + 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("not within the time given");
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("a change stored with its entry, the process gone before the entry was put", () => {
  const stream = () => activityStream(w.environmentId);

  it("a run stored with its triggered entry: a reader puts the entry at its reserved position", async () => {
    const run = worldRun(w, "p1", STEPS);
    const entry = await runEntry(server.deps.store, run, "workflow.run.triggered", { workflowId: run.workflowId }, "webhook");
    await db.insertRuns([{ ...run, pendingLog: [entry] }]);
    // The reader walks to the stream's end: the hole past its grace resolves to the run's entry, not a tombstone.
    const walked = [];
    for await (const r of createLogReader(server.deps.store).forward("activity", stream(), entry.seq - 1, { until: entry.seq })) walked.push(r);
    expect(walked.at(-1)?.doc).toMatchObject({ _id: entry.key, runId: run._id, action: "workflow.run.triggered" });
    await waitForRun(server.deps.store, run._id);
    expect(await entries(run._id, "workflow.run.triggered")).toBe(1);
  });

  it("a step's end stored with its entry: the sweep puts it, once", async () => {
    const run = cutOff("r5", 1);
    const done = { ...run, stepIndex: 2, steps: run.steps.map((s, i) => (i === 1 ? { ...s, state: "SUCCEEDED" as const, finishedAt: new Date() } : s)) };
    const note = await firstAttemptNote(run, 1);
    const entry = await runEntry(server.deps.store, { ...run, stepIndex: 1 }, "note.created", { noteId: note._id, step: 2 });
    await db.insertRuns([{ ...done, pendingLog: [entry] }]);
    expect((await waitForRun(server.deps.store, run._id)).state).toBe("SUCCEEDED");
    await eventually(async () => (await entries(run._id, "note.created")) === 1);
    await eventually(async () => ((await db.runs.findOne({ _id: run._id }))?.pendingLog ?? []).length === 0);
    expect(await notesOn("r5")).toBe(1);
    expect(await entries(run._id, "note.created")).toBe(1);
  });

  it("a position a reader gave up before the run was stored: the sweep moves the entry to a new one", async () => {
    const run = { ...worldRun(w, "p3", STEPS), state: "CANCELLED" as const, activeKey: `${new Date().toISOString()}|p3`, finishedAt: new Date() };
    const entry = await runEntry(server.deps.store, run, "workflow.run.triggered", { workflowId: run.workflowId }, "webhook");
    // The reader's tombstone came first (the writer was slower than the grace), then the run, then the writer died.
    await server.deps.store.logs.tombstone("activity", stream(), entry.seq);
    await db.insertRuns([{ ...run, pendingLog: [entry] }]);
    await eventually(async () => (await entries(run._id, "workflow.run.triggered")) === 1);
    const moved = await db.activityLogs.findOne({ runId: run._id, action: "workflow.run.triggered" });
    expect(moved?.seq).toBeGreaterThan(entry.seq);
    expect((await db.activityLogs.findOne({ _id: entry.key }))?.tomb).toBe(true);
    await eventually(async () => ((await db.runs.findOne({ _id: run._id }))?.pendingLog ?? []).length === 0);
  });
});
