// Runs: executors run the steps as the run's user; GetRun / WatchRun / CancelRun over
// gRPC, Connect and REST. Runs are inserted QUEUED exactly as TriggerService stores them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import http from "node:http";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService, WatchRunRequestSchema, WatchRunResponseSchema, type WatchRunResponse } from "../gen/runhook/v1/run_pb.js";
import { finishedActiveKey, isDuplicateKey, storeFixtures, type StoreFixtures } from "../src/store/index.js";
import type { ClaimScope } from "../src/store/runs.js";
import type { StepDoc } from "../src/store/types.js";
import { packRecordId, recordMatch, unpackRecordId } from "../src/domain/runs/records.js";
import { recordQuery } from "../src/store/records.js";

/** The query that finds a packed record id as a user with `scope` sees it (null: the id does not fit the key). */
const recordFilter = (primaryKey: string[], packed: string, scope: Record<string, unknown>) => {
  const match = recordMatch(primaryKey, packed, scope);
  return match && recordQuery(match);
};
import { RUN_QUEUED } from "../src/domain/runs/model.js";
import { startServer, withTestApp, type TestServer } from "./helpers/server.js";
import { addAppToken, addUser, createWorld } from "../fixtures/world.js";
import { grpcGetRun, queueRun, waitForRun } from "./helpers/runs.js";
import { adminClient, local, postHook } from "./helpers/webhook.js";
import { sleep } from "../src/lib/sleep.js";
import { errorBody } from "../src/rpc/errors.js";

let server: TestServer;
let db: StoreFixtures;
beforeAll(async () => {
  server = await startServer();
  db = storeFixtures(server.deps.store);
});
afterAll(async () => {
  await server?.stop();
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

/** The run's activity entries, once `n` are there (they are written right after each change). */
async function activity(runId: string, n = 1) {
  const end = Date.now() + 5000;
  for (;;) {
    const entries = await db.activityLogs
      .find({ runId, tomb: { $exists: false } })
      .sort({ _id: 1 })
      .toArray();
    if (entries.length >= n || Date.now() > end) return entries;
    await sleep(50);
  }
}

describe("packed record ids", () => {
  it("unpacks with escapes and builds string-or-number filters merged with the scope", () => {
    expect(unpackRecordId("a\\|b|c\\\\d|")).toEqual(["a|b", "c\\d", ""]);
    expect(unpackRecordId("bad\\x")).toBeNull();
    expect(packRecordId(["a|b", "c\\d", 3])).toBe("a\\|b|c\\\\d|3");
    expect(recordFilter(["id"], "42", {})).toEqual({ id: { $in: ["42", 42] } });
    expect(recordFilter(["id"], "042", {})).toEqual({ id: { $eq: "042" } });
    expect(recordFilter(["a", "b"], "x|1", { region: "eu" })).toEqual({ $and: [{ a: { $eq: "x" }, b: { $in: ["1", 1] } }, { region: { $eq: "eu" } }] });
    expect(recordFilter(["a", "b"], "x", {})).toBeNull();
  });
});

describe("executors", () => {
  it("runs a workflow to SUCCEEDED as the run's user and frees the slot", async () => {
    const w = await createWorld(server, {
      steps: [
        { type: "load_record" },
        { type: "update_record", set: { status: "done", stage: 2 } },
        { type: "add_note", content: "<p>checked</p><script>alert(1)</script>", title: "By workflow" },
      ],
    });
    const queued = await queueRun(server.deps.store, w, "r1");
    const run = await waitForRun(server.deps.store, queued._id);
    expect(run.state).toBe("SUCCEEDED");
    expect(run.error).toBe("");
    expect(run.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]);
    expect(run.steps.map((s) => s.attempts)).toEqual([1, 1, 1]);
    expect(run.startedAt).toBeInstanceOf(Date);
    expect(run.finishedAt!.getTime()).toBeGreaterThanOrEqual(run.startedAt!.getTime());
    expect(run.lease).toBeNull();
    expect(run.activeKey).toBe(finishedActiveKey(run._id, run.finishedAt!));
    expect(run.stepIndex).toBe(3);

    const record = await db.records(w.dataDatabase, w.collection).findOne({ id: "r1" });
    expect(record).toMatchObject({ status: "done", stage: 2, region: "eu" });

    const noteId = run.steps[2]!.output!.noteId as string;
    const note = await db.notes.findOne({ _id: noteId });
    expect(note).toMatchObject({
      recordId: "r1",
      collection: w.collection,
      title: "By workflow",
      user: { id: w.user._id, email: w.user.email },
      renderingId: w.renderingId,
    });
    expect(note!.messages[0]!.content).toContain("checked");
    expect(note!.messages[0]!.content).not.toContain("script");

    const entries = await activity(run._id, 3);
    expect(entries.map((e) => e.action)).toEqual(["record.updated", "note.created", "workflow.run.succeeded"]);
    for (const e of entries) {
      expect(e).toMatchObject({
        user: { id: w.user._id, email: w.user.email },
        via: "workflow",
        collection: w.collection,
        recordId: "r1",
        runId: run._id,
        environment: w.environmentName,
        rendering: w.renderingId,
        environmentId: w.environmentId,
        workflowId: w.workflowId,
      });
    }
    // The steps that wrote them, counted from 1 (the first step loads the record).
    expect(entries[0]!.details).toEqual({ fields: { status: "done", stage: 2 }, step: 2 });
    expect(entries[1]!.details).toEqual({ noteId, step: 3 });

    // The (workflow, record) slot is free: another ongoing run on the same record can be stored.
    const again = await queueRun(server.deps.store, w, "r1");
    expect((await waitForRun(server.deps.store, again._id)).state).toBe("SUCCEEDED");
  });

  it("allows one ongoing run per (workflow, record) through the unique index", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 30 }] });
    const first = await queueRun(server.deps.store, w, "r1");
    const err = await queueRun(server.deps.store, w, "r1").catch((e: unknown) => e);
    expect(isDuplicateKey(err)).toBe(true);
    await queueRun(server.deps.store, w, "r2"); // another record is fine
    await db.cancelRunsOf(w.workflowId); // tidy: executors let go
    void first;
  });

  it("picks up a run queued on this instance at once (run.queued event), others at the next poll", async () => {
    // An instance that polls only every 5 s: only the event can explain a fast pick-up.
    const slow = await startServer({ env: { RUNHOOK_EXECUTOR_POLL_MS: "5000" } });
    try {
      const sdb = slow.deps.store;
      const w = await createWorld(slow, { steps: [{ type: "wait", seconds: 0 }] });
      await sleep(200); // let its first poll pass
      const q = await queueRun(sdb, w, "r1");
      slow.deps.events.emit(RUN_QUEUED, q._id);
      const run = await waitForRun(sdb, q._id, (r) => r.startedAt !== null, 3000);
      expect(run.startedAt!.getTime() - q.createdAt.getTime()).toBeLessThan(150);
      await waitForRun(sdb, q._id);
      await sleep(300);
      // Without the event it waits for the poll.
      const q2 = await queueRun(sdb, w, "r2");
      await sleep(500);
      expect((await sdb.runs.get(q2._id))!.state).toBe("QUEUED");
    } finally {
      await slow.stop();
    }
  });

  it("fails at the first data step when the record is missing", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 0 }, { type: "load_record" }, { type: "update_record", set: { status: "x" } }] });
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "nope"))._id);
    expect(run.state).toBe("FAILED");
    expect(run.error).toMatch(/record "nope" of collection "orders" not found or not accessible/);
    expect(run.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "FAILED", "PENDING"]);
    expect(run.steps[1]!.error).toBe(run.error);
    expect(run.activeKey).toBe(finishedActiveKey(run._id, run.finishedAt!));
    const entries = await activity(run._id);
    expect(entries.map((e) => e.action)).toEqual(["workflow.run.failed"]);
    expect(entries[0]).toMatchObject({ user: { id: w.user._id }, details: { error: run.error, step: 1 } });
  });

  it("fails when the record is outside the rendering's scope, exactly like a missing one", async () => {
    const w = await createWorld(server, {
      scope: { region: "eu" },
      records: [
        { id: "in", region: "eu", status: "new" },
        { id: "out", region: "us", status: "new" },
      ],
    });
    const out = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "out"))._id);
    expect(out.state).toBe("FAILED");
    expect(out.steps[0]!.state).toBe("FAILED");
    expect(out.error).toMatch(/record "out" of collection "orders" not found or not accessible$/);
    const inScope = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "in"))._id);
    expect(inScope.state).toBe("SUCCEEDED");
    const coll = db.records(w.dataDatabase, w.collection);
    expect(await coll.findOne({ id: "out" })).toMatchObject({ status: "new" });
    expect(await coll.findOne({ id: "in" })).toMatchObject({ status: "done" });
  });

  it("fails when the user lost access between trigger and execution", async () => {
    const w = await createWorld(server);
    await db.removeTeamMember(w.teamId, w.user._id);
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "r1"))._id);
    expect(run.state).toBe("FAILED");
    expect(run.steps[0]!.state).toBe("FAILED");
    expect(run.error).toMatch(/not found or not accessible \(the token's user has no access to the rendering\)/);
    expect(await db.records(w.dataDatabase, w.collection).findOne({ id: "r1" })).toMatchObject({ status: "new" });
  });

  it("re-checks access at each data step: permission withdrawn during a wait fails the next data step", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 1 }, { type: "update_record", set: { status: "late" } }] });
    const q = await queueRun(server.deps.store, w, "r1");
    await waitForRun(server.deps.store, q._id, (r) => r.steps[1]!.state === "RUNNING");
    await db.setEditRoles(w.renderingId, w.collectionId, ["admin"]);
    const run = await waitForRun(server.deps.store, q._id);
    expect(run.state).toBe("FAILED");
    expect(run.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "FAILED"]);
    expect(run.error).toMatch(/may not edit records/);
    expect(await db.records(w.dataDatabase, w.collection).findOne({ id: "r1" })).toMatchObject({ status: "new" });
  });

  it("fails update_record without edit permission (read is not enough)", async () => {
    const w = await createWorld(server);
    await db.setEditRoles(w.renderingId, w.collectionId, ["admin", "editor"]);
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "r2"))._id);
    expect(run.state).toBe("FAILED");
    expect(run.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "FAILED"]);
    expect(run.error).toMatch(/not found or not accessible \(the role "user" may not edit records of this collection\)/);
    // The admin may.
    const asAdmin = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "r3", { userId: w.admin._id, userEmail: w.admin.email }))._id);
    expect(asAdmin.state).toBe("SUCCEEDED");
  });

  it("fails when the run's user was deleted", async () => {
    const w = await createWorld(server);
    const gone = await addUser(server, w, "user", { teamId: w.teamId });
    await db.removeUser(gone._id);
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "r1", { userId: gone._id, userEmail: gone.email }))._id);
    expect(run.state).toBe("FAILED");
    expect(run.error).toMatch(/no longer exists/);
  });

  it("finds records by composite packed keys, matching numbers stored as numbers", async () => {
    const w = await createWorld(server, {
      primaryKey: ["a", "b"],
      records: [
        { a: "x|y", b: 2, status: "new" },
        { a: "x|y", b: 3, status: "new" },
      ],
    });
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "x\\|y|2"))._id);
    expect(run.state).toBe("SUCCEEDED");
    const coll = db.records(w.dataDatabase, w.collection);
    expect(await coll.findOne({ a: "x|y", b: 2 })).toMatchObject({ status: "done" });
    expect(await coll.findOne({ a: "x|y", b: 3 })).toMatchObject({ status: "new" });
    const wrongArity = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "x"))._id);
    expect(wrongArity.state).toBe("FAILED");
  });

  it("fails a run whose workflow version vanished, with the reason", async () => {
    const w = await createWorld(server);
    const q = await queueRun(server.deps.store, w, "r1", { version: { version: 7, steps: [{ type: "load_record" }] } });
    const run = await waitForRun(server.deps.store, q._id);
    expect(run.state).toBe("FAILED");
    expect(run.error).toBe("version 7 of the workflow no longer exists");
    expect(run.activeKey).toBe(finishedActiveKey(run._id, run.finishedAt!));
    expect((await activity(run._id)).map((e) => e.action)).toEqual(["workflow.run.failed"]);
  });
});

describe("claiming and recovery", () => {
  it("executes a QUEUED run stored by an instance that died before it could run it", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }] });
    const q = await queueRun(server.deps.store, w, "r1", { createdAt: new Date(Date.now() - 3000) });
    // No event reached this instance's executors: the poll claims it from the database.
    const run = await waitForRun(server.deps.store, q._id, undefined, 10_000);
    expect(run.state).toBe("SUCCEEDED");
    expect(run.steps[0]!.attempts).toBe(1);
  });

  it("resumes a RUNNING run whose executor died (expired lease)", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }] });
    const q = await queueRun(server.deps.store, w, "r1");
    // Claimed by an executor that died at once: RUNNING, lease expired.
    await db.strandRun(q._id);
    const run = await waitForRun(server.deps.store, q._id, undefined, 10_000);
    expect(run.state).toBe("SUCCEEDED");
    expect(run.lease).toBeNull();
  });

  it("claims the oldest QUEUED run first, whatever the order they were stored in", async () => {
    // On a database no executor polls, so that the claims below are the only ones.
    await withTestApp(async (quiet, store) => {
      const w = await createWorld(quiet, { steps: [{ type: "load_record" }] });
      const newer = await queueRun(store, w, "r3", { createdAt: new Date(Date.now() - 30_000) });
      const older = await queueRun(store, w, "r2", { createdAt: new Date(Date.now() - 60_000) });
      const lease = () => ({ owner: "test#1", expiresAt: new Date(Date.now() + 10_000) });
      expect((await store.runs.claimNext(lease(), new Date()))?.run._id).toBe(older._id);
      expect((await store.runs.claimNext(lease(), new Date()))?.run._id).toBe(newer._id);
      expect(await store.runs.claimNext(lease(), new Date())).toBeNull();
    });
  });

  it("takes over a run whose lease expired before claiming queued runs, so new runs never keep it waiting", async () => {
    await withTestApp(async (quiet, store) => {
      const w = await createWorld(quiet, { steps: [{ type: "load_record" }] });
      const queued = await queueRun(store, w, "r2", { createdAt: new Date(Date.now() - 60_000) });
      const orphan = await queueRun(store, w, "r3", { createdAt: new Date(Date.now() - 1000) });
      await storeFixtures(store).strandRun(orphan._id, 1);
      const lease = () => ({ owner: "test#1", expiresAt: new Date(Date.now() + 10_000) });
      expect(await store.runs.claimNext(lease(), new Date())).toMatchObject({ run: { _id: orphan._id }, takeover: true });
      expect(await store.runs.claimNext(lease(), new Date())).toMatchObject({ run: { _id: queued._id }, takeover: false });
      expect(await store.runs.claimNext(lease(), new Date())).toBeNull();
    });
  });
});

describe("fair claims", () => {
  it("every kind of claim goes round-robin over organizations and skips busy ones; QUEUED runs also round-robin over an organization's projects", async () => {
    // On a database no executor polls, so that the claims below are the only ones.
    await withTestApp(async (quiet, store) => {
      const steps: StepDoc[] = [{ type: "load_record" }];
      const fx = storeFixtures(store);
      const [lo, hi] = (await Promise.all([createWorld(quiet, { steps }), createWorld(quiet, { steps })])).sort((a, b) => (a.orgId < b.orgId ? -1 : 1));
      const lease = () => ({ owner: "test#1", expiresAt: new Date(Date.now() + 10_000) });
      const claim = async (scope: ClaimScope = {}) => (await store.runs.claimNext(lease(), new Date(), scope))?.run._id;
      const ago = (s: number) => ({ createdAt: new Date(Date.now() - s * 1000) });

      // Takeovers: lo's lease expired long before hi's, yet the round-robin after lo takes hi's first.
      const [loStranded, hiStranded] = [await queueRun(store, lo, "r1", ago(90)), await queueRun(store, hi, "r1", ago(90))];
      await fx.strandRun(loStranded._id, 60_000);
      await fx.strandRun(hiStranded._id, 1000);
      expect(await claim({ afterOrganization: lo.orgId })).toBe(hiStranded._id);
      expect(await claim({ afterOrganization: hi.orgId })).toBe(loStranded._id);

      // QUEUED: lo's runs are older, but lo is busy.
      const second = await createWorld(quiet, { steps, organizationOf: lo });
      const [p1, p2] = [lo, second].sort((a, b) => (a.projectId < b.projectId ? -1 : 1));
      const oldInP1 = await queueRun(store, p1!, "r2", ago(60));
      const newInP2 = await queueRun(store, p2!, "r2", ago(30));
      const hiRun = await queueRun(store, hi, "r2", ago(1));
      expect(await claim({ busyOrganizations: [lo.orgId] })).toBe(hiRun._id);
      // In lo, after a claim of p1's, p2's run comes before p1's older one.
      expect(await claim({ afterProjectIn: (org) => (org === lo.orgId ? p1!.projectId : undefined) })).toBe(newInP2._id);
      expect(await claim({ busyProjects: [p2!.projectId] })).toBe(oldInP1._id);
      expect(await claim()).toBeUndefined();
    });
  });
});

describe("end to end through the webhook route", () => {
  it("202, 409 naming the same run while it is ongoing, SUCCEEDED, then 202 with a new run", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 1 }, { type: "update_record", set: { status: "done" } }] });
    const admin = adminClient(server.baseUrl, w.adminToken);
    const got = await admin.getWorkflow({ workflowId: w.workflowId });
    const url = local(got.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl);
    const activeKey = `${w.workflowId}|r1`;

    const first = await postHook(url, w.userToken, { record_id: "r1" });
    expect(first.status).toBe(202);
    const runId = first.body.runId!;
    const second = await postHook(url, w.userToken, { record_id: "r1" });
    expect(second.status).toBe(409);
    expect(second.body).toEqual({ ...errorBody("already_exists", "a run of this workflow is already ongoing on this record"), runId });
    // The ongoing run is the one holding the (workflow, record) slot of the unique index.
    expect(await db.runs.findOne({ activeKey })).toMatchObject({ _id: runId });

    // Follow it with the public API until it is finished.
    let version = "0";
    let run: { state: string; version: string } | undefined;
    const end = Date.now() + 15_000;
    while (Date.now() < end) {
      const res = await fetch(`${server.baseUrl}/v1/runs/${runId}?wait=10s&version=${version}`, { headers: auth(w.userToken) });
      expect(res.status).toBe(200);
      run = (await res.json()) as { state: string; version: string };
      version = run.version;
      if (["SUCCEEDED", "FAILED", "CANCELLED"].includes(run.state)) break;
    }
    expect(run?.state).toBe("SUCCEEDED");
    expect(await db.records(w.dataDatabase, w.collection).findOne({ id: "r1" })).toMatchObject({ status: "done" });

    // The slot is free: the same record starts a new run.
    const third = await postHook(url, w.userToken, { record_id: "r1" });
    expect(third.status).toBe(202);
    expect(third.body.runId).not.toBe(runId);
    expect(await db.runs.findOne({ activeKey })).toMatchObject({ _id: third.body.runId });
    // The finished run keeps its own id as activeKey, so the 409 names the new one.
    const fourth = await postHook(url, w.userToken, { record_id: "r1" });
    expect(fourth.status).toBe(409);
    expect(fourth.body.runId).toBe(third.body.runId);
    expect((await waitForRun(server.deps.store, third.body.runId!)).state).toBe("SUCCEEDED");
  });
});

describe("CancelRun", () => {
  it("cancels a waiting run promptly, frees the slot, and a finished run cannot be cancelled", async () => {
    const w = await createWorld(server, {
      steps: [
        { type: "wait", seconds: 30 },
        { type: "update_record", set: { status: "too-late" } },
      ],
    });
    const q = await queueRun(server.deps.store, w, "r1");
    await waitForRun(server.deps.store, q._id, (r) => r.steps[0]!.state === "RUNNING");
    const t0 = Date.now();
    const res = await fetch(`${server.baseUrl}/v1/runs/${q._id}/cancel`, { method: "POST", headers: auth(w.userToken) });
    const elapsed = Date.now() - t0;
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ id: q._id, state: "CANCELLED", error: `cancelled by ${w.user.email}` });
    expect(elapsed).toBeLessThan(1000);

    const run = (await db.runs.findOne({ _id: q._id }))!;
    expect(run).toMatchObject({ state: "CANCELLED", activeKey: finishedActiveKey(q._id, run.finishedAt!), lease: null });
    expect(run.steps.map((s) => s.state)).toEqual(["CANCELLED", "PENDING"]);
    // The executor let go: nothing changes afterwards, the record is untouched.
    await sleep(600);
    const later = (await db.runs.findOne({ _id: q._id }))!;
    expect(later.version).toBe(run.version);
    expect(await db.records(w.dataDatabase, w.collection).findOne({ id: "r1" })).toMatchObject({ status: "new" });

    const entries = await activity(q._id);
    expect(entries.map((e) => e.action)).toEqual(["workflow.run.cancelled"]);
    expect(entries[0]).toMatchObject({ user: { id: w.user._id }, via: "api", details: { cancelledBy: { id: w.user._id, email: w.user.email }, step: 0 } });

    // Slot free: a new ongoing run on the same record can be stored.
    const next = await queueRun(server.deps.store, w, "r1");
    expect(next.state).toBe("QUEUED");

    const again = await fetch(`${server.baseUrl}/v1/runs/${q._id}/cancel`, {
      method: "POST",
      headers: { ...auth(w.userToken), "content-type": "application/json" },
      body: "{}",
    });
    expect(again.status).toBe(400);
    expect(await again.json()).toMatchObject({ code: "failed_precondition" });

    const byApi = await fetch(`${server.baseUrl}/v1/runs/${next._id}/cancel`, { method: "POST", headers: auth(w.apiToken) });
    expect(byApi.status).toBe(403);
    const ok = await fetch(`${server.baseUrl}/v1/runs/${next._id}/cancel`, { method: "POST", headers: auth(w.adminToken) });
    expect(ok.status).toBe(200);
  });

  it("cancels a queued run that no executor has claimed", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }] });
    // Created in the future relative to the poller's sort order does not matter; cancel races the claim.
    const q = await queueRun(server.deps.store, w, "r1");
    const client = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const res = await client.cancelRun({ runId: q._id }, { headers: auth(w.userToken) }).catch((e: unknown) => e);
    // The executor may have finished it first (then FAILED_PRECONDITION); otherwise it is CANCELLED.
    const run = (await db.runs.findOne({ _id: q._id }))!;
    if (run.state === "CANCELLED") expect((res as { run: { state: string } }).run.state).toBe("CANCELLED");
    else expect(String(res)).toMatch(/already finished/);
  });
});

function grpcWatchRun(addr: string, token: string, runId: string, onFirst: () => void = () => {}): Promise<WatchRunResponse[]> {
  const client = new grpc.Client(addr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  const out: WatchRunResponse[] = [];
  return new Promise<WatchRunResponse[]>((resolve, reject) => {
    const stream = client.makeServerStreamRequest(
      "/runhook.v1.RunService/WatchRun",
      (m: { runId: string }) => Buffer.from(toBinary(WatchRunRequestSchema, create(WatchRunRequestSchema, m))),
      (b: Buffer) => fromBinary(WatchRunResponseSchema, b),
      { runId },
      md,
    );
    stream.on("data", (m: WatchRunResponse) => {
      if (out.push(m) === 1) onFirst();
    });
    stream.on("error", reject);
    stream.on("end", () => resolve(out));
  }).finally(() => client.close());
}

describe("following runs", () => {
  it("GetRun and WatchRun over native gRPC (grpc-js)", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 1 }, { type: "update_record", set: { status: "done" } }] });
    const q = await queueRun(server.deps.store, w, "r1");
    const watched = grpcWatchRun(server.grpcAddr, w.userToken, q._id);
    const first = await grpcGetRun(server.grpcAddr, w.userToken, { runId: q._id });
    expect(first.run?.id).toBe(q._id);
    expect(first.run?.user).toMatchObject({ id: w.user._id, email: w.user.email });
    expect(first.run?.steps).toHaveLength(3);

    const msgs = await watched;
    expect(msgs.length).toBeGreaterThanOrEqual(3);
    const versions = msgs.map((m) => Number(m.run!.version));
    for (let i = 1; i < versions.length; i++) expect(versions[i]).toBeGreaterThan(versions[i - 1]!);
    const last = msgs.at(-1)!.run!;
    expect(last.state).toBe("SUCCEEDED");
    expect(last.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "SUCCEEDED"]);
    expect(last.finishedAt).toBeDefined();

    const outsider = await addUser(server, w, "user"); // not in the rendering's team
    const denied = await grpcGetRun(server.grpcAddr, (await addAppToken(server, outsider._id)).plaintext, { runId: q._id }).catch((e: grpc.ServiceError) => e);
    expect((denied as grpc.ServiceError).code).toBe(grpc.status.PERMISSION_DENIED);
    const unauth = await grpcGetRun(server.grpcAddr, "rh_app_nope", { runId: q._id }).catch((e: grpc.ServiceError) => e);
    expect((unauth as grpc.ServiceError).code).toBe(grpc.status.UNAUTHENTICATED);
    const notFound = await grpcGetRun(server.grpcAddr, w.userToken, { runId: crypto.randomUUID() }).catch((e: grpc.ServiceError) => e);
    expect((notFound as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
    const bad = await grpcGetRun(server.grpcAddr, w.userToken, { runId: "not-a-uuid" }).catch((e: grpc.ServiceError) => e);
    expect((bad as grpc.ServiceError).code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it("GetRun long-poll and WatchRun over Connect", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 1 }, { type: "load_record" }] });
    const client = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const q = await queueRun(server.deps.store, w, "r1");
    const states: string[] = [];
    const watching = (async () => {
      for await (const m of client.watchRun({ runId: q._id }, { headers: auth(w.apiToken) })) states.push(m.run!.state);
    })();
    const now = await waitForRun(server.deps.store, q._id, (r) => !!r.waitUntil); // parked on its 1 s wait
    const t0 = Date.now();
    const changed = await client.getRun({ runId: q._id, waitSeconds: 10, knownVersion: BigInt(now.version) }, { headers: auth(w.userToken) });
    const waited = Date.now() - t0;
    expect(Number(changed.run!.version)).toBeGreaterThan(now.version);
    expect(waited).toBeGreaterThan(500); // the wait step holds the run for 1 s
    expect(waited).toBeLessThan(3000);
    await watching;
    expect(states.at(-1)).toBe("SUCCEEDED");
    expect(states).toContain("RUNNING");
  });

  it("a stop ends the calls in flight after 5 s: WatchRun with UNAVAILABLE (a dozen, no listener-leak warning), long polls with the run as it is", async () => {
    const own = await startServer();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    // A client that keeps its idle connections (Node's global agent drops them after 5 s).
    const agent = new http.Agent({ keepAlive: true });
    try {
      const w = await createWorld(own, { steps: [{ type: "wait", seconds: 600 }] });
      const client = createClient(RunService, createConnectTransport({ baseUrl: own.baseUrl, httpVersion: "1.1", nodeOptions: { agent } }));
      const runs = await Promise.all(Array.from({ length: 13 }, (_, i) => queueRun(own.deps.store, w, `r${i}`)));
      const opened: Promise<unknown>[] = [];
      const connectStreams = runs.slice(1).map((run) => {
        let first: () => void = () => {};
        opened.push(new Promise<void>((resolve) => (first = resolve)));
        return (async () => {
          for await (const _ of client.watchRun({ runId: run._id }, { headers: auth(w.apiToken) })) first();
        })();
      });
      let grpcOpened: () => void = () => {};
      opened.push(new Promise<void>((resolve) => (grpcOpened = resolve)));
      const grpcStream = grpcWatchRun(own.grpcAddr, w.apiToken, runs[0]!._id, grpcOpened);
      const connectEnds = Promise.allSettled(connectStreams);
      const grpcEnd = grpcStream.then(
        () => "ended",
        (e: grpc.ServiceError) => e.code,
      );
      // Long polls in flight too, over Connect, native gRPC and /v1: each answers the run as it is when the grace period is over.
      const longPoll = client.getRun({ runId: runs[1]!._id, waitSeconds: 60, knownVersion: 0n }, { headers: auth(w.apiToken) });
      const grpcLongPoll = grpcGetRun(own.grpcAddr, w.apiToken, { runId: runs[3]!._id, waitSeconds: 60 }).catch((e: grpc.ServiceError) => e);
      const restLongPoll = new Promise<{ status?: number; body: string }>((resolve, reject) => {
        const req = http.get(`${own.baseUrl}/v1/runs/${runs[2]!._id}?wait=60s`, { agent, headers: auth(w.apiToken) }, (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode, body }));
        });
        req.on("error", reject);
      });
      await Promise.all(opened); // every stream is in flight on the server
      // Without closing each connection as its call ends, the stop would wait for this agent's
      // idle connections until the keep-alive timeout (72 s), past the test's 60 s.
      await own.stop();
      const codes = (await connectEnds).map((r) => (r.status === "rejected" ? ConnectError.from(r.reason).code : "ended"));
      expect(codes).toEqual(Array.from({ length: 12 }, () => Code.Unavailable)); // not a clean end: the runs are not finished
      expect(await grpcEnd).toBe(grpc.status.UNAVAILABLE);
      expect((await longPoll).run?.state).toBe("RUNNING");
      expect(((await grpcLongPoll) as { run?: { state: string } }).run?.state).toBe("RUNNING");
      const rest = await restLongPoll;
      expect(rest.status).toBe(200);
      expect(JSON.parse(rest.body)).toMatchObject({ id: runs[2]!._id, state: "RUNNING" });
      expect(warnings.filter((warning) => warning.name === "MaxListenersExceededWarning")).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      agent.destroy();
    }
  });
});

describe("GET /v1/runs/{runId}", () => {
  it("answers the run to allowed callers only", async () => {
    const w = await createWorld(server, { steps: [{ type: "load_record" }] });
    const other = await createWorld(server);
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, w, "r1"))._id);
    const get = (token: string | null, id = run._id, query = "") => fetch(`${server.baseUrl}/v1/runs/${id}${query}`, { headers: token ? auth(token) : {} });

    const ok = await get(w.userToken);
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      id: run._id,
      workflowId: w.workflowId,
      workflowVersion: 1,
      state: "SUCCEEDED",
      recordId: "r1",
      collection: "orders",
      user: { id: w.user._id, email: w.user.email },
      via: "webhook",
      version: String(run.version),
      error: "",
    });
    expect(body.steps).toEqual([expect.objectContaining({ index: 0, type: "load_record", state: "SUCCEEDED" })]);
    expect(typeof body.createdAt).toBe("string");
    expect(body).not.toHaveProperty("run");

    expect((await get(w.apiToken)).status).toBe(200);
    // Another organization's token: the run is as unknown to it as a missing one.
    expect((await get(other.apiToken)).status).toBe(404);
    // A user of the project who is not in the rendering's team.
    const outsider = await addUser(server, w, "user");
    const outsiderToken = (await addAppToken(server, outsider._id)).plaintext;
    const denied = await get(outsiderToken);
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ code: "permission_denied", error: expect.any(String) });
    // A user of another organization: not found, as for its API token.
    expect((await get(other.userToken)).status).toBe(404);
    // A role that may not trigger the workflow.
    await db.setTriggerRoles(w.workflowId, ["admin"]);
    expect((await get(w.userToken)).status).toBe(403);
    expect((await get(w.adminToken)).status).toBe(200);

    const unknown = await get(w.adminToken, crypto.randomUUID());
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: "not_found" });
    expect((await get(w.adminToken, "nope")).status).toBe(400);
    expect((await get(null)).status).toBe(401);
    expect((await get(w.adminToken, run._id, "?wait=61s")).status).toBe(400);
    expect((await get(w.adminToken, run._id, "?wait=abc")).status).toBe(400);
    expect((await get(w.adminToken, run._id, "?version=x")).status).toBe(400);
    // A finished run answers at once, whatever the wait.
    const t0 = Date.now();
    expect((await get(w.adminToken, run._id, `?wait=30s&version=${run.version}`)).status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("long-polls: returns as soon as the version changes, or when the wait is over", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 30 }] });
    const q = await queueRun(server.deps.store, w, "r1");
    const running = await waitForRun(server.deps.store, q._id, (r) => !!r.waitUntil); // parked on its wait
    // Nothing changes for 1 s: answers after the wait with the same version.
    let t0 = Date.now();
    let res = await fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=1&version=${running.version}`, { headers: auth(w.userToken) });
    expect(res.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expect(((await res.json()) as { version: string }).version).toBe(String(running.version));
    // A change (cancel) ends the wait at once.
    t0 = Date.now();
    const pending = fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=30s&version=${running.version}`, { headers: auth(w.apiToken) });
    await sleep(300);
    await fetch(`${server.baseUrl}/v1/runs/${q._id}/cancel`, { method: "POST", headers: auth(w.userToken) });
    res = await pending;
    const elapsed = Date.now() - t0;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { state: string }).state).toBe("CANCELLED");
    expect(elapsed).toBeLessThan(1500);
    // No version given: answers at once.
    t0 = Date.now();
    await fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=30s`, { headers: auth(w.userToken) });
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
