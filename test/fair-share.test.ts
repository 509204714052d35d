// Tenants share executors fairly: a wait parks its run instead of holding a slot, so one
// project's hour-long waits never stop another project's runs; QUEUED runs are claimed
// round-robin over projects, so one project's backlog never keeps another's run waiting
// behind it. Parked runs live in the database only: cancelled at once, and finished after
// the server was killed. Real server processes (`runhook start`) on the real database.
import { describe, expect, it } from "vitest";
import { storeFixtures } from "../src/store/index.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { newRunDoc } from "../src/domain/runs/model.js";
import type { RunDoc, StepDoc } from "../src/store/types.js";
import { databasePerTest, type ChildServer } from "./helpers/server.js";
import { createWorld, type World } from "../fixtures/world.js";
import { queueRun, waitForRun } from "./helpers/runs.js";
import { postHook } from "./helpers/webhook.js";
import { sleep } from "../src/lib/sleep.js";

// Each test has its own database (connected and indexed), and its server processes on it.
const t = databasePerTest();

const server = (env: Record<string, string> = {}): Promise<ChildServer> => t.spawn({ env });

const records = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `r${i}`, status: "new" }));

/** Waits until `pred` holds for the runs of `world`, or fails after `timeoutMs`. */
async function untilRuns(world: World, pred: (runs: RunDoc[]) => boolean, what: string, timeoutMs = 30_000): Promise<RunDoc[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const runs = await storeFixtures(t.store).runs.find({ workflowId: world.workflowId }).toArray();
    if (pred(runs)) return runs;
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}: ${JSON.stringify(runs.map((r) => [r.state, r.waitUntil ?? null]).slice(0, 5))}…`);
    await sleep(100);
  }
}

/** `n` QUEUED runs of `world`'s workflow in one insert, as TriggerService stores them. */
async function backlog(world: World, n: number, steps: StepDoc[]): Promise<void> {
  const wf = (await storeFixtures(t.store).workflows.findOne({ _id: world.workflowId }))!;
  const at = Date.now() - 60_000;
  await storeFixtures(t.store).insertRuns(
    Array.from({ length: n }, (_, i) =>
      newRunDoc({
        ...world,
        ...wf,
        organizationId: world.orgId,
        workflowId: wf._id,
        workflowVersion: 1,
        steps,
        recordId: `r${i}`,
        userId: world.user._id,
        userEmail: world.user.email,
        tokenId: "t",
        via: "webhook",
        createdAt: new Date(at + i),
      }),
    ),
  );
}

describe("waits do not hold executors", () => {
  it("project B's 40 hour-long waits are parked: project A's run still runs to its end; a parked run shows waitUntil and is cancelled at once", async () => {
    const hourWait: StepDoc[] = [
      { type: "wait", seconds: 3600 },
      { type: "update_record", set: { status: "done" } },
    ];
    const b = await createWorld(t.app, { steps: hourWait, records: records(40) });
    const a = await createWorld(t.app, { steps: [{ type: "load_record" }, { type: "wait", seconds: 1 }, { type: "update_record", set: { status: "done" } }] });
    const s = await server(); // default concurrency: 8 slots for everybody
    for (let i = 0; i < 40; i++) await queueRun(t.store, b, `r${i}`);
    // All 40 parked: RUNNING, holding no lease, due in an hour.
    const parked = await untilRuns(b, (rs) => rs.length === 40 && rs.every((r) => r.waitUntil), "B's 40 runs are parked");
    for (const r of parked) {
      expect(r.state).toBe("RUNNING");
      expect(r.lease).toBeNull();
      expect(r.steps[0]!.state).toBe("RUNNING");
      expect(r.waitUntil!.getTime()).toBe(r.steps[0]!.startedAt!.getTime() + 3_600_000);
    }
    // A's run is not stuck QUEUED behind them: it finishes (its own 1 s wait plus pick-up; the bound is generous).
    const aRun = await queueRun(t.store, a, "r1");
    const done = await waitForRun(t.store, aRun._id, undefined, 30_000);
    expect(done.state).toBe("SUCCEEDED");
    expect(await storeFixtures(t.store).records(a.dataDatabase, a.collection).findOne({ id: "r1" })).toMatchObject({ status: "done" });

    // GET /v1/runs/{id} shows the wait's end while the run is RUNNING.
    const victim = parked[0]!;
    const got = await fetch(`${s.baseUrl}/v1/runs/${victim._id}`, { headers: { authorization: `Bearer ${b.apiToken}` } });
    expect(got.status).toBe(200);
    const shown = (await got.json()) as { state: string; waitUntil?: string; steps: { state: string }[] };
    expect(shown).toMatchObject({ state: "RUNNING", waitUntil: victim.waitUntil!.toISOString() });
    expect(shown.steps[0]!.state).toBe("RUNNING");
    // Cancelled at once: no executor has to notice anything.
    const runs = createClient(RunService, createConnectTransport({ baseUrl: s.baseUrl, httpVersion: "1.1" }));
    const cancelled = await runs.cancelRun({ runId: victim._id }, { headers: { authorization: `Bearer ${b.userToken}` } });
    expect(cancelled.run!.state).toBe("CANCELLED");
    expect(cancelled.run!.waitUntil).toBeUndefined();
    expect(cancelled.run!.steps[0]!.state).toBe("CANCELLED");
    const after = (await storeFixtures(t.store).runs.findOne({ _id: victim._id }))!;
    expect(after).toMatchObject({ state: "CANCELLED", waitUntil: null, lease: null });
    // The others stay parked.
    expect(await storeFixtures(t.store).runs.countDocuments({ projectId: b.projectId, state: "RUNNING", waitUntil: { $ne: null } })).toBe(39);
  });

  it("a parked run survives a kill -9 of the server and finishes after the restart", async () => {
    const w = await createWorld(t.app, { steps: [{ type: "load_record" }, { type: "wait", seconds: 4 }, { type: "update_record", set: { status: "done" } }] });
    const first = await server();
    const q = await queueRun(t.store, w, "r1");
    const parked = await waitForRun(t.store, q._id, (r) => !!r.waitUntil, 15_000);
    expect(parked).toMatchObject({ state: "RUNNING", lease: null });
    await first.kill();
    await server();
    const run = await waitForRun(t.store, q._id, undefined, 30_000);
    expect(run.state).toBe("SUCCEEDED");
    expect(run.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]);
    expect(run.steps[1]!.finishedAt!.getTime() - run.steps[1]!.startedAt!.getTime()).toBeGreaterThanOrEqual(4000);
    // The resumed wait kept its start: it waited the remainder, not 4 s again.
    expect(run.steps[1]!.startedAt).toEqual(parked.steps[1]!.startedAt);
    expect(run.steps[1]!.attempts).toBe(1);
    expect(await storeFixtures(t.store).records(w.dataDatabase, w.collection).findOne({ id: "r1" })).toMatchObject({ status: "done" });
  });
});

describe("fair share between projects", () => {
  it("project A's run is claimed before project B's backlog of 300 queued runs drains", async () => {
    const quick: StepDoc[] = [{ type: "load_record" }];
    const b = await createWorld(t.app, { steps: quick, records: records(300) });
    const a = await createWorld(t.app, { steps: quick });
    // B's backlog is older than A's run, and there when the executors start.
    await backlog(b, 300, quick);
    await server({ RUNHOOK_EXECUTOR_CONCURRENCY: "2" });
    await untilRuns(b, (rs) => rs.some((r) => r.state !== "QUEUED"), "B's backlog is being worked on");
    const aRun = await queueRun(t.store, a, "r1");
    const done = await waitForRun(t.store, aRun._id, undefined, 60_000);
    expect(done.state).toBe("SUCCEEDED");
    // Most of B's backlog was still QUEUED when A's run was claimed.
    const claimedAfterA = await storeFixtures(t.store).runs.countDocuments({
      workflowId: b.workflowId,
      $or: [{ state: "QUEUED" }, { startedAt: { $gt: done.startedAt } }],
    });
    expect(claimedAfterA).toBeGreaterThan(150);
  });
});

describe("fair share between organizations", () => {
  it("an organization with 5 projects and a 5,000-run backlog holds one of two slots: another organization's runs start without waiting for it", async () => {
    // Runs that hold their slot a while: 40 data steps each.
    const slow: StepDoc[] = Array.from({ length: 40 }, () => ({ type: "load_record" as const }));
    const first = await createWorld(t.app, { steps: slow, records: records(1000) });
    const others = [1, 2, 3, 4].map(() => createWorld(t.app, { steps: slow, records: records(1000), organizationOf: first }));
    const a = [first, ...(await Promise.all(others))];
    for (const w of a) await backlog(w, 1000, slow);
    const b = await createWorld(t.app, { steps: [{ type: "load_record" }] });
    const s = await server({ RUNHOOK_EXECUTOR_CONCURRENCY: "2" });
    const runsOfA = storeFixtures(t.store).runs;
    /** A's runs that started (finished) in [from, to). */
    const aRuns = async (field: "startedAt" | "finishedAt", from: Date, to: Date) => {
      const counts = (["RUNNING", "SUCCEEDED", "FAILED"] as const).map((state) =>
        runsOfA.countDocuments({ state, organizationId: first.orgId, [field]: { $gte: from, $lt: to } }),
      );
      return (await Promise.all(counts)).reduce((x, y) => x + y, 0);
    };
    const end = Date.now() + 30_000;
    while ((await runsOfA.countDocuments({ state: "RUNNING", organizationId: first.orgId })) === 0 && Date.now() < end) await sleep(50);

    let startedWhileBWaited = 0;
    let finishedWhileBWaited = 0;
    for (let i = 1; i <= 3; i++) {
      const r = await postHook(s.baseUrl + b.hookPath, b.userToken, { record_id: `r${i}` });
      expect(r.status).toBe(202);
      const run = await waitForRun(t.store, r.body.runId as string, undefined, 30_000);
      expect(run.state).toBe("SUCCEEDED");
      startedWhileBWaited += await aRuns("startedAt", run.createdAt, run.startedAt!);
      finishedWhileBWaited += await aRuns("finishedAt", run.createdAt, run.startedAt!);
    }
    // A's backlog goes on (in one slot). B's runs did not wait for one of A's to free a slot (one
    // may end in the instant between a run's creation and its claim), nor behind A's next runs.
    expect(await runsOfA.countDocuments({ state: "QUEUED", organizationId: first.orgId })).toBeGreaterThan(4000);
    expect([startedWhileBWaited, finishedWhileBWaited].map((n) => n <= 1)).toEqual([true, true]);
  });
});
