// The organization's own admin log over the public API: GET /v1/organization/admin-logs with
// the paging, filters, cursors, tail and NDJSON export of a project's admin log, read with an
// organization API token (test/org-api-tokens.test.ts makes them); project and application
// tokens are refused here; its own rate limit; the same over native gRPC.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ListOrganizationAdminLogsRequestSchema, ListOrganizationAdminLogsResponseSchema } from "../gen/runhook/v1/log_pb.js";
import { storeFixtures } from "../src/store/index.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, uuid, type TestServer } from "./helpers/server.js";
import { adminClient, awaitFreshWindow, grpcUnary } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";

const ORG_LOGS = "/v1/organization/admin-logs";

let server: TestServer;
let w: World;
let other: World;
/** An organization admin of w's organization with no project role, and their application token. */
let orgAdmin: { id: string; email: string; token: string };
let orgToken: string;
let orgTokenId: string;
let otherOrgToken: string;

interface Entry {
  id: string;
  action: string;
  target: string;
  actor: { id: string; email: string };
}
const key = (e: { id: string | number; action: string; target: string }) => `${e.id} ${e.action} ${e.target}`;

/** The entries stored in an organization's own stream (no project), in order, as keys. */
async function stored(orgId: string): Promise<string[]> {
  const docs = await storeFixtures(server.deps.store)
    .adminLogs.find({ organizationId: orgId, projectId: null }, { sort: { seq: 1 } })
    .toArray();
  return docs.map((d) => key({ id: String(d.seq), action: d.action, target: d.target }));
}

/** Every page of the organization's admin log, following nextCursor until hasMore is false. */
async function all(token: string, params: Record<string, string | number | undefined> = {}) {
  const api = apiClient(server.gateway, token);
  const entries: Entry[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (; pages < 1000; pages++) {
    const r = await api.get(ORG_LOGS + qs({ ...params, cursor }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    entries.push(...r.body.adminLogs);
    if (!r.body.hasMore) return { entries, pages: pages + 1, last: r.body };
    cursor = r.body.nextCursor;
  }
  throw new Error("too many pages");
}

beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR: "false" } });
  w = await createWorld(server);
  other = await createWorld(server);
  const owner = adminClient(server.baseUrl, w.ownerToken);
  // Entries of the organization's own stream: users without a project role (one an organization admin), and their tokens.
  const made = (await owner.createUser({ email: `org-admin-${uuid().slice(0, 8)}@example.test`, organizationAdmin: true })).user!;
  const token = await owner.createApplicationToken({ userId: made.id, name: "org admin" });
  orgAdmin = { id: made.id, email: made.email, token: token.plaintext };
  for (let i = 0; i < 4; i++) await owner.createUser({ email: `plain-${i}-${uuid().slice(0, 8)}@example.test` });
  // The organization API token is made by the new organization admin, who has no project role.
  const org = await adminClient(server.baseUrl, orgAdmin.token).createOrganizationApiToken({ name: "siem" });
  orgToken = org.plaintext;
  orgTokenId = org.token!.id;
  otherOrgToken = (await adminClient(server.baseUrl, other.ownerToken).createOrganizationApiToken({ name: "other siem" })).plaintext;
});
afterAll(async () => server?.stop());

describe("GET /v1/organization/admin-logs", () => {
  it("lists the organization's own stream, every entry exactly once across pages, in order; nothing of a project or another organization", async () => {
    const expected = await stored(w.orgId);
    // Bootstrap's entries, the organization admin without a project role and their token, this test file's token.
    const actions = expected.map((k) => k.split(" ")[1]);
    expect(actions).toEqual(expect.arrayContaining(["organization.created", "user.created", "token.created", "org_api_token.created"]));
    const whole = await all(orgToken, { limit: 1000 });
    expect(whole.pages).toBe(1);
    expect(whole.entries.map(key)).toEqual(expected);
    const paged = await all(orgToken, { limit: 2 });
    expect(paged.pages).toBeGreaterThan(3);
    expect(paged.entries.map(key)).toEqual(expected);
    expect(new Set(paged.entries.map((e) => e.id)).size).toBe(expected.length);
    const desc = await all(orgToken, { limit: 3, order: "desc" });
    expect(desc.entries.map(key)).toEqual([...expected].reverse());
    // Nothing of a project (the world's webhook and workflow entries) or of the other organization.
    const targets = whole.entries.map((e) => e.target).join(" ");
    expect(targets).not.toContain(`workflow/${w.workflowId}`);
    expect(targets).not.toContain(other.orgId);
    expect(whole.entries.find((e) => e.action === "user.created" && e.actor.id === w.owner._id)).toBeDefined();
    expect(whole.entries.find((e) => e.target === `organization/${w.orgId}`)).toMatchObject({ action: "organization.created" });
  });

  it("filters by action, userId, userEmail and time, with paging; a cursor from other filters (or another list) is a 400", async () => {
    const api = apiClient(server.gateway, orgToken);
    const users = (await all(orgToken, { action: "user.created", limit: 1 })).entries;
    expect(users.length).toBeGreaterThanOrEqual(7); // the world's two, the organization admin, four more
    // Exactly this organization's own: no other organization's user.created, no project's.
    expect(users.map(key)).toEqual((await stored(w.orgId)).filter((k) => k.split(" ")[1] === "user.created"));
    const byAdmin = (await all(orgToken, { userId: orgAdmin.id })).entries;
    expect(byAdmin.map((e) => e.action)).toEqual(["org_api_token.created"]);
    expect((await all(orgToken, { userEmail: orgAdmin.email })).entries.map(key)).toEqual(byAdmin.map(key));
    const everything = (await all(orgToken, { limit: 1000 })).entries as (Entry & { timestamp: string })[];
    const [from, to] = [everything[1]!.timestamp, everything.at(-2)!.timestamp];
    const within = everything.filter((e) => Date.parse(e.timestamp) >= Date.parse(from) && Date.parse(e.timestamp) < Date.parse(to));
    expect(within.length).toBeGreaterThan(0);
    expect((await all(orgToken, { from, to, limit: 1 })).entries.map(key)).toEqual(within.map(key));

    const page = await api.get(ORG_LOGS + qs({ action: "user.created", limit: 1 }));
    expect(page.body.hasMore).toBe(true);
    const mismatched = await api.get(ORG_LOGS + qs({ action: "token.created", limit: 1, cursor: page.body.nextCursor }));
    expect(mismatched.status).toBe(400);
    expect(mismatched.body).toMatchObject({ code: "invalid_argument" });
    // A cursor of a project's admin log is not one of this list, even unfiltered.
    const projectPage = await apiClient(server.gateway, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs?limit=1`);
    expect((await api.get(ORG_LOGS + qs({ limit: 1, cursor: projectPage.body.nextCursor }))).status).toBe(400);
    // Parameters are the project list's: an unknown one or a bad limit is a 400.
    expect((await api.get(`${ORG_LOGS}?collection=orders`)).status).toBe(400);
    expect((await api.get(`${ORG_LOGS}?limit=0`)).status).toBe(400);
  });

  it("tails: with order=asc nextCursor is always returned, and polling it yields each new entry once", async () => {
    const api = apiClient(server.gateway, orgToken);
    const caughtUp = await all(orgToken, { limit: 1000 });
    expect(caughtUp.last.hasMore).toBe(false);
    expect(caughtUp.last.nextCursor).toBeTypeOf("string");
    const idle = await api.get(ORG_LOGS + qs({ cursor: caughtUp.last.nextCursor }));
    expect(idle.body).toMatchObject({ adminLogs: [], hasMore: false, nextCursor: expect.any(String) });
    const email = `late-${uuid().slice(0, 8)}@example.test`;
    await adminClient(server.baseUrl, w.ownerToken).createUser({ email });
    const next = await api.get(ORG_LOGS + qs({ cursor: idle.body.nextCursor }));
    expect(next.body.adminLogs.map((e: Entry) => e.action)).toEqual(["user.created"]);
    expect(next.body.adminLogs[0].details).toMatchObject({ email });
    const after = await api.get(ORG_LOGS + qs({ cursor: next.body.nextCursor }));
    expect(after.body.adminLogs).toEqual([]);
  });

  it("exports the same selection as NDJSON", async () => {
    const listed = (await all(orgToken, { action: "user.created" })).entries;
    const res = await fetch(`${server.baseUrl}${ORG_LOGS}?action=user.created`, {
      headers: { authorization: `Bearer ${orgToken}`, accept: "application/x-ndjson" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const lines = (await res.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Entry);
    expect(lines.map(key)).toEqual(listed.map(key));
  });

  it("another organization's token sees its own organization's stream, nothing of this one", async () => {
    const theirs = (await all(otherOrgToken, { limit: 1000 })).entries;
    expect(theirs.map(key)).toEqual(await stored(other.orgId));
    // Filtered (the query path rather than the stream walk), the same.
    const filtered = (await all(otherOrgToken, { action: "user.created", limit: 1 })).entries;
    expect(filtered.map(key)).toEqual((await stored(other.orgId)).filter((k) => k.split(" ")[1] === "user.created"));
    theirs.push(...filtered);
    const text = JSON.stringify(theirs);
    for (const mine of [w.orgId, w.owner._id, w.owner.email, orgAdmin.id, orgTokenId]) expect(text).not.toContain(mine);
  });
});

describe("each token in its scope", () => {
  const answer = async (path: string, token: string) => {
    const r = await apiClient(server.gateway, token).get(path);
    return { status: r.status, code: r.body?.code };
  };

  it("a project API token and an application token are refused on the organization's route (403); an unknown token is 401", async () => {
    for (const token of [w.apiToken, w.adminToken, w.userToken, w.ownerToken, orgAdmin.token]) {
      expect(await answer(ORG_LOGS, token), token).toEqual({ status: 403, code: "permission_denied" });
    }
    const forged = `rh_org_${uuid().replace(/-/g, "")}_${"A".repeat(43)}`;
    expect(await answer(ORG_LOGS, forged)).toEqual({ status: 401, code: "unauthenticated" });
    expect(await answer(ORG_LOGS, `${orgToken.slice(0, -1)}x`)).toEqual({ status: 401, code: "unauthenticated" });
    const none = await apiClient(server.gateway).get(ORG_LOGS);
    expect(none.status).toBe(401);
  });

  it("a revoked organization API token is 401; the revocation is in the organization's log", async () => {
    const owner = adminClient(server.baseUrl, w.ownerToken);
    const made = await owner.createOrganizationApiToken({ name: "short-lived" });
    expect((await apiClient(server.gateway, made.plaintext).get(ORG_LOGS)).status).toBe(200);
    await owner.revokeOrganizationApiToken({ tokenId: made.token!.id });
    expect(await answer(ORG_LOGS, made.plaintext)).toEqual({ status: 401, code: "unauthenticated" });
    const revoked = (await all(orgToken, { action: "org_api_token.revoked" })).entries;
    expect(revoked.map((e) => [e.target, e.actor.id])).toEqual([[`org_api_token/${made.token!.id}`, w.owner._id]]);
  });

  it("an organization API token is refused on the project routes (403)", async () => {
    const env = `/v1/project/${w.projectName}/environment/${w.environmentName}`;
    for (const path of [`/v1/project/${w.projectName}/admin-logs`, `${env}/activity-logs`, `${env}/notes`, `/v1/runs/${uuid()}`]) {
      expect(await answer(path, orgToken), path).toEqual({ status: 403, code: "permission_denied" });
    }
  });

  it("every answer carries the per-token rate-limit headers", async () => {
    const r = await apiClient(server.gateway, orgToken).get(ORG_LOGS);
    const perMinute = server.deps.config.orgApiRateLimit.perMinute;
    expect(r.headers.get("x-ratelimit-limit")).toBe(String(perMinute));
    expect(Number(r.headers.get("x-ratelimit-remaining"))).toBeLessThan(perMinute);
  });
});

describe("over gRPC", () => {
  it("LogService.ListOrganizationAdminLogs answers a grpc-js client as REST does; a project API token is PERMISSION_DENIED", async () => {
    const path = "/runhook.v1.LogService/ListOrganizationAdminLogs";
    const req = { options: { limit: 1000 }, filter: { action: "user.created" } };
    const ok = await grpcUnary(server.grpcAddr, path, ListOrganizationAdminLogsRequestSchema, ListOrganizationAdminLogsResponseSchema, req, orgToken);
    expect(ok.error).toBeUndefined();
    const rest = (await all(orgToken, { action: "user.created", limit: 1000 })).entries;
    expect(ok.value!.adminLogs.map((e) => key(e))).toEqual(rest.map(key));
    expect(ok.value!.hasMore).toBe(false);
    expect(ok.value!.nextCursor).toBeTypeOf("string");
    const denied = await grpcUnary(server.grpcAddr, path, ListOrganizationAdminLogsRequestSchema, ListOrganizationAdminLogsResponseSchema, req, w.apiToken);
    expect(denied.error?.code).toBe(7); // PERMISSION_DENIED
    const unknown = await grpcUnary(server.grpcAddr, path, ListOrganizationAdminLogsRequestSchema, ListOrganizationAdminLogsResponseSchema, req, "rh_org_nope");
    expect(unknown.error?.code).toBe(16); // UNAUTHENTICATED
  });
});

describe("RUNHOOK_ORG_API_RATE_LIMIT", () => {
  let limited: TestServer;
  beforeAll(async () => {
    limited = await startServer({ dbName: server.dbName, env: { RUNHOOK_ORG_API_RATE_LIMIT: "2", RUNHOOK_EXECUTOR: "false" } });
  });
  afterAll(async () => limited?.stop());

  it("limits each organization API token on its own; project API tokens keep RUNHOOK_API_RATE_LIMIT", async () => {
    await awaitFreshWindow(20_000);
    const token = (await adminClient(limited.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "limited" })).plaintext;
    const api = apiClient(limited.gateway, token);
    const answers = [await api.get(ORG_LOGS), await api.get(ORG_LOGS), await api.get(ORG_LOGS)];
    expect(answers.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(answers[0]!.headers.get("x-ratelimit-limit")).toBe("2");
    expect(answers[2]!.body).toMatchObject({ code: "resource_exhausted" });
    expect(Number(answers[2]!.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another organization token has a budget of its own; a project API token keeps the API's limit.
    const second = (await adminClient(limited.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "limited 2" })).plaintext;
    expect((await apiClient(limited.gateway, second).get(ORG_LOGS)).status).toBe(200);
    const project = await apiClient(limited.gateway, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs`);
    expect(project.status).toBe(200);
    expect(project.headers.get("x-ratelimit-limit")).toBe(String(limited.deps.config.apiRateLimit.perMinute));
  });
});
