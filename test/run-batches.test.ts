// Run batches over Connect, on the real server and its executors: a retry batch of failed runs
// (some with a run ongoing on their record: skipped with the reason), its dry run, the same batch
// again (nothing started twice), pacing and CancelRunBatch, a cancel batch, who may batch which
// runs, tenants, and the admin log's entries.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService, type RunBatch } from "../gen/runhook/v1/run_pb.js";
import { BATCH_CREATED } from "../src/domain/runs/batches.js";
import { finishedActiveKey, storeFixtures } from "../src/store/index.js";
import type { RunDoc, StepDoc } from "../src/store/types.js";
import { sleep } from "../src/lib/sleep.js";
import { createWorld, worldRun, type World } from "../fixtures/world.js";
import { serverForFile } from "./helpers/server.js";
import { runCli } from "./helpers/cli.js";

/** Batches keep at most this many of their runs ongoing here. */
const ONGOING = 3;
const server = serverForFile({ env: { RUNHOOK_BATCH_ONGOING_RUNS: String(ONGOING), RUNHOOK_EXECUTOR_CONCURRENCY: "8" } });

const auth = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
const runs = (): Client<typeof RunService> => createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
const fx = () => storeFixtures(server.deps.store);

const FAST: StepDoc[] = [{ type: "load_record" }];
const records = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `r${i + 1}`, status: "new" }));

/** A FAILED run of the world's workflow on `recordId`, by `by` (default the world's user), created `agoMs` ago. */
function failedRun(w: World, recordId: string, agoMs: number, steps: StepDoc[], by = w.user): RunDoc {
  const createdAt = new Date(Date.now() - agoMs);
  const run = worldRun(w, recordId, steps, { createdAt, userId: by._id, userEmail: by.email });
  const finishedAt = new Date(createdAt.getTime() + 10);
  return {
    ...run,
    state: "FAILED",
    error: "it failed",
    stepIndex: 0,
    steps: run.steps.map((s, i) => (i === 0 ? { ...s, state: "FAILED", error: "it failed", startedAt: createdAt, finishedAt } : s)),
    activeKey: finishedActiveKey(run._id, finishedAt),
    startedAt: createdAt,
    finishedAt,
  };
}

/** A run ongoing on the record, held under another process's live lease (no executor here takes it). */
function ongoingRun(w: World, recordId: string, steps: StepDoc[]): RunDoc {
  const run = worldRun(w, recordId, steps);
  return { ...run, state: "RUNNING", lease: { owner: "elsewhere#1", expiresAt: new Date(Date.now() + 3_600_000) }, startedAt: new Date() };
}

/** The batch once it is no longer RUNNING. */
async function finished(token: string, id: string, timeoutMs = 30_000): Promise<RunBatch> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const { batch } = await runs().getRunBatch({ batchId: id }, auth(token));
    if (batch!.state !== "RUNNING") return batch!;
    if (Date.now() > end) throw new Error(`batch ${id} still RUNNING: ${JSON.stringify(batch, (_, v) => (typeof v === "bigint" ? Number(v) : v))}`);
    await sleep(50);
  }
}

const runsOfBatch = (batchId: string) =>
  fx()
    .runs.find({ batchId } as never)
    .toArray();
const counts = (b: RunBatch) => ({ state: b.state, matched: Number(b.matched), done: Number(b.done), skipped: Number(b.skipped), failed: Number(b.failed) });

async function codeOf(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

describe("a retry batch of 50 failed runs, 3 of them with a run ongoing on their record", () => {
  it("dry run counts and starts nothing; the batch starts 47 and skips 3 with the reason, its own runs paced; again, it starts nothing", async () => {
    const w = await createWorld(server, { steps: FAST, records: records(50) });
    const failedRuns = Array.from({ length: 50 }, (_, i) => failedRun(w, `r${i + 1}`, 60_000 - i, FAST));
    const blocked = ["r5", "r17", "r33"];
    const blockers = blocked.map((r) => ongoingRun(w, r, FAST));
    await fx().insertRuns([...failedRuns, ...blockers]);
    const blockedRunIds = failedRuns.filter((r) => blocked.includes(r.recordId)).map((r) => r._id);
    const create = {
      projectName: w.projectName,
      environmentName: w.environmentName,
      action: "retry",
      filter: { workflowId: w.workflowId, states: ["FAILED"] },
    };

    const dry = (await runs().createRunBatch({ ...create, dryRun: true }, auth(w.adminToken))).batch!;
    expect(dry.state).toBe("RUNNING");
    expect(counts(await finished(w.adminToken, dry.id))).toEqual({ state: "SUCCEEDED", matched: 50, done: 47, skipped: 3, failed: 0 });
    expect(await fx().runs.countDocuments({ workflowId: w.workflowId })).toBe(53);

    const created = (await runs().createRunBatch(create, auth(w.adminToken))).batch!;
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      for (; sampling; await sleep(20))
        most = Math.max(most, (await runsOfBatch(created.id)).filter((r) => r.state === "QUEUED" || r.state === "RUNNING").length);
    })();
    const batch = await finished(w.adminToken, created.id);
    sampling = false;
    await sampler;
    expect(counts(batch)).toEqual({ state: "SUCCEEDED", matched: 50, done: 47, skipped: 3, failed: 0 });
    expect(batch.reasons.map((r) => ({ outcome: r.outcome, reason: r.reason, count: Number(r.count), runIds: [...r.runIds].sort() }))).toEqual([
      { outcome: "skipped", reason: "a run is ongoing on the record", count: 3, runIds: [...blockedRunIds].sort() },
    ]);
    const started = await runsOfBatch(created.id);
    expect(started).toHaveLength(47);
    const retried = started.map((r) => (r as RunDoc & { retryOf?: string }).retryOf);
    expect(new Set(retried).size).toBe(47);
    expect(retried.filter((id) => blockedRunIds.includes(id!))).toEqual([]);
    expect(most).toBeLessThanOrEqual(ONGOING);

    // The same batch again: every run is skipped (retried already, or still blocked); nothing starts.
    const again = (await runs().createRunBatch(create, auth(w.adminToken))).batch!;
    const second = await finished(w.adminToken, again.id);
    expect(counts(second)).toEqual({ state: "SUCCEEDED", matched: 50, done: 0, skipped: 50, failed: 0 });
    expect(second.reasons.map((r) => [r.reason, Number(r.count)]).sort()).toEqual([
      ["a run is ongoing on the record", 3],
      ["the run was already retried", 47],
    ]);
    expect(await runsOfBatch(again.id)).toHaveLength(0);

    const listed = (await runs().listRunBatches({ projectName: w.projectName, environmentName: w.environmentName }, auth(w.adminToken))).batches;
    expect(listed.map((b) => b.id)).toEqual([again.id, created.id, dry.id]);
    const entries = await fx()
      .adminLogs.find({ projectId: w.projectId, action: { $in: ["run_batch.created", "run_batch.finished"] } })
      .sort({ seq: 1 })
      .toArray();
    const ofBatch = entries.filter((e) => e.details.batchId === created.id);
    expect(ofBatch.map((e) => e.action)).toEqual(["run_batch.created", "run_batch.finished"]);
    expect(ofBatch[0]!.actor).toEqual({ id: w.admin._id, email: w.admin.email });
    expect(ofBatch[0]!.environment).toBe(w.environmentName);
    expect(ofBatch[0]!.details).toMatchObject({ action: "retry", dryRun: false, filter: { workflowId: w.workflowId, states: ["FAILED"] } });
    expect(ofBatch[1]!.details).toMatchObject({ state: "SUCCEEDED", matched: 50, done: 47, skipped: 3, failed: 0 });
  });
});

describe("CancelRunBatch, and a cancel batch", () => {
  const SLOW: StepDoc[] = [{ type: "wait", seconds: 600 }];

  it("a cancelled batch starts nothing more; a cancel batch cancels the ongoing runs and skips the finished ones", async () => {
    const w = await createWorld(server, { steps: SLOW, records: records(10) });
    await fx().insertRuns(Array.from({ length: 10 }, (_, i) => failedRun(w, `r${i + 1}`, 60_000 - i, SLOW)));
    const scope = { projectName: w.projectName, environmentName: w.environmentName };
    const created = (await runs().createRunBatch({ ...scope, action: "retry", filter: { states: ["FAILED"] } }, auth(w.adminToken))).batch!;
    // Its runs wait ten minutes: it starts as many as it keeps ongoing, then waits.
    for (let end = Date.now() + 15_000; (await runsOfBatch(created.id)).length < ONGOING && Date.now() < end; ) await sleep(50);
    const cancelled = (await runs().cancelRunBatch({ batchId: created.id }, auth(w.adminToken))).batch!;
    expect(cancelled.state).toBe("CANCELLED");
    expect(await codeOf(runs().cancelRunBatch({ batchId: created.id }, auth(w.adminToken)))).toBe(Code.FailedPrecondition);
    await sleep(1000);
    const after = await finished(w.adminToken, created.id);
    expect(after.state).toBe("CANCELLED");
    expect(await runsOfBatch(created.id)).toHaveLength(ONGOING);
    expect(Number(after.done)).toBe(ONGOING);

    const cancelAll = (await runs().createRunBatch({ ...scope, action: "cancel", filter: { workflowId: w.workflowId } }, auth(w.adminToken))).batch!;
    const ended = await finished(w.adminToken, cancelAll.id);
    // The 10 failed runs are skipped; the batch's 3 ongoing retries, created before it, are cancelled.
    expect(counts(ended)).toEqual({ state: "SUCCEEDED", matched: 13, done: 3, skipped: 10, failed: 0 });
    expect((await runsOfBatch(created.id)).map((r) => r.state)).toEqual(["CANCELLED", "CANCELLED", "CANCELLED"]);
    const logged = await fx().adminLogs.find({ projectId: w.projectId, action: "run_batch.cancelled" }).toArray();
    expect(logged.map((e) => [e.details.batchId, e.actor.id])).toEqual([[created.id, w.admin._id]]);
  });
});

describe("who batches which runs", () => {
  it("a user batches only their own runs and sees only their batches; a project API token is refused; tenants see nothing", async () => {
    const w = await createWorld(server, { steps: FAST, records: records(6) });
    const mine = [1, 2, 3].map((i) => failedRun(w, `r${i}`, 10_000 - i, FAST));
    const admins = [4, 5, 6].map((i) => failedRun(w, `r${i}`, 10_000 - i, FAST, w.admin));
    await fx().insertRuns([...mine, ...admins]);
    const scope = { projectName: w.projectName, environmentName: w.environmentName };

    const asked = { ...scope, action: "retry", filter: { states: ["FAILED"], userId: w.admin._id } };
    const batch = (await runs().createRunBatch(asked, auth(w.userToken))).batch!;
    expect(batch.filter!.userId).toBe(w.user._id);
    expect(batch.createdBy!.id).toBe(w.user._id);
    expect(counts(await finished(w.userToken, batch.id))).toEqual({ state: "SUCCEEDED", matched: 3, done: 3, skipped: 0, failed: 0 });
    const retried = (await runsOfBatch(batch.id)).map((r) => (r as RunDoc & { retryOf?: string }).retryOf).sort();
    expect(retried).toEqual(mine.map((r) => r._id).sort());

    const adminBatch = (await runs().createRunBatch({ ...scope, action: "retry", dryRun: true, filter: { states: ["FAILED"] } }, auth(w.adminToken))).batch!;
    expect(await codeOf(runs().getRunBatch({ batchId: adminBatch.id }, auth(w.userToken)))).toBe(Code.PermissionDenied);
    expect((await runs().getRunBatch({ batchId: batch.id }, auth(w.adminToken))).batch!.id).toBe(batch.id);
    const listed = await runs().listRunBatches(scope, auth(w.userToken));
    expect(listed.batches.map((b) => b.id)).toEqual([batch.id]);

    expect(await codeOf(runs().createRunBatch(asked, auth(w.apiToken)))).toBe(Code.PermissionDenied);
    expect(await codeOf(runs().getRunBatch({ batchId: batch.id }, auth(w.apiToken)))).toBe(Code.PermissionDenied);

    const other = await createWorld(server, { steps: FAST });
    for (const call of [
      () => runs().getRunBatch({ batchId: batch.id }, auth(other.ownerToken)),
      () => runs().cancelRunBatch({ batchId: adminBatch.id }, auth(other.adminToken)),
    ]) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.NotFound);
      expect(err?.rawMessage).not.toContain(batch.id);
      expect(err?.rawMessage).not.toContain(w.projectName);
    }
    expect(await codeOf(runs().getRunBatch({ batchId: "not-a-uuid" }, auth(w.adminToken)))).toBe(Code.InvalidArgument);
    expect(await codeOf(runs().createRunBatch({ ...scope, action: "rerun" }, auth(w.adminToken)))).toBe(Code.InvalidArgument);
    expect(await codeOf(runs().createRunBatch({ ...scope, action: "retry", filter: { states: ["DONE"] } }, auth(w.adminToken)))).toBe(Code.InvalidArgument);
  });
});

describe("a batch stored with a filter that this version refuses (a workflow id that is not a full id)", () => {
  it("ends FAILED saying why, instead of being tried again at every lease", async () => {
    const w = await createWorld(server, { steps: FAST });
    const scope = { projectName: w.projectName, environmentName: w.environmentName };
    const made = (await runs().createRunBatch({ ...scope, action: "cancel", dryRun: true }, auth(w.adminToken))).batch!;
    await finished(w.adminToken, made.id);
    const stored = (await fx().runBatches.findOne({ _id: made.id }))!;
    const old = {
      ...stored,
      _id: randomUUID(),
      filter: { ...stored.filter, workflowId: "b7633e71" },
      state: "RUNNING" as const,
      matched: 0,
      done: 0,
      cursor: null,
      lease: { owner: "", expiresAt: new Date(0) },
      finishedAt: null,
    };
    await server.deps.store.runBatches.create(old);
    server.deps.events.emit(BATCH_CREATED, old._id);
    const ended = await finished(w.adminToken, old._id);
    expect(ended.state).toBe("FAILED");
    expect(ended.error).toMatch(/^its filter is no longer accepted: workflowId must be a workflow's full id/);
  });
});

describe("runhook runs batch", () => {
  it("creates the batch with the runs list's filters and follows it to its end: a line per change, then the counts and reasons", async () => {
    const w = await createWorld(server, { steps: FAST, records: records(4) });
    const failedRuns = [1, 2, 3, 4].map((i) => failedRun(w, `r${i}`, 10_000 - i, FAST));
    await fx().insertRuns([...failedRuns, ongoingRun(w, "r4", FAST)]);
    const env = { RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: w.adminToken };
    const where = ["--project", w.projectName, "--environment", w.environmentName, "--workflow", w.workflowId, "--state", "FAILED"];

    const dry = await runCli(["runs", "batch", "retry", ...where, "--dry-run"], env);
    expect(dry.stderr).toBe("");
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/retry batch \(dry run\) [0-9a-f-]{36}: 4 runs handled — 3 would be done, 1 skipped, 0 failed: SUCCEEDED/);
    expect(dry.stdout).toContain(`  skipped 1: a run is ongoing on the record (runs ${failedRuns[3]!._id})`);

    const real = await runCli(["runs", "batch", "retry", ...where], env);
    expect(real.code).toBe(0);
    const id = /retry batch ([0-9a-f-]{36})/.exec(real.stdout)![1]!;
    expect(real.stdout).toContain("4 runs handled — 3 done, 1 skipped, 0 failed: SUCCEEDED");
    expect(await runsOfBatch(id)).toHaveLength(3);

    const bad = await runCli(["runs", "batch", "rerun", ...where], env);
    expect(bad.code).toBe(2);
    const denied = await runCli(["runs", "batch", "cancel", ...where], { ...env, RUNHOOK_TOKEN: w.apiToken });
    expect(denied.code).toBe(6);
  });
});
