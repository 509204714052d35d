// The webhook (keys, tokens, permissions, rate limits, bodies, the one ongoing run per record
// and the check order), on the real server and database, over HTTP (fetch) and native gRPC (@grpc/grpc-js).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { TriggerService, OngoingRunSchema } from "../gen/runhook/v1/trigger_pb.js";
import type { StepDoc } from "../src/store/types.js";
import { signWebhookKey, verifyWebhookKey } from "../src/domain/webhook-keys.js";
import { spawnServer, serverForFile, type ChildServer } from "./helpers/server.js";
import { addAppToken, addUser, createWorld, type World } from "../fixtures/world.js";
import { adminClient, awaitFreshWindow, grpcTrigger, local, postHook, sleep, UUID_RE } from "./helpers/webhook.js";
import { storeFixtures } from "../src/store/index.js";
import { errorBody } from "../src/rpc/errors.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });

const db = () => storeFixtures(server.deps.store);

interface Hook {
  w: World;
  /** The URL as the trigger settings give it. */
  publicUrl: string;
  /** The same URL on the test server's address. */
  url: string;
  admin: ReturnType<typeof adminClient>;
}

async function hook(opts: Parameters<typeof createWorld>[1] = {}): Promise<Hook> {
  const w = await createWorld(server, opts);
  // A project that requires SSO answers its admin only in an SSO session.
  const adminToken = opts.requiresSso ? (await addAppToken(server, w.admin._id, { sso: true })).plaintext : w.adminToken;
  const admin = adminClient(server.baseUrl, adminToken);
  const got = await admin.getWorkflow({ workflowId: w.workflowId });
  const publicUrl = got.workflow!.webhook!.url;
  return { w, publicUrl, url: toLocal(publicUrl), admin };
}

const toLocal = (u: string) => local(u, server.deps.config.publicBaseUrl, server.baseUrl);
const finish = (runId: string) => db().finishRun(runId);
const keyOf = (url: string) => url.slice(url.lastIndexOf("/") + 1);
const URL_SAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

describe("webhook: success (202)", () => {
  it("queues a run and answers 202 {runId}; the run is stored QUEUED before the reply", async () => {
    const h = await hook();
    const res = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(res.status).toBe(202);
    expect(Object.keys(res.body)).toEqual(["runId"]);
    expect(res.body.runId).toMatch(UUID_RE);
    const run = await db().runs.findOne({ _id: res.body.runId! });
    expect(run).toMatchObject({
      state: "QUEUED",
      activeKey: `${h.w.workflowId}|r1`,
      workflowId: h.w.workflowId,
      workflowVersion: 1,
      renderingId: h.w.renderingId,
      projectId: h.w.projectId,
      environmentId: h.w.environmentId,
      collectionId: h.w.collectionId,
      collection: "orders",
      recordId: "r1",
      userId: h.w.user._id,
      userEmail: h.w.user.email,
      via: "webhook",
      stepIndex: 0,
      lease: null,
      version: 1,
    });
    expect(run!.steps.map((s) => [s.type, s.state])).toEqual([
      ["load_record", "PENDING"],
      ["update_record", "PENDING"],
    ]);
    const token = await db().appTokens.findOne({ userId: h.w.user._id });
    expect(run!.tokenId).toBe(token!._id);
  });

  it("writes a workflow.run.triggered activity entry naming the token's user", async () => {
    const h = await hook();
    const res = await postHook(h.url, h.w.userToken, { record_id: "r2" });
    expect(res.status).toBe(202);
    const entry = await db().activityLogs.findOne({ runId: res.body.runId! });
    expect(entry).toMatchObject({
      action: "workflow.run.triggered",
      user: { id: h.w.user._id, email: h.w.user.email },
      via: "webhook",
      collection: "orders",
      recordId: "r2",
      environment: "production",
      environmentId: h.w.environmentId,
      projectId: h.w.projectId,
    });
  });

  it("does not check the record at creation: a missing record still gives 202", async () => {
    const h = await hook();
    const res = await postHook(h.url, h.w.userToken, { record_id: "no-such-record" });
    expect(res.status).toBe(202);
    expect((await db().runs.findOne({ _id: res.body.runId! }))?.state).toBe("QUEUED");
  });

  it("ignores unknown body fields", async () => {
    const h = await hook();
    const res = await postHook(h.url, h.w.userToken, { record_id: "r1", extra: { a: 1 }, priority: "high", record: "x" });
    expect(res.status).toBe(202);
    const run = await db().runs.findOne({ _id: res.body.runId! });
    expect(run?.recordId).toBe("r1");
    expect(Object.keys(run!)).not.toContain("priority");
  });

  it("stores composite packed record ids exactly", async () => {
    const h = await hook({ primaryKey: ["a", "b"], records: [{ a: "x|y", b: "z" }] });
    const packed = "a\\|b|c";
    const res = await postHook(h.url, h.w.userToken, { record_id: packed });
    expect(res.status).toBe(202);
    const run = await db().runs.findOne({ _id: res.body.runId! });
    expect(run?.recordId).toBe(packed);
    expect(run?.activeKey).toBe(`${h.w.workflowId}|${packed}`);
    // Same packed id → 409; a different packing of similar parts is another record → 202.
    expect((await postHook(h.url, h.w.userToken, { record_id: packed })).status).toBe(409);
    expect((await postHook(h.url, h.w.userToken, { record_id: "a\\|b\\|c" })).status).toBe(202);
  });

  it("wakes the local executors with run.queued", async () => {
    const h = await hook();
    const seen: string[] = [];
    const on = (id: string) => seen.push(id);
    server.deps.events.on("run.queued", on);
    try {
      const res = await postHook(h.url, h.w.userToken, { record_id: "r3" });
      expect(seen).toContain(res.body.runId);
    } finally {
      server.deps.events.off("run.queued", on);
    }
  });

  it("uses the latest active version, and the URL stays the same across publishing", async () => {
    const h = await hook();
    const published = await h.admin.publishWorkflow({ workflowId: h.w.workflowId, steps: [{ kind: { case: "wait", value: { seconds: 1 } } }] });
    expect(published.workflow!.webhook!.url).toBe(h.publicUrl);
    const res = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(res.status).toBe(202);
    const run = await db().runs.findOne({ _id: res.body.runId! });
    expect(run?.workflowVersion).toBe(2);
    expect(run?.steps.map((s) => s.type)).toEqual(["wait"]);
    // Deactivating version 2 falls back to version 1.
    await h.admin.deactivateWorkflowVersion({ workflowId: h.w.workflowId, version: 2 });
    const res2 = await postHook(h.url, h.w.userToken, { record_id: "r2" });
    expect(res2.status).toBe(202);
    expect((await db().runs.findOne({ _id: res2.body.runId! }))?.workflowVersion).toBe(1);
  });

  it("accepts application/json with parameters, in any case, and no Content-Type at all; rejects other media types (400)", async () => {
    const h = await hook();
    const body = JSON.stringify({ record_id: "r1" });
    expect((await postHook(h.url, h.w.userToken, body, { raw: true, contentType: "Application/JSON; Charset=UTF-8" })).status).toBe(202);
    await finish((await db().runs.findOne({ workflowId: h.w.workflowId }))!._id);
    // A byte body, so that fetch adds no Content-Type of its own (it would for a string).
    const bare = await fetch(h.url, { method: "POST", headers: { authorization: `Bearer ${h.w.userToken}` }, body: Buffer.from(body) });
    expect(bare.status).toBe(202);
    const res = await postHook(h.url, h.w.userToken, JSON.stringify({ record_id: "r2" }), { raw: true, contentType: "text/plain" });
    expect(res.status).toBe(400);
    expect(res.body).toEqual(errorBody("invalid_argument", 'Content-Type must be application/json, got "text/plain"'));
  });
});

describe("webhook: 400 bad body (step 6)", () => {
  const cases: [string, string][] = [
    ["invalid JSON", "{record_id: r1"],
    ["empty body", ""],
    ["a JSON array", JSON.stringify([{ record_id: "r1" }])],
    ["a JSON string", JSON.stringify("r1")],
    ["JSON null", "null"],
    ["a JSON number", "42"],
    ["record_id missing", JSON.stringify({ recordId: "r1" })],
    ["record_id empty", JSON.stringify({ record_id: "" })],
    ["record_id a number", JSON.stringify({ record_id: 1 })],
    ["record_id null", JSON.stringify({ record_id: null })],
    ["record_id an object", JSON.stringify({ record_id: { id: "r1" } })],
    ["record_id an array", JSON.stringify({ record_id: ["r1"] })],
  ];
  for (const [name, raw] of cases) {
    it(`answers 400 {error, code} for ${name}, and starts nothing`, async () => {
      const h = await hook();
      const res = await postHook(h.url, h.w.userToken, raw, { raw: true });
      expect(res.status).toBe(400);
      expect(res.body).toEqual(errorBody("invalid_argument", expect.any(String)));
      expect(await db().runs.countDocuments({ workflowId: h.w.workflowId })).toBe(0);
    });
  }

  it("answers 400 when there is no body and no content type", async () => {
    const h = await hook();
    const res = await fetch(h.url, { method: "POST", headers: { authorization: `Bearer ${h.w.userToken}` } });
    expect(res.status).toBe(400);
  });

  it("answers 413 for a body over the size limit", async () => {
    const h = await hook();
    const res = await postHook(h.url, h.w.userToken, { record_id: "r1", pad: "x".repeat(server.deps.config.bodyLimitBytes + 10) });
    expect(res.status).toBe(413);
  });
});

describe("webhook: 400 bad URL (step 1)", () => {
  it("answers 400 for every single-character change of a valid key", async () => {
    const h = await hook();
    const key = keyOf(h.url);
    const prefix = h.url.slice(0, h.url.length - key.length);
    expect(key).toMatch(/^[A-Za-z0-9_-]+$/);
    const statuses: number[] = [];
    for (let i = 0; i < key.length; i++) {
      const alt = URL_SAFE[(URL_SAFE.indexOf(key[i]!) + 1 + (i % 7)) % URL_SAFE.length]!;
      expect(alt).not.toBe(key[i]);
      const tampered = key.slice(0, i) + alt + key.slice(i + 1);
      const res = await postHook(prefix + tampered, h.w.userToken, { record_id: "r1" });
      statuses.push(res.status);
      if (res.status !== 400) throw new Error(`position ${i}: ${key} → ${tampered} answered ${res.status}`);
    }
    expect(statuses).toHaveLength(key.length);
    // The last character in particular (base64 slack bits): every other URL-safe character fails.
    for (const c of URL_SAFE) {
      if (c === key[key.length - 1]) continue;
      expect(verifyWebhookKey(server.deps.config, key.slice(0, -1) + c)).toBeNull();
    }
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
  });

  it("answers 400 {error, code} for truncated, extended, padded and garbage keys", async () => {
    const h = await hook();
    const key = keyOf(h.url);
    const prefix = h.url.slice(0, h.url.length - key.length);
    for (const bad of [key.slice(0, -1), `${key}A`, `${key}=`, key.slice(1), "x", "not-a-key", key.toUpperCase(), "A".repeat(300)]) {
      const res = await postHook(prefix + bad, h.w.userToken, { record_id: "r1" });
      expect(res.status, bad).toBe(400);
      expect(res.body).toEqual(errorBody("invalid_argument", expect.any(String)));
    }
  });

  it("takes the key exactly as in the path: a valid key behind other segments or with spaces around it is a 400", async () => {
    const h = await hook();
    const key = keyOf(h.url);
    for (const path of [`/hooks/x/hooks/${key}`, `/hooks/${key}/extra`, `/hooks/%20${key}`, `/hooks/${key}%20`]) {
      const res = await postHook(`${server.baseUrl}${path}`, h.w.userToken, { record_id: "r1" });
      expect(res.status, path).toBe(400);
      expect(res.body).toEqual(errorBody("invalid_argument", expect.any(String)));
    }
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
  });

  it("answers 400 for a key signed with an unknown secret", async () => {
    const h = await hook();
    const forged = signWebhookKey(
      { signingKeyId: "k1", signingKeys: new Map([["k1", Buffer.alloc(32, 9)]]) },
      { workflowId: h.w.workflowId, renderingId: h.w.renderingId, generation: 1 },
    );
    const res = await postHook(`${server.baseUrl}/hooks/${forged}`, h.w.userToken, { record_id: "r1" });
    expect(res.status).toBe(400);
  });

  it("verifies keys of every configured key id (rotation), and signs with the current one", () => {
    const ids = { workflowId: "5b7c2a6e-1f1e-4a0b-9a3c-0d2f4e6a8b1c", renderingId: "0e3d8f7a-2b4c-4d6e-8f0a-1b2c3d4e5f60", generation: 3 };
    const old = { signingKeyId: "k1", signingKeys: new Map([["k1", Buffer.alloc(32, 1)]]) };
    const rotated = {
      signingKeyId: "k2",
      signingKeys: new Map([
        ["k2", Buffer.alloc(32, 2)],
        ["k1", Buffer.alloc(32, 1)],
      ]),
    };
    const oldKey = signWebhookKey(old, ids);
    expect(verifyWebhookKey(rotated, oldKey)).toEqual(ids);
    const newKey = signWebhookKey(rotated, ids);
    expect(newKey).not.toBe(oldKey);
    expect(verifyWebhookKey(rotated, newKey)).toEqual(ids);
    expect(verifyWebhookKey(old, newKey)).toBeNull();
  });
});

describe("webhook: 401 bad token (step 2)", () => {
  it("answers 401 for a missing, malformed or unknown bearer token", async () => {
    const h = await hook();
    for (const token of [undefined, "", "rh_app_short", `rh_app_${"A".repeat(43)}`, "Basic abc"]) {
      const res = await postHook(h.url, token, { record_id: "r1" });
      expect(res.status, String(token)).toBe(401);
      expect(res.body).toEqual(errorBody("unauthenticated", expect.any(String)));
    }
    const res = await fetch(h.url, {
      method: "POST",
      headers: { authorization: `Basic ${h.w.userToken}`, "content-type": "application/json" },
      body: '{"record_id":"r1"}',
    });
    expect(res.status).toBe(401);
  });

  it("answers 401 for a project API token (the webhook needs an application token)", async () => {
    const h = await hook();
    expect((await postHook(h.url, h.w.apiToken, { record_id: "r1" })).status).toBe(401);
  });

  it("answers 401 for an expired token", async () => {
    const h = await hook();
    const expired = await addAppToken(server, h.w.user._id, { expiresAt: new Date(Date.now() - 1000) });
    expect((await postHook(h.url, expired.plaintext, { record_id: "r1" })).status).toBe(401);
  });

  it("answers 401 on the very next request after the token is revoked by its user", async () => {
    const h = await hook();
    const mine = adminClient(server.baseUrl, h.w.userToken);
    const created = await mine.createApplicationToken({ name: "integration" });
    expect((await postHook(h.url, created.plaintext, { record_id: "r1" })).status).toBe(202);
    await mine.revokeApplicationToken({ tokenId: created.token!.id });
    expect((await postHook(h.url, created.plaintext, { record_id: "r2" })).status).toBe(401);
  });
});

describe("webhook: 403 not authorized (step 4)", () => {
  it("answers 403 for a user with no role on the project", async () => {
    const h = await hook();
    const u = await addUser(server, h.w, null, { teamId: h.w.teamId });
    const t = await addAppToken(server, u._id);
    const res = await postHook(h.url, t.plaintext, { record_id: "r1" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual(errorBody("permission_denied", expect.any(String)));
  });

  it("answers 403 for a user without access to the rendering (not in its team)", async () => {
    const h = await hook();
    const u = await addUser(server, h.w, "editor");
    const t = await addAppToken(server, u._id);
    expect((await postHook(h.url, t.plaintext, { record_id: "r1" })).status).toBe(403);
  });

  it("answers 403 for a role the workflow does not allow to trigger", async () => {
    const h = await hook();
    await h.admin.publishWorkflow({
      workflowId: h.w.workflowId,
      steps: [{ kind: { case: "loadRecord", value: {} } }],
      triggerRoles: ["admin", "editor"],
      updateTriggerRoles: true,
    });
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(403);
    expect((await postHook(h.url, h.w.adminToken, { record_id: "r1" })).status).toBe(202);
  });

  it("answers 403 for a user of another organization", async () => {
    const h = await hook();
    const other = await createWorld(server);
    expect((await postHook(h.url, other.adminToken, { record_id: "r1" })).status).toBe(403);
  });

  it("answers 403 for a non-SSO token on an SSO project, 202 for an SSO token", async () => {
    const h = await hook({ requiresSso: true });
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(403);
    const sso = await addAppToken(server, h.w.user._id, { sso: true });
    expect((await postHook(h.url, sso.plaintext, { record_id: "r1" })).status).toBe(202);
  });
});

describe("webhook: 404 / 400 webhook state (step 3)", () => {
  it("answers 404 for an unknown webhook (a correctly signed key of no workflow)", async () => {
    const key = signWebhookKey(server.deps.config, {
      workflowId: "00000000-0000-4000-8000-000000000000",
      renderingId: "00000000-0000-4000-8000-000000000001",
      generation: 1,
    });
    const w = await createWorld(server);
    const res = await postHook(`${server.baseUrl}/hooks/${key}`, w.userToken, { record_id: "r1" });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(errorBody("not_found", expect.any(String)));
  });

  it("answers 404 for a key naming the workflow with another rendering", async () => {
    const h = await hook();
    const other = await createWorld(server);
    const key = signWebhookKey(server.deps.config, { workflowId: h.w.workflowId, renderingId: other.renderingId, generation: 1 });
    expect((await postHook(`${server.baseUrl}/hooks/${key}`, h.w.userToken, { record_id: "r1" })).status).toBe(404);
  });

  it("disable → 404 with URL and token unchanged; enable → the same URL works again", async () => {
    const h = await hook();
    const off = await h.admin.disableWebhook({ workflowId: h.w.workflowId });
    expect(off.webhook!.enabled).toBe(false);
    const res = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe("not_found");
    const on = await h.admin.enableWebhook({ workflowId: h.w.workflowId });
    expect(on.webhook!.url).toBe(h.publicUrl);
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
  });

  it("regenerate → the old URL answers 400 at once and the new one works", async () => {
    const h = await hook();
    const regen = await h.admin.regenerateWebhook({ workflowId: h.w.workflowId });
    const fresh = regen.webhook!.url;
    expect(fresh).not.toBe(h.publicUrl);
    expect(regen.webhook!.generation).toBe(2);
    const old = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(old.status).toBe(400);
    expect(old.body.code).toBe("invalid_argument");
    expect(old.body.error).toMatch(/superseded/);
    expect((await postHook(toLocal(fresh), h.w.userToken, { record_id: "r1" })).status).toBe(202);
    expect((await h.admin.getWorkflow({ workflowId: h.w.workflowId })).workflow!.webhook!.url).toBe(fresh);
  });

  it("answers 404 when no workflow version is active", async () => {
    const h = await hook();
    await h.admin.deactivateWorkflowVersion({ workflowId: h.w.workflowId, version: 1 });
    const res = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(res.status).toBe(404);
    expect(res.body.error).toMatch(/active/);
    await h.admin.publishWorkflow({ workflowId: h.w.workflowId, steps: [{ kind: { case: "loadRecord", value: {} } }] });
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
  });
});

describe("webhook: the check order", () => {
  it("bad key + no token → 400", async () => {
    const h = await hook();
    expect((await postHook(`${h.url.slice(0, -2)}zz`, undefined, "nonsense", { raw: true })).status).toBe(400);
  });

  it("valid key + no token + disabled + bad body → 401", async () => {
    const h = await hook();
    await h.admin.disableWebhook({ workflowId: h.w.workflowId });
    expect((await postHook(h.url, undefined, "{", { raw: true })).status).toBe(401);
  });

  it("superseded URL + no token → 401; superseded URL + token of a forbidden user → 400", async () => {
    const h = await hook();
    await h.admin.regenerateWebhook({ workflowId: h.w.workflowId });
    expect((await postHook(h.url, undefined, { record_id: "r1" })).status).toBe(401);
    const other = await createWorld(server);
    expect((await postHook(h.url, other.userToken, { record_id: "r1" })).status).toBe(400);
  });

  it("disabled + forbidden user + bad body → 404", async () => {
    const h = await hook();
    await h.admin.disableWebhook({ workflowId: h.w.workflowId });
    const other = await createWorld(server);
    expect((await postHook(h.url, other.userToken, "{", { raw: true })).status).toBe(404);
    expect((await postHook(h.url, h.w.userToken, "{", { raw: true })).status).toBe(404);
  });

  it("no active version + forbidden user → 404", async () => {
    const h = await hook();
    await h.admin.deactivateWorkflowVersion({ workflowId: h.w.workflowId, version: 1 });
    const other = await createWorld(server);
    expect((await postHook(h.url, other.userToken, { record_id: "r1" })).status).toBe(404);
  });

  it("forbidden user while rate-limited, with a bad body → 403 (and it does not use up the limit)", async () => {
    await awaitFreshWindow(20_000);
    const h = await hook();
    await h.admin.setWebhookRateLimit({ workflowId: h.w.workflowId, rateLimitPerMinute: 1 });
    const other = await createWorld(server);
    for (let i = 0; i < 3; i++) expect((await postHook(h.url, other.userToken, "{", { raw: true })).status).toBe(403);
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
    expect((await postHook(h.url, other.userToken, "{", { raw: true })).status).toBe(403);
  });

  it("rate-limited + bad body → 429; rate-limited + ongoing run → 429", async () => {
    await awaitFreshWindow(20_000);
    const h = await hook();
    await h.admin.setWebhookRateLimit({ workflowId: h.w.workflowId, rateLimitPerMinute: 1 });
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
    expect((await postHook(h.url, h.w.userToken, "{", { raw: true })).status).toBe(429);
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(429);
  });

  it("bad body + ongoing run → 400", async () => {
    const h = await hook();
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
    expect((await postHook(h.url, h.w.userToken, { record_id: "" })).status).toBe(400);
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(409);
  });
});

describe("webhook: one ongoing run per (workflow, record) (409)", () => {
  it("answers 409 {error, code, runId} while a run is ongoing, and neither starts nor resumes a run", async () => {
    const h = await hook();
    const first = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(first.status).toBe(202);
    const second = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(second.status).toBe(409);
    expect(second.body).toEqual({ ...errorBody("already_exists", "a run of this workflow is already ongoing on this record"), runId: first.body.runId });
    await db().setRunState(first.body.runId!, "RUNNING");
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).body.runId).toBe(first.body.runId);
    expect(await db().runs.countDocuments({ workflowId: h.w.workflowId })).toBe(1);
    expect((await db().runs.findOne({ _id: first.body.runId! }))?.state).toBe("RUNNING");
  });

  it("after the run has finished, a new call starts a fresh run (202)", async () => {
    const h = await hook();
    const first = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    await finish(first.body.runId!);
    const again = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    expect(again.status).toBe(202);
    expect(again.body.runId).not.toBe(first.body.runId);
  });

  it("other records and other workflows are independent", async () => {
    const h = await hook();
    const other = await hook();
    expect((await postHook(h.url, h.w.userToken, { record_id: "r1" })).status).toBe(202);
    expect((await postHook(h.url, h.w.userToken, { record_id: "r2" })).status).toBe(202);
    expect((await postHook(other.url, other.w.userToken, { record_id: "r1" })).status).toBe(202);
  });

  it("50 parallel calls on one record: exactly one 202 and 49 × 409 naming the same run", async () => {
    await awaitFreshWindow(30_000);
    const h = await hook({ steps: [{ type: "wait", seconds: 60 }] as StepDoc[] });
    const answers = await Promise.all(Array.from({ length: 50 }, () => postHook(h.url, h.w.userToken, { record_id: "r1" })));
    const accepted = answers.filter((a) => a.status === 202);
    const conflicts = answers.filter((a) => a.status === 409);
    expect(accepted).toHaveLength(1);
    expect(conflicts).toHaveLength(49);
    for (const c of conflicts) expect(c.body.runId).toBe(accepted[0]!.body.runId);
    expect(await db().runs.countDocuments({ workflowId: h.w.workflowId })).toBe(1);
  });
});

describe("webhook: rate limit (429)", () => {
  it("the 6th call in a minute with a limit of 5 gets 429 with Retry-After", async () => {
    await awaitFreshWindow(20_000);
    const h = await hook();
    await h.admin.setWebhookRateLimit({ workflowId: h.w.workflowId, rateLimitPerMinute: 5 });
    const statuses: number[] = [];
    for (let i = 1; i <= 5; i++) statuses.push((await postHook(h.url, h.w.userToken, { record_id: `r${i}` })).status);
    expect(statuses).toEqual([202, 202, 202, 202, 202]);
    const sixth = await postHook(h.url, h.w.userToken, { record_id: "r6" });
    expect(sixth.status).toBe(429);
    expect(sixth.body).toEqual(errorBody("resource_exhausted", expect.any(String)));
    const retryAfter = sixth.headers.get("retry-after");
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(retryAfter)).toBeLessThanOrEqual(60);
    // The limit is per webhook: another webhook is unaffected.
    const other = await hook();
    expect((await postHook(other.url, other.w.userToken, { record_id: "r1" })).status).toBe(202);
  });

  it("the default limit is 60 per minute", async () => {
    const h = await hook();
    expect((await h.admin.getWorkflow({ workflowId: h.w.workflowId })).workflow!.webhook!.rateLimitPerMinute).toBe(60);
  });

  it("Retry-After can be trusted: a lone caller that waits that long is accepted", async () => {
    const h = await hook();
    await h.admin.setWebhookRateLimit({ workflowId: h.w.workflowId, rateLimitPerMinute: 1 });
    let res = await postHook(h.url, h.w.userToken, { record_id: "r1" });
    if (res.status === 202) res = await postHook(h.url, h.w.userToken, { record_id: "r2" });
    expect(res.status).toBe(429);
    const wait = Number(res.headers.get("retry-after"));
    expect(wait).toBeGreaterThanOrEqual(1);
    await sleep(wait * 1000);
    expect((await postHook(h.url, h.w.userToken, { record_id: "r3" })).status).toBe(202);
  }, 90_000);
});

describe("TriggerService.TriggerRun over native gRPC", () => {
  it("queues a run (via grpc) from the full URL or the key alone", async () => {
    const h = await hook();
    const a = await grpcTrigger(server.grpcAddr, h.publicUrl, "r1", h.w.userToken);
    expect(a.error).toBeUndefined();
    expect(a.value!.runId).toMatch(UUID_RE);
    const run = await db().runs.findOne({ _id: a.value!.runId });
    expect(run).toMatchObject({ state: "QUEUED", via: "grpc", recordId: "r1", userId: h.w.user._id });
    const entry = await db().activityLogs.findOne({ runId: a.value!.runId });
    expect(entry?.via).toBe("grpc");
    const b = await grpcTrigger(server.grpcAddr, keyOf(h.publicUrl), "r2", h.w.userToken);
    expect(b.value!.runId).toMatch(UUID_RE);
  });

  it("maps every refusal to its gRPC code", async () => {
    const h = await hook();
    const code = async (url: string, record: string, token?: string) => (await grpcTrigger(server.grpcAddr, url, record, token)).error?.code;
    expect(await code(`${h.publicUrl.slice(0, -1)}x`, "r1", h.w.userToken)).toBe(grpc.status.INVALID_ARGUMENT);
    expect(await code(h.publicUrl, "r1")).toBe(grpc.status.UNAUTHENTICATED);
    const other = await createWorld(server);
    expect(await code(h.publicUrl, "r1", other.userToken)).toBe(grpc.status.PERMISSION_DENIED);
    expect(await code(h.publicUrl, "", h.w.userToken)).toBe(grpc.status.INVALID_ARGUMENT);
    await h.admin.disableWebhook({ workflowId: h.w.workflowId });
    expect(await code(h.publicUrl, "r1", h.w.userToken)).toBe(grpc.status.NOT_FOUND);
    await awaitFreshWindow(10_000);
    const l = await hook();
    await l.admin.setWebhookRateLimit({ workflowId: l.w.workflowId, rateLimitPerMinute: 1 });
    const ok = await grpcTrigger(server.grpcAddr, l.publicUrl, "r1", l.w.userToken);
    expect(ok.error).toBeUndefined();
    const limited = await grpcTrigger(server.grpcAddr, l.publicUrl, "r2", l.w.userToken);
    expect(limited.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(String(limited.error?.metadata.get("retry-after")[0])).toMatch(/^\d+$/);
  });

  it("ALREADY_EXISTS carries the ongoing run id in metadata and in an OngoingRun detail", async () => {
    const h = await hook();
    const first = await grpcTrigger(server.grpcAddr, h.publicUrl, "r1", h.w.userToken);
    const second = await grpcTrigger(server.grpcAddr, h.publicUrl, "r1", h.w.userToken);
    expect(second.error?.code).toBe(grpc.status.ALREADY_EXISTS);
    expect(second.error?.metadata.get("runhook-ongoing-run-id")[0]).toBe(first.value!.runId);
    // Over Connect, the typed detail.
    const client = createClient(TriggerService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const err = await client.triggerRun({ webhookUrl: h.publicUrl, recordId: "r1" }, { headers: { authorization: `Bearer ${h.w.userToken}` } }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.AlreadyExists);
    expect(err?.findDetails(OngoingRunSchema).map((d) => d.runId)).toEqual([first.value!.runId]);
  });
});

describe("webhook across two server processes", () => {
  let a: ChildServer;
  let b: ChildServer;
  let logs = "";
  beforeAll(async () => {
    [a, b] = await Promise.all([
      spawnServer(server.dbName, { env: { RUNHOOK_EXECUTOR: "false" } }),
      spawnServer(server.dbName, { env: { RUNHOOK_EXECUTOR: "false" } }),
    ]);
    for (const c of [a, b]) {
      c.child.stdout!.on("data", (d: Buffer) => (logs += d.toString()));
      c.child.stderr!.on("data", (d: Buffer) => (logs += d.toString()));
    }
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  const on = (s: ChildServer, h: Hook) => s.baseUrl + h.url.slice(server.baseUrl.length);

  it("50 parallel calls spread over two processes: one 202, 49 × 409 naming the same run", async () => {
    await awaitFreshWindow(30_000);
    const h = await hook();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => postHook(on(i % 2 ? a : b, h), h.w.userToken, { record_id: "shared|1" })));
    const accepted = answers.filter((x) => x.status === 202);
    expect(accepted).toHaveLength(1);
    const conflicts = answers.filter((x) => x.status === 409);
    expect(conflicts).toHaveLength(49);
    expect(new Set(conflicts.map((c) => c.body.runId))).toEqual(new Set([accepted[0]!.body.runId]));
  });

  it("the rate limit is shared: the total accepted in one window equals the limit", async () => {
    await awaitFreshWindow(30_000);
    const h = await hook();
    await h.admin.setWebhookRateLimit({ workflowId: h.w.workflowId, rateLimitPerMinute: 7 });
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => postHook(on(i % 2 ? a : b, h), h.w.userToken, { record_id: `r${i}` })));
    expect(answers.filter((x) => x.status === 202)).toHaveLength(7);
    expect(answers.filter((x) => x.status === 429)).toHaveLength(23);
  });

  it("regenerate and disable take effect at once on every instance", async () => {
    const h = await hook();
    await h.admin.disableWebhook({ workflowId: h.w.workflowId });
    expect((await postHook(on(a, h), h.w.userToken, { record_id: "r1" })).status).toBe(404);
    expect((await postHook(on(b, h), h.w.userToken, { record_id: "r1" })).status).toBe(404);
    await h.admin.enableWebhook({ workflowId: h.w.workflowId });
    await h.admin.regenerateWebhook({ workflowId: h.w.workflowId });
    expect((await postHook(on(a, h), h.w.userToken, { record_id: "r1" })).status).toBe(400);
    expect((await postHook(on(b, h), h.w.userToken, { record_id: "r1" })).status).toBe(400);
  });

  it("never logs the webhook key or the token, however the path is spelled", async () => {
    const h = await hook();
    expect((await postHook(on(a, h), h.w.userToken, { record_id: "r1" })).status).toBe(202);
    expect((await postHook(on(b, h), h.w.userToken, { record_id: "r1" })).status).toBe(409);
    const key = keyOf(h.url);
    // Escapes, repeated slashes, upper case, an escaped key, a token in the query: routed or not, none is logged.
    const spellings = [
      `/%68ooks/${key}`,
      `//hooks/${key}`,
      `/hooks//${key}`,
      `/HOOKS/${key}`,
      `/hooks/${key.slice(0, 10)}%${key.charCodeAt(10).toString(16)}${key.slice(11)}`,
      `/v1/runs/${key}`,
      `/nowhere/${key}?token=${encodeURIComponent(h.w.userToken)}`,
      `/nowhere?t=${h.w.userToken.replace("_", "%5F")}`,
    ];
    for (const path of spellings) {
      const res = await fetch(a.baseUrl + path, {
        method: "POST",
        headers: { authorization: `Bearer ${h.w.userToken}`, "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status, path).toBeGreaterThanOrEqual(200);
      const text = await res.text();
      expect(text, path).not.toContain(key.slice(20));
    }
    await sleep(200);
    expect(logs).toContain('"route":"/hooks/*"');
    expect(logs).toContain("/hooks/[redacted]");
    expect(logs).not.toContain(key.slice(20));
    expect(logs).not.toContain(h.w.userToken.slice(10));
  });
});
