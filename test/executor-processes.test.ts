// Executors in separate processes (`runhook worker`) sharing the work through MongoDB:
// every run executed exactly once; a killed executor's run finished by another.
import { describe, expect, it } from "vitest";
import { storeFixtures } from "../src/store/index.js";
import type { RunDoc } from "../src/store/types.js";
import { databasePerTest, type ChildServer } from "./helpers/server.js";
import { createWorld } from "../fixtures/world.js";
import { FINISHED, queueRun, waitForRun } from "./helpers/runs.js";
import { sleep } from "../src/lib/sleep.js";

// Each test has its own database (connected and indexed), and its server processes on it.
const t = databasePerTest();

/**
 * How many runs the two workers share (RUNHOOK_TEST_SHARED_RUNS).
 */
const SHARED_RUNS = Number(process.env.RUNHOOK_TEST_SHARED_RUNS ?? 200);

/** Activity entries are written right after the change they describe: wait until `n` match. */
async function activityCount(filter: Record<string, unknown>, n: number): Promise<number> {
  const end = Date.now() + 10_000;
  for (;;) {
    const c = await storeFixtures(t.store).activityLogs.countDocuments(filter);
    if (c >= n || Date.now() > end) return c;
    await sleep(200);
  }
}
const worker = (env: Record<string, string> = {}): Promise<ChildServer> => t.spawn({ mode: "worker", env: { RUNHOOK_EXECUTOR_POLL_MS: "100", ...env } });

describe("executor processes", () => {
  it(`two workers share ${SHARED_RUNS} runs; each run is executed exactly once`, async () => {
    const n = SHARED_RUNS;
    const records = Array.from({ length: n }, (_, i) => ({ id: `r${i}`, status: "new" }));
    const w = await createWorld(t.app, {
      records,
      // One data step with a countable side effect: a note per execution.
      steps: [{ type: "add_note", content: "<p>seen</p>", title: "" }],
    });
    const [a, b] = await Promise.all([worker(), worker()]);
    const runs: RunDoc[] = [];
    for (const r of records) runs.push(await queueRun(t.store, w, r.id));

    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      if ((await storeFixtures(t.store).runs.countDocuments({ workflowId: w.workflowId, state: { $in: FINISHED } })) === n) break;
      await sleep(500);
    }
    const done = await storeFixtures(t.store).runs.find({ workflowId: w.workflowId }).toArray();
    expect(done).toHaveLength(n);
    expect(done.filter((r) => r.state !== "SUCCEEDED").map((r) => `${r._id} ${r.state} ${r.error}`)).toEqual([]);
    // Every step started exactly once.
    expect(
      done
        .filter((r) => r.steps.some((s) => s.attempts !== 1))
        .map(
          (r) => `${r._id} attempts ${r.steps.map((s) => s.attempts).join(",")} started ${r.startedAt?.toISOString()} finished ${r.finishedAt?.toISOString()}`,
        ),
    ).toEqual([]);
    // Both processes did part of the work.
    const executors = new Set(done.map((r) => r.steps[0]!.executor!.split(":")[1]));
    expect(executors).toEqual(new Set([String(a.child.pid), String(b.child.pid)]));

    // Side effects happened once per run: one note per record, one succeeded entry per run.
    const notes = await storeFixtures(t.store).notes.find({ environmentId: w.environmentId }).toArray();
    expect(notes).toHaveLength(n);
    expect(new Set(notes.map((x) => x.recordId)).size).toBe(n);
    await activityCount({ environmentId: w.environmentId, action: "workflow.run.succeeded" }, n);
    const entries = await storeFixtures(t.store).activityLogs.find({ environmentId: w.environmentId }).toArray();
    const count = (action: string) => {
      const m = new Map<string, number>();
      for (const e of entries) if (e.action === action) m.set(e.runId!, (m.get(e.runId!) ?? 0) + 1);
      return m;
    };
    for (const action of ["workflow.run.succeeded", "note.created"]) {
      const m = count(action);
      expect(m.size, action).toBe(n);
      expect(
        [...m.values()].every((x) => x === 1),
        action,
      ).toBe(true);
    }
    await Promise.all([a.stop(), b.stop()]);
  }, 150_000);

  it("kill -9 of the executor while its run is parked on a wait: another worker resumes it when due and finishes", async () => {
    const WAIT_S = 8;
    const w = await createWorld(t.app, {
      steps: [
        { type: "load_record" },
        { type: "wait", seconds: WAIT_S },
        { type: "update_record", set: { status: "done" } },
        { type: "add_note", content: "after the crash", title: "" },
      ],
    });
    const a = await worker();
    const q = await queueRun(t.store, w, "r1");
    // Parked: still RUNNING, the wait step RUNNING, no lease held, due at the wait's end.
    const parked = await waitForRun(t.store, q._id, (r) => !!r.waitUntil, 10_000);
    expect(parked.state).toBe("RUNNING");
    expect(parked.lease).toBeNull();
    expect(parked.steps[1]!.state).toBe("RUNNING");
    expect(parked.steps[1]!.executor).toContain(`:${a.child.pid}:`);
    expect(parked.waitUntil!.getTime()).toBe(parked.steps[1]!.startedAt!.getTime() + WAIT_S * 1000);
    await a.kill();
    const b = await worker();
    const run = await waitForRun(t.store, q._id, undefined, WAIT_S * 1000 + 15_000);
    expect(run.state).toBe("SUCCEEDED");
    expect(run.waitUntil).toBeNull();
    // The wait was started once and kept its start: it waited WAIT_S in total.
    expect(run.steps.map((s) => s.attempts)).toEqual([1, 1, 1, 1]);
    expect(run.steps[2]!.executor).toContain(`:${b.child.pid}:`);
    const waited = run.steps[1]!.finishedAt!.getTime() - run.steps[1]!.startedAt!.getTime();
    expect(waited).toBeGreaterThanOrEqual(WAIT_S * 1000);
    expect(await storeFixtures(t.store).records(w.dataDatabase, w.collection).findOne({ id: "r1" })).toMatchObject({ status: "done" });
    expect(await storeFixtures(t.store).notes.countDocuments({ environmentId: w.environmentId, recordId: "r1" })).toBe(1);
    expect(await activityCount({ runId: q._id, action: "workflow.run.succeeded" }, 1)).toBe(1);
    await b.stop();
  });

  it("a stopping worker (SIGTERM) leaves its parked runs to the others, which finish them when due", async () => {
    const env = { RUNHOOK_EXECUTOR_LEASE_MS: "20000" };
    const w = await createWorld(t.app, { steps: [{ type: "wait", seconds: 6 }, { type: "load_record" }] });
    const a = await worker(env);
    const q = await queueRun(t.store, w, "r1");
    await waitForRun(t.store, q._id, (r) => !!r.waitUntil, 10_000);
    await a.stop();
    const b = await worker(env);
    const run = await waitForRun(t.store, q._id, undefined, 20_000);
    expect(run.state).toBe("SUCCEEDED");
    expect(run.steps[1]!.executor).toContain(`:${b.child.pid}:`);
    await b.stop();
  });
});
