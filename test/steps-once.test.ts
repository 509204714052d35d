// A data step cut off by a crash runs again (a new attempt, once the dead executor's lease has
// expired) without doing its effect twice: add_note's note has an id derived from the run and
// the step, so the second attempt finds the first's note; and the step's activity entry is
// written once, whether the cut-off attempt wrote it or not. Real server and database, its
// executors taking over a run left RUNNING under an expired lease, as a dead process leaves it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNote } from "../src/domain/notes/threads.js";
import { writeRunActivity } from "../src/domain/runs/activity.js";
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
  it("add_note after its note and its entry: the next attempt adds neither again", async () => {
    const run = cutOff("r1", 1);
    const note = await firstAttemptNote(run, 1);
    await writeRunActivity(server.deps.store, { ...run, stepIndex: 1 }, "note.created", { noteId: note._id, step: 2 });
    await db.insertRuns([run]);
    const done = await waitForRun(server.deps.store, run._id);
    expect(done.state).toBe("SUCCEEDED");
    expect(done.steps[1]).toMatchObject({ state: "SUCCEEDED", attempts: 2, output: { noteId: note._id } });
    expect(await notesOn("r1")).toBe(1);
    expect(await entries(run._id, "note.created")).toBe(1);
    expect(await entries(run._id, "record.updated")).toBe(1);
  });

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

  it("update_record after its entry: the write is a set again, and its entry stays one", async () => {
    const run = cutOff("r3", 2);
    await writeRunActivity(server.deps.store, { ...run, stepIndex: 2 }, "record.updated", { fields: { status: "once" }, step: 3 });
    await db.insertRuns([run]);
    expect((await waitForRun(server.deps.store, run._id)).state).toBe("SUCCEEDED");
    expect(await entries(run._id, "record.updated")).toBe(1);
  });

  it("two runs on the record, or two add_note steps, never share a note: the id is the run's and the step's", () => {
    expect(derivedUuid("note:a:1")).not.toBe(derivedUuid("note:a:2"));
    expect(derivedUuid("note:a:1")).toBe(derivedUuid("note:a:1"));
    expect(derivedUuid("note:a:1")).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
