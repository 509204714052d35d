// Operators act on runs: StartRun starts a run on a record as its caller, RetryRun starts a
// finished run again (from its first step, or from its failed step), over gRPC, Connect and
// /v1, with the webhook's checks in the webhook's order. Real server, real database, executors on.
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  RetryRunRequestSchema,
  RetryRunResponseSchema,
  RunService,
  StartRunRequestSchema,
  StartRunResponseSchema,
  type Run,
} from "../gen/runhook/v1/run_pb.js";
import { OngoingRunSchema } from "../gen/runhook/v1/trigger_pb.js";
import { storeFixtures, type StoreFixtures } from "../src/store/index.js";
import { callAdmin } from "../src/cli/demo.js";
import { addAppToken, addUser, createWorld, type World } from "../fixtures/world.js";
import { apiClient } from "./helpers/api.js";
import { spawnCli } from "./helpers/cli.js";
import { waitForRun } from "./helpers/runs.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { grpcUnary, postHook, UUID_RE } from "./helpers/webhook.js";

let server: TestServer;
let db: StoreFixtures;
let runs: Client<typeof RunService>;

beforeAll(async () => {
  server = await startServer();
  db = storeFixtures(server.deps.store);
  runs = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
});
afterAll(async () => {
  await server?.stop();
});

type R = Record<string, any>;
const auth = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
const admin = (w: World, method: string, init: R) => callAdmin(server.services.admin, method as never, w.ownerToken, init as never) as Promise<R>;

/** The Connect error of a call that must fail. */
async function refusal(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call succeeded");
}

/** A workflow of `w`'s rendering and collection with `steps` (its webhook off); its id. */
async function workflow(w: World, steps: R[], triggerRoles: string[] = []): Promise<string> {
  const name = `wf ${randomUUID().slice(0, 6)}`;
  return (await admin(w, "createWorkflow", { renderingId: w.renderingId, collectionId: w.collectionId, name, steps, triggerRoles })).workflow.id;
}

const WAIT_LONG = [{ kind: { case: "wait", value: { seconds: 600 } } }];
const grpcStart = (req: R, token: string) =>
  grpcUnary(server.grpcAddr, "/runhook.v1.RunService/StartRun", StartRunRequestSchema, StartRunResponseSchema, req, token);
const grpcRetry = (req: R, token: string) =>
  grpcUnary(server.grpcAddr, "/runhook.v1.RunService/RetryRun", RetryRunRequestSchema, RetryRunResponseSchema, req, token);

describe("StartRun", () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
  });

  it("starts the latest active version on the record as the caller, over gRPC, and the activity log names the caller", async () => {
    const { value, error } = await grpcStart({ workflowId: w.workflowId, recordId: "r1" }, w.adminToken);
    expect(error).toBeUndefined();
    expect(value!.runId).toMatch(UUID_RE);
    const run = await waitForRun(server.deps.store, value!.runId);
    expect(run).toMatchObject({ state: "SUCCEEDED", userId: w.admin._id, via: "grpc", recordId: "r1", workflowId: w.workflowId });
    const entry = await db.activityLogs.findOne({ runId: run._id, action: "workflow.run.triggered" });
    expect(entry).toMatchObject({ user: { id: w.admin._id, email: w.admin.email }, via: "grpc" });
  });

  it("answers 409 naming the ongoing run, and an idempotency key replays its first call", async () => {
    const slow = await workflow(w, WAIT_LONG);
    const first = await runs.startRun({ workflowId: slow, recordId: "r2", idempotencyKey: "k-1" }, auth(w.userToken));
    const again = await runs.startRun({ workflowId: slow, recordId: "r2", idempotencyKey: "k-1" }, auth(w.userToken));
    expect(again).toMatchObject({ runId: first.runId, replayed: true });
    const other = await refusal(runs.startRun({ workflowId: slow, recordId: "r3", idempotencyKey: "k-1" }, auth(w.userToken)));
    expect(other.code).toBe(Code.FailedPrecondition);
    const busy = await refusal(runs.startRun({ workflowId: slow, recordId: "r2" }, auth(w.userToken)));
    expect(busy.code).toBe(Code.AlreadyExists);
    expect(busy.findDetails(OngoingRunSchema)[0]?.runId).toBe(first.runId);
    await runs.cancelRun({ runId: first.runId }, auth(w.userToken));
    expect(await db.runs.countDocuments({ workflowId: slow })).toBe(1);
  });

  it("refuses in the webhook's order, the URL's checks aside", async () => {
    const stranger = await createWorld(server);
    const noRole = await addAppToken(server, (await addUser(server, w, null))._id);
    const outsider = await addAppToken(server, (await addUser(server, w, "user"))._id); // not in the rendering's team
    const adminsOnly = await workflow(w, WAIT_LONG, ["admin"]);
    const codeOf = async (req: R, token: string) => (await refusal(runs.startRun(req as never, auth(token)))).code;
    // 401 first, whatever else is wrong.
    expect(await codeOf({ workflowId: randomUUID(), recordId: "" }, "rh_app_bogus")).toBe(Code.Unauthenticated);
    // Unknown workflow, or another organization's (the same answer, no id in it): 404 before the permission.
    const unknown = await refusal(runs.startRun({ workflowId: randomUUID(), recordId: "" }, auth(noRole.plaintext)));
    expect(unknown.code).toBe(Code.NotFound);
    const foreign = await refusal(runs.startRun({ workflowId: stranger.workflowId, recordId: "r1" }, auth(w.adminToken)));
    expect([foreign.code, foreign.rawMessage]).toEqual([unknown.code, unknown.rawMessage]);
    expect(foreign.rawMessage).not.toContain(stranger.workflowId);
    // 403 (no role, not in the team) before a bad record id.
    expect(await codeOf({ workflowId: w.workflowId, recordId: "" }, noRole.plaintext)).toBe(Code.PermissionDenied);
    expect(await codeOf({ workflowId: w.workflowId, recordId: "" }, outsider.plaintext)).toBe(Code.PermissionDenied);
    expect(await codeOf({ workflowId: adminsOnly, recordId: "" }, w.userToken)).toBe(Code.PermissionDenied);
    // A project API token does not start runs: a run acts as a user.
    expect(await codeOf({ workflowId: w.workflowId, recordId: "r1" }, w.apiToken)).toBe(Code.PermissionDenied);
    // The record id last: 400.
    expect(await codeOf({ workflowId: w.workflowId, recordId: "" }, w.userToken)).toBe(Code.InvalidArgument);
    expect(await codeOf({ workflowId: "not-a-uuid", recordId: "r1" }, w.userToken)).toBe(Code.InvalidArgument);
  });

  it("a project that requires SSO refuses a token made without it (403)", async () => {
    const sso = await createWorld(server, { requiresSso: true });
    const plain = await addAppToken(server, sso.user._id, { sso: false });
    expect((await refusal(runs.startRun({ workflowId: sso.workflowId, recordId: "r1" }, auth(plain.plaintext)))).code).toBe(Code.PermissionDenied);
  });

  it("shares the webhook's rate limit: over it is 429, before a bad record id", async () => {
    const limited = await createWorld(server, { rateLimitPerMinute: 2 });
    for (const record of ["r1", "r2"]) await runs.startRun({ workflowId: limited.workflowId, recordId: record }, auth(limited.userToken));
    const over = await refusal(runs.startRun({ workflowId: limited.workflowId, recordId: "" }, auth(limited.userToken)));
    expect(over.code).toBe(Code.ResourceExhausted);
    const hook = await postHook(`${server.baseUrl}${limited.hookPath}`, limited.userToken, { record_id: "r3" });
    expect(hook.status).toBe(429);
  });

  it("/v1: POST …/runs answers 202 {runId}; the workflow must be in the path's environment", async () => {
    const api = apiClient(server.gateway, w.userToken);
    const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/runs`;
    const ok = await api.post(path, { workflowId: w.workflowId, recordId: "r4" });
    expect(ok.status).toBe(202);
    expect(ok.body).toEqual({ runId: expect.stringMatching(UUID_RE) });
    expect((await waitForRun(server.deps.store, ok.body.runId)).via).toBe("api");
    const elsewhere = await api.post(`/v1/project/${w.projectName}/environment/staging/runs`, { workflowId: w.workflowId, recordId: "r4" });
    expect(elsewhere.status).toBe(404);
    const badType = await api.post(path, { workflowId: w.workflowId, recordId: 7 });
    expect(badType.status).toBe(400);
    // Idempotency-Key works as the webhook's.
    const headers = { "idempotency-key": `v1-${randomUUID()}` };
    const first = await api.call("POST", path, { body: { workflowId: w.workflowId, recordId: "r5" }, headers });
    const repeat = await api.call("POST", path, { body: { workflowId: w.workflowId, recordId: "r5" }, headers });
    expect(repeat.status).toBe(202);
    expect(repeat.body.runId).toBe(first.body.runId);
    expect(repeat.headers.get("idempotent-replayed")).toBe("true");
  });
});

describe("RetryRun", () => {
  /** load_record, add_note, update_record. */
  const NOTE_THEN_UPDATE: R[] = [
    { kind: { case: "loadRecord", value: {} } },
    { kind: { case: "addNote", value: { content: "<p>checked</p>", title: "Check" } } },
    { kind: { case: "updateRecord", value: { set: { status: "retried" } } } },
  ];
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
  });

  const setEdit = (roles: string[]) =>
    admin(w, "setCollectionPermission", {
      permission: { renderingId: w.renderingId, collectionId: w.collectionId, readRoles: ["admin", "editor", "user"], editRoles: roles, scope: {} },
    });

  it("from the failed step: the steps that succeeded are SKIPPED (done in the failed run), and the record has one note", async () => {
    const wf = await workflow(w, NOTE_THEN_UPDATE);
    await setEdit(["admin"]); // the user may read and add notes, not edit: the update fails
    const { runId } = await runs.startRun({ workflowId: wf, recordId: "r1" }, auth(w.userToken));
    const failed = await waitForRun(server.deps.store, runId);
    expect(failed.state).toBe("FAILED");
    expect(failed.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "FAILED"]);
    await setEdit(["admin", "editor", "user"]);
    const { value, error } = await grpcRetry({ runId, fromFailedStep: true }, w.userToken);
    expect(error).toBeUndefined();
    const retry = await waitForRun(server.deps.store, value!.runId);
    expect(retry).toMatchObject({ state: "SUCCEEDED", retryOf: runId, workflowVersion: failed.workflowVersion });
    expect(retry.steps.map((s) => [s.state, s.doneInRunId])).toEqual([
      ["SKIPPED", runId],
      ["SKIPPED", runId],
      ["SUCCEEDED", undefined],
    ]);
    expect(await db.notes.countDocuments({ environmentId: w.environmentId, collection: w.collection, recordId: "r1" })).toBe(1);
    // Each page links to the other.
    const old = (await runs.getRun({ runId }, auth(w.userToken))).run as Run;
    expect(old.retries).toEqual([retry._id]);
    const fresh = (await runs.getRun({ runId: retry._id }, auth(w.userToken))).run as Run;
    expect(fresh.retryOf).toBe(runId);
    expect(fresh.steps.slice(0, 2).map((s) => [s.state, s.doneInRunId])).toEqual([
      ["SKIPPED", runId],
      ["SKIPPED", runId],
    ]);
    const entry = await db.activityLogs.findOne({ runId: retry._id, action: "workflow.run.triggered" });
    expect(entry?.details).toMatchObject({ retryOf: runId, fromStep: 3 });
  });

  it("from the start by default, on the latest active version; the 409 rule and idempotency hold", async () => {
    const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: "no-such-record" });
    const failed = await waitForRun(server.deps.store, hook.body.runId!);
    expect(failed.state).toBe("FAILED");
    const key = `retry-${randomUUID()}`;
    const a = await runs.retryRun({ runId: failed._id, idempotencyKey: key }, auth(w.adminToken));
    const b = await runs.retryRun({ runId: failed._id, idempotencyKey: key }, auth(w.adminToken));
    expect(b).toMatchObject({ runId: a.runId, replayed: true });
    const other = await refusal(runs.retryRun({ runId: failed._id, fromFailedStep: true, idempotencyKey: key }, auth(w.adminToken)));
    expect(other.code).toBe(Code.FailedPrecondition);
    const retry = await waitForRun(server.deps.store, a.runId);
    // The caller's run: it acts as the admin who retried it.
    expect(retry).toMatchObject({ retryOf: failed._id, userId: w.admin._id, recordId: "no-such-record" });
    expect(retry.steps.every((s) => s.state !== "SKIPPED")).toBe(true);
  });

  it("refuses in words: an ongoing run, a run that did not fail, an inactive version, an ongoing run on the record", async () => {
    const slow = await workflow(w, WAIT_LONG);
    const { runId: ongoing } = await runs.startRun({ workflowId: slow, recordId: "r2" }, auth(w.userToken));
    const notFinished = await refusal(runs.retryRun({ runId: ongoing }, auth(w.userToken)));
    expect([notFinished.code, notFinished.rawMessage]).toEqual([Code.FailedPrecondition, expect.stringMatching(/is not finished/)]);
    await runs.cancelRun({ runId: ongoing }, auth(w.userToken));
    const notFailed = await refusal(runs.retryRun({ runId: ongoing, fromFailedStep: true }, auth(w.userToken)));
    expect([notFailed.code, notFailed.rawMessage]).toEqual([Code.FailedPrecondition, expect.stringMatching(/did not fail/)]);
    // A retry while another run of the workflow is ongoing on the record: 409 naming it.
    const again = await runs.retryRun({ runId: ongoing }, auth(w.userToken));
    const busy = await refusal(runs.retryRun({ runId: ongoing }, auth(w.userToken)));
    expect(busy.code).toBe(Code.AlreadyExists);
    expect(busy.findDetails(OngoingRunSchema)[0]?.runId).toBe(again.runId);
    await runs.cancelRun({ runId: again.runId }, auth(w.userToken));

    const wf = await workflow(w, NOTE_THEN_UPDATE);
    await setEdit(["admin"]);
    const { runId } = await runs.startRun({ workflowId: wf, recordId: "r3" }, auth(w.userToken));
    expect((await waitForRun(server.deps.store, runId)).state).toBe("FAILED");
    await setEdit(["admin", "editor", "user"]);
    await admin(w, "publishWorkflow", { workflowId: wf, steps: NOTE_THEN_UPDATE });
    await admin(w, "deactivateWorkflowVersion", { workflowId: wf, version: 1 });
    const inactive = await refusal(runs.retryRun({ runId, fromFailedStep: true }, auth(w.userToken)));
    expect([inactive.code, inactive.rawMessage]).toEqual([Code.FailedPrecondition, expect.stringMatching(/version is no longer active \(version 1\)/)]);
    // Without from_failed_step the latest active version runs.
    const latest = await runs.retryRun({ runId }, auth(w.userToken));
    expect((await waitForRun(server.deps.store, latest.runId)).workflowVersion).toBe(2);
  });

  it("/v1: POST /v1/runs/{runId}/retry answers 202; another organization's run is 404 with no id in it", async () => {
    const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: "missing-2" });
    const failed = await waitForRun(server.deps.store, hook.body.runId!);
    const api = apiClient(server.gateway, w.userToken);
    const ok = await api.post(`/v1/runs/${failed._id}/retry`);
    expect(ok.status).toBe(202);
    expect(ok.body).toEqual({ runId: expect.stringMatching(UUID_RE) });
    expect((await waitForRun(server.deps.store, ok.body.runId)).via).toBe("api");
    const bad = await api.post(`/v1/runs/${failed._id}/retry`, { fromFailedStep: "yes" });
    expect(bad.status).toBe(400);
    const stranger = await createWorld(server);
    const foreign = await apiClient(server.gateway, stranger.adminToken).post(`/v1/runs/${failed._id}/retry`, {});
    expect(foreign.status).toBe(404);
    expect(JSON.stringify(foreign.body)).not.toContain(failed._id);
    const unknown = await apiClient(server.gateway, stranger.adminToken).post(`/v1/runs/${randomUUID()}/retry`, {});
    expect(unknown.body).toEqual(foreign.body);
    // A project API token does not retry: 403.
    expect((await apiClient(server.gateway, w.apiToken).post(`/v1/runs/${failed._id}/retry`)).status).toBe(403);
  });

  it("a user without the trigger role may see no retry: 403", async () => {
    const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.adminToken, { record_id: "missing-3" });
    await waitForRun(server.deps.store, hook.body.runId!);
    const noRole = await addAppToken(server, (await addUser(server, w, null))._id);
    expect((await refusal(runs.retryRun({ runId: hook.body.runId! }, auth(noRole.plaintext)))).code).toBe(Code.PermissionDenied);
  });
});

describe("runhook runs start | retry", () => {
  const cli = (args: string[], token: string) => {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNHOOK_") && k !== "MONGODB_URI"));
    return spawnCli(["runs", ...args], { env: { ...base, RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: token }, cwd: tmpdir(), timeoutMs: 30_000 }).exited;
  };

  it("starts a run and prints its id; retries it; explains a refusal in words with its exit code", async () => {
    const w = await createWorld(server);
    const started = await cli(["start", "--workflow", w.workflowId, "--record", "no-such-record"], w.userToken);
    expect(started.code, started.stderr).toBe(0);
    const runId = started.stdout.trim();
    expect(runId).toMatch(UUID_RE);
    expect(await waitForRun(server.deps.store, runId)).toMatchObject({ state: "FAILED", via: "api" });
    const retried = await cli(["retry", runId, "--from-failed-step"], w.userToken);
    expect(retried.code, retried.stderr).toBe(0);
    const retry = await waitForRun(server.deps.store, retried.stdout.trim());
    expect(retry).toMatchObject({ retryOf: runId, state: "FAILED" });
    // The retry of a run that did not fail at a step: 400, said in words, exit 4.
    const ok = await cli(["start", "--workflow", w.workflowId, "--record", "r1", "--project", w.projectName, "--environment", w.environmentName], w.userToken);
    expect((await waitForRun(server.deps.store, ok.stdout.trim())).state).toBe("SUCCEEDED");
    const refused = await cli(["retry", ok.stdout.trim(), "--from-failed-step"], w.userToken);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(/did not fail/);
  });
});
