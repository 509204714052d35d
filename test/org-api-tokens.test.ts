// Organization API tokens: made and revoked by organization admins only (AdminService and
// `runhook admin org-api-tokens`), stored as a hash, logged in the organization's own admin
// log, and refused (403) on every project route of the public API, which they may not read.
import { Code } from "@connectrpc/connect";
import { beforeAll, describe, expect, it } from "vitest";
import { storeFixtures } from "../src/store/index.js";
import { adminStream } from "../src/store/logs.js";
import { redactUrl } from "../src/lib/logging.js";
import { apiClient } from "./helpers/api.js";
import { serverForFile, uuid } from "./helpers/server.js";
import { runCli as run } from "./helpers/cli.js";
import { adminClient, code } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });
let w: World;
let other: World;

beforeAll(async () => {
  w = await createWorld(server);
  other = await createWorld(server);
});

/** The admin log entries stored about an organization API token, with the stream each is in. */
async function entriesAbout(tokenId: string) {
  const docs = await storeFixtures(server.deps.store)
    .adminLogs.find({ organizationId: w.orgId, projectId: null }, { sort: { seq: 1 } })
    .toArray();
  return docs
    .filter((d) => d.target === `org_api_token/${tokenId}`)
    .map((d) => ({ stream: d._id.slice(0, d._id.lastIndexOf(":")), action: d.action, actor: d.actor.id, details: d.details }));
}

describe("CreateOrganizationApiToken", () => {
  it("an organization admin makes one, bound to the organization, stored as a hash only; the organization's own admin log records it", async () => {
    const made = await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "archive", ttlSeconds: 3600 });
    expect(made.plaintext).toMatch(/^rh_org_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(made.token).toMatchObject({ organizationId: w.orgId, user: { id: w.owner._id, email: w.owner.email }, name: "archive" });
    expect(made.token!.revokedAt).toBeUndefined();
    const expiresIn = Number(made.token!.expiresAt!.seconds) - Number(made.token!.createdAt!.seconds);
    expect(expiresIn).toBe(3600);
    const doc = await storeFixtures(server.deps.store).orgApiTokens.findOne({ _id: made.token!.id });
    expect(doc).toMatchObject({ organizationId: w.orgId, userId: w.owner._id, revokedAt: null });
    expect(doc!.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(doc)).not.toContain(made.plaintext);
    const logged = await entriesAbout(made.token!.id);
    expect(logged).toEqual([{ stream: adminStream(w.orgId, null), action: "org_api_token.created", actor: w.owner._id, details: expect.any(Object) }]);
    expect(logged[0]!.details).toMatchObject({ name: "archive" });
    expect(JSON.stringify(logged)).not.toMatch(/rh_org_/);
  });

  it("an organization admin without any project role makes one too", async () => {
    const owner = adminClient(server.baseUrl, w.ownerToken);
    const made = (await owner.createUser({ email: `org-admin-${uuid().slice(0, 8)}@example.test`, organizationAdmin: true })).user!;
    const token = (await owner.createApplicationToken({ userId: made.id, name: "org admin" })).plaintext;
    const created = await adminClient(server.baseUrl, token).createOrganizationApiToken({});
    expect(created.token).toMatchObject({ organizationId: w.orgId, user: { id: made.id }, name: "organization api token" });
  });

  it("no one else: a project admin or a user is PERMISSION_DENIED; a project API token is not an application token (UNAUTHENTICATED)", async () => {
    expect(await code(adminClient(server.baseUrl, w.adminToken).createOrganizationApiToken({ name: "x" }))).toBe(Code.PermissionDenied);
    expect(await code(adminClient(server.baseUrl, w.userToken).createOrganizationApiToken({ name: "x" }))).toBe(Code.PermissionDenied);
    expect(await code(adminClient(server.baseUrl, w.apiToken).createOrganizationApiToken({ name: "x" }))).toBe(Code.Unauthenticated);
    expect(await code(adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ ttlSeconds: 5 }))).toBe(Code.InvalidArgument);
  });
});

describe("RevokeOrganizationApiToken", () => {
  it("revokes at once (then 401); another organization does not find it; a user who is not an organization admin may not", async () => {
    const made = await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "short-lived" });
    const projectLogs = `/v1/project/${w.projectName}/admin-logs`;
    expect((await apiClient(server.gateway, made.plaintext).get(projectLogs)).status).toBe(403);
    expect(await code(adminClient(server.baseUrl, other.ownerToken).revokeOrganizationApiToken({ tokenId: made.token!.id }))).toBe(Code.NotFound);
    expect(await code(adminClient(server.baseUrl, w.adminToken).revokeOrganizationApiToken({ tokenId: made.token!.id }))).toBe(Code.PermissionDenied);
    expect(await code(adminClient(server.baseUrl, w.ownerToken).revokeOrganizationApiToken({ tokenId: uuid() }))).toBe(Code.NotFound);
    const revoked = await adminClient(server.baseUrl, w.ownerToken).revokeOrganizationApiToken({ tokenId: made.token!.id });
    expect(revoked.token!.revokedAt).toBeDefined();
    const after = await apiClient(server.gateway, made.plaintext).get(projectLogs);
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject({ code: "unauthenticated" });
    // A second revoke changes nothing and logs nothing.
    await adminClient(server.baseUrl, w.ownerToken).revokeOrganizationApiToken({ tokenId: made.token!.id });
    expect((await entriesAbout(made.token!.id)).map((e) => e.action)).toEqual(["org_api_token.created", "org_api_token.revoked"]);
  });
});

describe("project routes", () => {
  it("refuse an organization API token (403), whatever the route", async () => {
    const token = (await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "scope" })).plaintext;
    const api = apiClient(server.gateway, token);
    const env = `/v1/project/${w.projectName}/environment/${w.environmentName}`;
    // A note that exists (by its /v1 id, its number), and one that does not.
    const note = await apiClient(server.gateway, w.apiToken).post(`${env}/notes`, { collection: w.collection, recordId: "r1", content: "x" });
    expect(note.status).toBe(201);
    const notePaths = [`${env}/notes/${note.body.id}`, `${env}/notes/${note.body.id + 1_000_000}`];
    for (const path of [`/v1/project/${w.projectName}/admin-logs`, `${env}/activity-logs`, `${env}/notes`, ...notePaths, `/v1/runs/${uuid()}`]) {
      const r = await api.get(path);
      expect({ status: r.status, code: r.body.code }, path).toEqual({ status: 403, code: "permission_denied" });
    }
    expect((await api.post(`${env}/notes`, { collection: w.collection, recordId: "r1", content: "x" })).status).toBe(403);
    expect((await api.post(`/v1/runs/${uuid()}/cancel`)).status).toBe(403);
    // An unknown token of the same shape is 401, as before.
    const forged = `rh_org_${uuid().replace(/-/g, "")}_${"A".repeat(43)}`;
    expect((await apiClient(server.gateway, forged).get(`/v1/project/${w.projectName}/admin-logs`)).status).toBe(401);
  });
});

describe("access log", () => {
  it("never shows an organization API token in a URL, in the path or in a query value", () => {
    const token = `rh_org_${uuid().replace(/-/g, "")}_${"B".repeat(43)}`;
    for (const url of [`/nowhere?t=${token}`, `/nowhere?t=${token.replace("_", "%5F")}`, `/nowhere/${token}`, `/x?${token}`]) {
      const shown = redactUrl(url);
      expect(shown, url).not.toContain(token.slice(10));
      expect(shown, url).toContain("[redacted]");
    }
  });
});

describe("runhook admin org-api-tokens", () => {
  it("creates and revokes an organization API token; a user who is not an organization admin is refused", async () => {
    const env = { RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: w.ownerToken };
    const created = await run(["admin", "org-api-tokens", "create", "--name", "cli", "--ttl", "3600"], env);
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const made = JSON.parse(created.stdout) as { token: { id: string; organizationId: string }; plaintext: string };
    expect(made.plaintext).toMatch(/^rh_org_/);
    expect(made.token.organizationId).toBe(w.orgId);
    const revoked = await run(["admin", "org-api-tokens", "revoke", "--token", made.token.id], env);
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout).token.revokedAt).toBeTypeOf("string");
    const denied = await run(["admin", "org-api-tokens", "create"], { ...env, RUNHOOK_TOKEN: w.adminToken });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/permission_denied/);
  });
});
