// Idempotent retries of the webhook (Idempotency-Key header) and of TriggerService/TriggerRun
// (idempotency_key), on the real server and database, over HTTP (fetch), in process
// (inject) and native gRPC (@grpc/grpc-js).
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { TriggerRunRequestSchema, TriggerRunResponseSchema, type TriggerRunResponse } from "../gen/runhook/v1/trigger_pb.js";
import { ABANDONED_AFTER_MS, idempotencyKeyId } from "../src/domain/idempotency.js";
import { storeFixtures, sweepExpired } from "../src/store/index.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { serverForFile } from "./helpers/server.js";
import { addAppToken, addUser, createWorld, type World } from "../fixtures/world.js";
import { adminClient, awaitFreshWindow, local, postHook, UUID_RE } from "./helpers/webhook.js";
import { errorBody } from "../src/rpc/errors.js";

const TTL_HOURS = 2;
const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false", RUNHOOK_IDEMPOTENCY_TTL_HOURS: String(TTL_HOURS) } });

const db = () => storeFixtures(server.deps.store);
const finish = (runId: string) => db().finishRun(runId);
const runsOf = (w: World) => db().runs.countDocuments({ workflowId: w.workflowId });

interface Hook {
  w: World;
  url: string;
}

async function hook(): Promise<Hook> {
  const w = await createWorld(server);
  const got = await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
  return { w, url: local(got.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl) };
}

/** Where the key of a call with the world's user token is stored. */
const keyIdOf = (h: Hook, key: string) => idempotencyKeyId({ workflowId: h.w.workflowId, userId: h.w.user._id, key });

const keyed = (h: Hook, recordId: string, key: string, token = h.w.userToken) =>
  postHook(h.url, token, { record_id: recordId }, { headers: { "idempotency-key": key } });

interface GrpcAnswer {
  value?: TriggerRunResponse;
  error?: grpc.ServiceError;
  replayedHeader?: string;
}

/** TriggerRun over native gRPC, with the response metadata's idempotent-replayed. */
async function grpcTrigger(webhookUrl: string, recordId: string, token: string, idempotencyKey: string): Promise<GrpcAnswer> {
  const client = new grpc.Client(server.grpcAddr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  try {
    return await new Promise((resolve) => {
      let replayedHeader: string | undefined;
      const call = client.makeUnaryRequest(
        "/runhook.v1.TriggerService/TriggerRun",
        (m: unknown) => Buffer.from(toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, m as never))),
        (b: Buffer) => fromBinary(TriggerRunResponseSchema, b),
        { webhookUrl, recordId, idempotencyKey } as never,
        md,
        (err, value) => resolve(err ? { error: err, replayedHeader } : { value: value as TriggerRunResponse, replayedHeader }),
      );
      call.on("metadata", (m) => (replayedHeader = m.get("idempotent-replayed")[0]?.toString()));
    });
  } finally {
    client.close();
  }
}

describe("idempotent webhook calls", () => {
  it("a repeat after the run finished answers 202 with the same runId, marked as a replay, and starts nothing", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    expect(first.status).toBe(202);
    expect(first.body.runId).toMatch(UUID_RE);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    await finish(first.body.runId!);

    const again = await keyed(h, "r1", key);
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ runId: first.body.runId });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await runsOf(h.w)).toBe(1);
    // One triggered entry: the replay is not logged as a run.
    expect(await db().activityLogs.countDocuments({ runId: first.body.runId!, action: "workflow.run.triggered" })).toBe(1);
  });

  it("a repeat while the run is ongoing is a replay too (not a 409)", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    const again = await keyed(h, "r1", key);
    expect([again.status, again.body.runId, again.headers.get("idempotent-replayed")]).toEqual([202, first.body.runId, "true"]);
  });

  it("the same key with another record_id is refused with 400 failed_precondition, and starts nothing", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    await finish(first.body.runId!);
    const other = await keyed(h, "r2", key);
    expect(other.status).toBe(400);
    expect(other.body).toEqual(errorBody("failed_precondition", expect.stringMatching(/Idempotency-Key was already used with another record_id/)));
    expect(await runsOf(h.w)).toBe(1);
  });

  it("a body that differs only in unknown fields (ignored by the call) is the same call", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    const again = await postHook(h.url, h.w.userToken, { extra: 1, record_id: "r1" }, { headers: { "idempotency-key": key } });
    expect([again.status, again.body.runId]).toEqual([202, first.body.runId]);
  });

  it("50 concurrent calls with one key start exactly one run; every answer is its runId or a 409 aborted, none a 5xx", async () => {
    const h = await hook();
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: 50 }, () => keyed(h, "r1", key)));
    expect(await runsOf(h.w)).toBe(1);
    const run = await db().runs.findOne({ workflowId: h.w.workflowId });
    const accepted = answers.filter((a) => a.status === 202);
    expect(accepted.length).toBeGreaterThanOrEqual(1);
    for (const a of accepted) expect(a.body.runId).toBe(run!._id);
    expect(accepted.filter((a) => a.headers.get("idempotent-replayed") !== "true")).toHaveLength(1);
    for (const a of answers.filter((a) => a.status !== 202)) expect([a.status, a.body.code]).toEqual([409, "aborted"]);
  });

  it("only an accepted call is remembered: after a 409 the key is free, and a retry starts the run", async () => {
    const h = await hook();
    const ongoing = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    const key = randomUUID();
    const refused = await keyed(h, "r1", key);
    expect([refused.status, refused.body.code, refused.body.runId]).toEqual([409, "already_exists", ongoing.body.runId]);
    await finish(ongoing.body.runId!);
    const retry = await keyed(h, "r1", key);
    expect(retry.status).toBe(202);
    expect(retry.body.runId).not.toBe(ongoing.body.runId);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
  });

  it("a key is remembered until its TTL, then forgotten (swept): the same key starts a new run", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    await finish(first.body.runId!);
    const hour = 3_600_000;
    await sweepExpired(server.deps.store, undefined, new Date(Date.now() + (TTL_HOURS - 0.5) * hour));
    expect((await keyed(h, "r1", key)).body.runId).toBe(first.body.runId);
    await sweepExpired(server.deps.store, undefined, new Date(Date.now() + (TTL_HOURS + 0.5) * hour));
    const later = await keyed(h, "r1", key);
    expect(later.status).toBe(202);
    expect(later.body.runId).not.toBe(first.body.runId);
    expect(later.headers.get("idempotent-replayed")).toBeNull();
  });

  it("an expired key is forgotten at once, before the TTL monitor or the sweep removes it", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    await finish(first.body.runId!);
    await db().setIdempotencyKeyTimes(keyIdOf(h, key), { expiresAt: new Date(Date.now() - 1000) });
    const later = await keyed(h, "r1", key);
    expect([later.status, later.headers.get("idempotent-replayed")]).toEqual([202, null]);
    expect(later.body.runId).not.toBe(first.body.runId);
    // The new call's reservation took the old one's place: a repeat now replays the new run.
    expect((await keyed(h, "r1", key)).body.runId).toBe(later.body.runId);
  });

  it("a key whose run retention removed answers its run as already stored, never a second run", async () => {
    // A key kept from a longer TTL than today's (the run retention was shortened since): the run is gone.
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    await finish(first.body.runId!);
    const day = 86_400_000;
    await db().setIdempotencyKeyTimes(keyIdOf(h, key), { reservedAt: new Date(Date.now() - 2 * day), expiresAt: new Date(Date.now() + 300 * day) });
    await db().removeRun(first.body.runId!);
    const before = await runsOf(h.w);
    const again = await keyed(h, "r1", key);
    expect([again.status, again.body.runId, again.headers.get("idempotent-replayed")]).toEqual([202, first.body.runId, "true"]);
    expect(await runsOf(h.w)).toBe(before);
    expect(await server.deps.store.runs.get(first.body.runId!)).toBeNull();
  });

  it("refuses a key TTL longer than the run retention", () => {
    const env = { ...process.env, RUNHOOK_RUN_RETENTION_DAYS: "1" };
    expect(() => loadConfig({ ...env, RUNHOOK_IDEMPOTENCY_TTL_HOURS: "25" })).toThrow(/must not be longer than RUNHOOK_RUN_RETENTION_DAYS/);
    expect(loadConfig({ ...env, RUNHOOK_IDEMPOTENCY_TTL_HOURS: "24" }).idempotencyTtlMs).toBe(24 * 3_600_000);
    expect(() => loadConfig({ ...process.env, RUNHOOK_IDEMPOTENCY_TTL_HOURS: String(24 * 365) })).toThrow(ConfigError);
  });

  it("without the header, a call after the run finished starts a fresh run (seed rule 3)", async () => {
    const h = await hook();
    const keysBefore = await db().idempotencyKeys.estimatedDocumentCount();
    const first = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    await finish(first.body.runId!);
    const again = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(again.status).toBe(202);
    expect(again.body.runId).not.toBe(first.body.runId);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
    expect(await db().idempotencyKeys.estimatedDocumentCount()).toBe(keysBefore);
  });

  it("a key is per token user: another user with the same key starts a run of their own", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    await finish(first.body.runId!);
    const other = await addUser(server, h.w, "editor", { teamId: h.w.teamId });
    const otherToken = (await addAppToken(server, other._id)).plaintext;
    const theirs = await keyed(h, "r1", key, otherToken);
    expect(theirs.status).toBe(202);
    expect(theirs.body.runId).not.toBe(first.body.runId);
    expect(theirs.headers.get("idempotent-replayed")).toBeNull();
  });

  it("a key is per webhook: the same user with the same key on another webhook starts a run there", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    await finish(first.body.runId!);
    // A second workflow of the same project, which the same user may trigger.
    const workflow = (await db().workflows.findOne({ _id: h.w.workflowId }))!;
    const otherId = randomUUID();
    await server.deps.store.directory.workflows.insert({ ...workflow, _id: otherId, name: "another workflow" });
    const got = await adminClient(server.baseUrl, h.w.adminToken).getWorkflow({ workflowId: otherId });
    const other = { w: { ...h.w, workflowId: otherId }, url: local(got.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl) };
    const there = await keyed(other, "r1", key);
    expect([there.status, there.headers.get("idempotent-replayed")]).toEqual([202, null]);
    expect(there.body.runId).not.toBe(first.body.runId);
    expect(await runsOf(other.w)).toBe(1);
  });

  it("a reservation left by a call that died before storing its run is completed by a retry, with the reserved runId", async () => {
    const h = await hook();
    const key = randomUUID();
    // What a call that crashed between its two writes leaves: a reservation, no run, no entry of its start.
    const first = await keyed(h, "r1", key);
    expect(await db().idempotencyKeys.findOne({ _id: keyIdOf(h, key) })).toMatchObject({ runId: first.body.runId });
    await db().removeRun(first.body.runId!);
    const started = await db().activityLogs.find({ runId: first.body.runId }).toArray();
    expect(started).toHaveLength(1);
    await db().removeActivityEntries(started.map((e) => String(e._id)));
    await db().setIdempotencyKeyTimes(keyIdOf(h, key), { reservedAt: new Date(Date.now() - ABANDONED_AFTER_MS - 1000) });
    const retry = await keyed(h, "r1", key);
    expect(retry.status).toBe(202);
    expect(retry.body.runId).toBe(first.body.runId);
    expect(await db().runs.countDocuments({ _id: first.body.runId! })).toBe(1);
  });

  it("a repeat while the first call is still being answered waits briefly, then answers 409 aborted and starts nothing", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await keyed(h, "r1", key);
    // The first call, as seen while it is between its reservation and its run: no run yet, reserved just now.
    await db().removeRun(first.body.runId!);
    await db().setIdempotencyKeyTimes(keyIdOf(h, key), { reservedAt: new Date() });
    const again = await keyed(h, "r1", key);
    expect(again.status).toBe(409);
    expect(again.body).toEqual(errorBody("aborted", expect.stringMatching(/still being answered: retry/)));
    expect(await runsOf(h.w)).toBe(0);
  });

  it("refuses bad keys with 400 invalid_argument: 256 characters, non-ASCII, control characters, empty", async () => {
    const h = await hook();
    expect((await keyed(h, "r1", "k".repeat(255))).status).toBe(202);
    const bad = ["k".repeat(256), "clé-é", "tab\there", ""];
    for (const key of bad) {
      // inject: fetch itself refuses some of these header values.
      const res = await server.gateway.inject({
        method: "POST",
        url: new URL(h.url).pathname,
        headers: { authorization: `Bearer ${h.w.userToken}`, "content-type": "application/json", "idempotency-key": key },
        payload: JSON.stringify({ record_id: "r2" }),
      });
      expect([key.slice(0, 10), res.statusCode, res.json().code]).toEqual([key.slice(0, 10), 400, "invalid_argument"]);
      expect(res.json().error).toMatch(/Idempotency-Key/);
    }
    expect(await runsOf(h.w)).toBe(1);
  });

  it("a repeat counts against the webhook's rate limit like any call", async () => {
    const h = await hook();
    await server.deps.store.directory.workflows.setWebhookRateLimit(h.w.orgId, h.w.workflowId, 2);
    const key = randomUUID();
    await awaitFreshWindow(10_000);
    expect((await keyed(h, "r1", key)).status).toBe(202);
    expect((await keyed(h, "r1", key)).headers.get("idempotent-replayed")).toBe("true");
    const third = await keyed(h, "r1", key);
    expect([third.status, third.body.code]).toEqual([429, "resource_exhausted"]);
  });

  it("checks the key after authentication: a bad token with a used key is 401, and reveals nothing", async () => {
    const h = await hook();
    const key = randomUUID();
    await keyed(h, "r1", key);
    const res = await keyed(h, "r1", key, "rh_app_invalid");
    expect(res.status).toBe(401);
    expect(res.body.runId).toBeUndefined();
  });
});

describe("idempotent TriggerRun over native gRPC", () => {
  it("replays with replayed=true and idempotent-replayed metadata; refuses a mismatch and a bad key", async () => {
    const h = await hook();
    const key = randomUUID();
    const first = await grpcTrigger(h.url, "r1", h.w.userToken, key);
    expect(first.error).toBeUndefined();
    expect(first.value!.replayed).toBe(false);
    await finish(first.value!.runId);
    const again = await grpcTrigger(h.url, "r1", h.w.userToken, key);
    expect([again.value?.runId, again.value?.replayed, again.replayedHeader]).toEqual([first.value!.runId, true, "true"]);
    // The same key through the webhook is the same call.
    const viaHook = await keyed(h, "r1", key);
    expect([viaHook.body.runId, viaHook.headers.get("idempotent-replayed")]).toEqual([first.value!.runId, "true"]);
    const mismatch = await grpcTrigger(h.url, "r2", h.w.userToken, key);
    expect(mismatch.error?.code).toBe(grpc.status.FAILED_PRECONDITION);
    for (const bad of ["k".repeat(256), "\u0001", "ключ"])
      expect((await grpcTrigger(h.url, "r3", h.w.userToken, bad)).error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(await runsOf(h.w)).toBe(1);
  });

  it("without a key, each call after the run finished starts a fresh run", async () => {
    const h = await hook();
    const first = await grpcTrigger(h.url, "r1", h.w.userToken, "");
    await finish(first.value!.runId);
    const again = await grpcTrigger(h.url, "r1", h.w.userToken, "");
    expect(again.value!.runId).not.toBe(first.value!.runId);
    expect(again.value!.replayed).toBe(false);
  });
});
