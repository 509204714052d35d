// The organization's own admin log over the public API: GET /v1/organization/admin-logs with
// the paging, filters, cursors, tail and NDJSON export of a project's admin log, read with an
// organization API token (test/org-api-tokens.test.ts makes them); project and application
// tokens are refused here; its own rate limit; the same over native gRPC.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ListOrganizationAdminLogsRequestSchema, ListOrganizationAdminLogsResponseSchema, LogService } from "../gen/runhook/v1/log_pb.js";
import { ADMIN_MAPPING } from "../src/http/published.js";
import { errorBody } from "../src/rpc/errors.js";
import { storeFixtures } from "../src/store/index.js";
import type { AdminLogDoc } from "../src/store/types.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, uuid, type TestServer } from "./helpers/server.js";
import { adminClient, awaitFreshWindow, grpcUnary } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";

const ORG_LOGS = "/v1/organization/admin-logs";
/** The published filter that selects runhook's `user.created` alone (the only action the document calls an added user-project). */
const USERS_ADDED = { type: "add", resource: "user-project" };

let server: TestServer;
let w: World;
let other: World;
/** An organization admin of w's organization with no project role, and their application token. */
let orgAdmin: { id: string; email: string; token: string };
let orgToken: string;
let orgTokenId: string;
let otherOrgToken: string;

/** A published admin-log item, as far as these tests read it. */
interface Item {
  id: string;
  type: string;
  resource: string;
  initiator: string;
  createdAt: string;
  user?: { id: number; email: string };
  newValue?: { user?: { id: number; email: string } };
}
/** What identifies an item and what the published mapping made of its action. */
const key = (e: Pick<Item, "id" | "type" | "resource" | "initiator">) => `${e.id} ${e.type} ${e.resource} ${e.initiator}`;
/** The published key of a stored entry, by the mapping of runhook's admin actions. */
const storedKey = (d: AdminLogDoc) => {
  const m = ADMIN_MAPPING[d.action]!;
  return key({ id: String(d.seq), type: m.type, resource: m.resource, initiator: m.initiator ?? "administrator" });
};

/** The entries stored in an organization's own stream (no project), newest first, as keys (`only`: those matching it). */
async function stored(orgId: string, only: Record<string, string> = {}): Promise<string[]> {
  const docs = await storeFixtures(server.deps.store)
    .adminLogs.find({ organizationId: orgId, projectId: null, ...only }, { sort: { seq: -1 } })
    .toArray();
  return docs.map(storedKey);
}

const numberOf = async (userId: string) => (await storeFixtures(server.deps.store).users.findOne({ _id: userId }))!.number!;

/** Every page of the organization's admin log, following nextCursor until hasMore is false. */
async function all(token: string, params: Record<string, string | number | undefined> = {}) {
  const api = apiClient(server.gateway, token);
  const entries: Item[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (; pages < 1000; pages++) {
    const r = await api.get(ORG_LOGS + qs({ ...params, cursor }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    entries.push(...r.body.data);
    if (!r.body.hasMore) return { entries, pages: pages + 1, last: r.body };
    cursor = r.body.nextCursor;
  }
  throw new Error("too many pages");
}

const microsOf = (iso: string) => Date.parse(`${iso.slice(0, 23)}Z`) * 1000 + Number(iso.slice(23, 26));

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
  it("lists the organization's own stream newest first, every entry exactly once across pages; nothing of a project or another organization", async () => {
    const expected = await stored(w.orgId);
    // Bootstrap's entries, the organization admin without a project role and their token, this test file's token.
    const actions = (await storeFixtures(server.deps.store).adminLogs.find({ organizationId: w.orgId, projectId: null }).toArray()).map((d) => d.action);
    expect(actions).toEqual(expect.arrayContaining(["organization.created", "user.created", "token.created", "org_api_token.created"]));
    const whole = await all(orgToken, { limit: 100 });
    expect(whole.pages).toBe(1);
    expect(whole.last.parameters).toEqual({ limit: 100 });
    expect(whole.entries.map(key)).toEqual(expected);
    const paged = await all(orgToken, { limit: 2 });
    expect(paged.pages).toBeGreaterThan(3);
    expect(paged.entries.map(key)).toEqual(expected);
    expect(new Set(paged.entries.map((e) => e.id)).size).toBe(expected.length);
    const asc = await all(orgToken, { limit: 3, order: "asc" });
    expect(asc.entries.map(key)).toEqual([...expected].reverse());
    // The organization's first entry is the operator's; the owner's users are added by the owner.
    const owner = { object: "user", id: await numberOf(w.owner._id), username: "Owner", email: w.owner.email };
    expect(whole.entries.at(-1)).toMatchObject({ type: "initial", resource: "environment", initiator: "forestAdmin" });
    expect(whole.entries).toContainEqual({
      object: "adminLog",
      id: expect.any(String),
      type: "add",
      resource: "user-project",
      initiator: "administrator",
      createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/),
      user: owner,
      newValue: { user: { object: "user", id: await numberOf(orgAdmin.id), username: expect.any(String), email: orgAdmin.email } },
    });
    // Nothing of the other organization (its users).
    const text = JSON.stringify(whole.entries);
    for (const theirs of [other.owner.email, other.admin.email]) expect(text).not.toContain(theirs);
  });

  it("filters by type and resource, userId (the user's number), userEmail and createdAt, with paging; a cursor from other filters (or another list) is a 400", async () => {
    const api = apiClient(server.gateway, orgToken);
    const users = (await all(orgToken, { ...USERS_ADDED, limit: 1 })).entries;
    expect(users.length).toBeGreaterThanOrEqual(7); // the world's two, the organization admin, four more
    // Exactly this organization's own: no other organization's user.created, no project's.
    expect(users.map(key)).toEqual(await stored(w.orgId, { action: "user.created" }));
    const byAdmin = (await all(orgToken, { userId: await numberOf(orgAdmin.id) })).entries;
    expect(byAdmin.map(key)).toEqual(await stored(w.orgId, { "actor.id": orgAdmin.id }));
    expect(byAdmin.map((e) => e.user?.email)).toEqual([orgAdmin.email]);
    expect((await all(orgToken, { userEmail: orgAdmin.email })).entries.map(key)).toEqual(byAdmin.map(key));
    const everything = (await all(orgToken, { limit: 100 })).entries;
    // From the second oldest (inclusive) to the second newest (exclusive).
    const [from, to] = [everything.at(-2)!.createdAt, everything[1]!.createdAt];
    const within = everything.filter((e) => microsOf(e.createdAt) >= microsOf(from) && microsOf(e.createdAt) < microsOf(to));
    expect(within.length).toBeGreaterThan(0);
    expect(within.length).toBe(everything.length - 3);
    expect((await all(orgToken, { "createdAt.gte": from, "createdAt.lt": to, limit: 1 })).entries.map(key)).toEqual(within.map(key));

    const page = await api.get(ORG_LOGS + qs({ ...USERS_ADDED, limit: 1 }));
    expect(page.body.hasMore).toBe(true);
    const mismatched = await api.get(ORG_LOGS + qs({ ...USERS_ADDED, type: "update", limit: 1, cursor: page.body.nextCursor }));
    expect(mismatched.status).toBe(400);
    expect(mismatched.body).toEqual(errorBody("invalid_argument", "cursor was issued for other filters, order or time range; start again without a cursor"));
    // A cursor of a project's admin log is not one of this list, even unfiltered.
    const projectPage = await apiClient(server.gateway, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs?limit=1`);
    expect((await api.get(ORG_LOGS + qs({ limit: 1, cursor: projectPage.body.nextCursor }))).status).toBe(400);
    // Parameters are the project list's: an unknown one, runhook's former ones or a bad limit is a 400.
    for (const q of ["collectionName=orders", "action=user.created", "from=2025-01-01T00:00:00Z", `userId=${orgAdmin.id}`, "limit=0", "limit=101"]) {
      const r = await api.get(`${ORG_LOGS}?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body).toEqual(errorBody("invalid_argument", expect.stringContaining(q.split("=")[0]!) as unknown as string));
    }
  });

  it("tails: with order=asc nextCursor is always returned, and polling it yields each new entry once", async () => {
    const api = apiClient(server.gateway, orgToken);
    const tail = { order: "asc", limit: 100 };
    const caughtUp = await all(orgToken, tail);
    expect(caughtUp.last.hasMore).toBe(false);
    expect(caughtUp.last.nextCursor).toBeTypeOf("string");
    const idle = await api.get(ORG_LOGS + qs({ ...tail, cursor: caughtUp.last.nextCursor }));
    expect(idle.body).toMatchObject({ data: [], hasMore: false, nextCursor: expect.any(String) });
    const email = `late-${uuid().slice(0, 8)}@example.test`;
    await adminClient(server.baseUrl, w.ownerToken).createUser({ email });
    const next = await api.get(ORG_LOGS + qs({ ...tail, cursor: idle.body.nextCursor }));
    expect(next.body.data.map((e: Item) => [e.type, e.resource])).toEqual([["add", "user-project"]]);
    expect(next.body.data[0].newValue.user).toMatchObject({ email });
    const after = await api.get(ORG_LOGS + qs({ ...tail, cursor: next.body.nextCursor }));
    expect(after.body.data).toEqual([]);
  });

  it("exports the same selection as NDJSON", async () => {
    const listed = (await all(orgToken, USERS_ADDED)).entries;
    const res = await fetch(`${server.baseUrl}${ORG_LOGS}${qs(USERS_ADDED)}`, {
      headers: { authorization: `Bearer ${orgToken}`, accept: "application/x-ndjson" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const lines = (await res.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Item);
    expect(lines).toEqual(listed);
    expect(lines.length).toBeGreaterThanOrEqual(5);
  });

  it("another organization's token sees its own organization's stream, nothing of this one", async () => {
    const theirs = (await all(otherOrgToken, { limit: 100 })).entries;
    expect(theirs.map(key)).toEqual(await stored(other.orgId));
    // Filtered (the query path rather than the stream walk), the same.
    const filtered = (await all(otherOrgToken, { ...USERS_ADDED, limit: 1 })).entries;
    expect(filtered.map(key)).toEqual(await stored(other.orgId, { action: "user.created" }));
    theirs.push(...filtered);
    const text = JSON.stringify(theirs);
    for (const mine of [w.orgId, w.owner._id, w.owner.email, orgAdmin.id, orgAdmin.email, orgTokenId]) expect(text).not.toContain(mine);
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
    // The newest entry, by the owner; its target is runhook's own (LogService).
    const [newest] = (await all(orgToken, { limit: 1 })).entries.slice(0, 1);
    expect(newest).toMatchObject({ type: "update", resource: "user-project", user: { id: await numberOf(w.owner._id), email: w.owner.email } });
    const logs = createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const revoked = await logs.listOrganizationAdminLogs({ filter: { action: "org_api_token.revoked" } }, { headers: { authorization: `Bearer ${orgToken}` } });
    expect(revoked.adminLogs.map((e) => [e.id, e.target, e.actor?.id])).toEqual([[newest!.id, `org_api_token/${made.token!.id}`, w.owner._id]]);
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
    // gRPC's order is ascending unless asked (runhook's own); REST's is the document's, newest first.
    const rest = (await all(orgToken, { ...USERS_ADDED, limit: 100, order: "asc" })).entries;
    expect(ok.value!.adminLogs.map((e) => e.id)).toEqual(rest.map((e) => e.id));
    expect(ok.value!.adminLogs.every((e) => e.action === "user.created")).toBe(true);
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
