// AdminService (validation, permissions, admin logs), the `runhook admin` CLI and
// `runhook seed --json`, on the real server and database.
import { describe, expect, it } from "vitest";
import { storeFixtures } from "../src/store/index.js";
import { ConnectError, Code } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { CreateProjectRequestSchema, CreateProjectResponseSchema } from "../gen/runhook/v1/admin_pb.js";
import type { StepSchema } from "../gen/runhook/v1/common_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { BOOTSTRAP_SECRET, serverForFile, startServer, testDbName, testEnv } from "./helpers/server.js";
import { runCli as run } from "./helpers/cli.js";
import { adminClient, bootstrapTenant, code, grpcUnary, local, postHook } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });
const db = () => storeFixtures(server.deps.store);

type Step = MessageInitShape<typeof StepSchema>;
const load: Step = { kind: { case: "loadRecord", value: {} } };
const wait = (seconds: number): Step => ({ kind: { case: "wait", value: { seconds } } });
const update = (set: Record<string, unknown>): Step => ({ kind: { case: "updateRecord", value: { set: set as never } } });
const note = (content: string): Step => ({ kind: { case: "addNote", value: { content, title: "" } } });

let n = 0;
/** A fresh organization built entirely through AdminService. */
async function org() {
  const { tag, boot, admin: root, project } = await bootstrapTenant(server.baseUrl);
  const env = (await root.createEnvironment({ projectId: project.id, name: "production" })).environment!;
  const team = (await root.createTeam({ projectId: project.id, name: "ops" })).team!;
  const rendering = (await root.createRendering({ teamId: team.id, environmentId: env.id })).rendering!;
  const collection = (await root.createCollection({ environmentId: env.id, name: "orders", primaryKey: ["id"] })).collection!;
  await root.setCollectionPermission({
    permission: { renderingId: rendering.id, collectionId: collection.id, readRoles: ["admin", "editor", "user"], editRoles: ["admin", "editor"] },
  });
  const mkUser = async (role: string, inTeam = true) => {
    const u = (await root.createUser({ email: `${role}-${tag}-${n++}@example.test`, name: role })).user!;
    if (role !== "none") await root.setProjectRole({ projectId: project.id, userId: u.id, role });
    if (inTeam) await root.setTeamMember({ teamId: team.id, userId: u.id, member: true });
    const t = await root.createApplicationToken({ userId: u.id, name: role });
    return { user: u, token: t.plaintext, tokenId: t.token!.id, client: adminClient(server.baseUrl, t.plaintext) };
  };
  const admin = await mkUser("admin");
  const editor = await mkUser("editor");
  const user = await mkUser("user");
  const workflow = (
    await editor.client.createWorkflow({
      renderingId: rendering.id,
      collectionId: collection.id,
      name: "wf",
      steps: [load, wait(60), update({ status: "done" }), note("<p>done</p>")],
    })
  ).workflow!;
  return { tag, boot, root, orgId: boot.organization!.id, project, env, team, rendering, collection, admin, editor, user, workflow, mkUser };
}

describe("AdminService: building a world", () => {
  it("builds an organization end to end; the webhook it enables triggers a run as a token's user", async () => {
    const o = await org();
    expect(o.env.dataDatabase).toBe(`${server.deps.store.databaseName}_d_${o.env.id.replace(/-/g, "").slice(0, 12)}`);
    expect(o.workflow.versions).toHaveLength(1);
    expect(o.workflow.versions[0]!.steps.map((s) => s.kind.case)).toEqual(["loadRecord", "wait", "updateRecord", "addNote"]);
    expect(o.workflow.webhook).toMatchObject({ enabled: false, url: "", rateLimitPerMinute: 60, generation: 1 });
    const on = await o.editor.client.enableWebhook({ workflowId: o.workflow.id });
    expect(on.webhook!.url).toMatch(new RegExp(`^${server.deps.config.publicBaseUrl}/hooks/[A-Za-z0-9_-]+$`));
    const url = local(on.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl);
    const res = await postHook(url, o.user.token, { record_id: "1" });
    expect(res.status).toBe(202);
    expect((await db().runs.findOne({ _id: res.body.runId! }))?.userId).toBe(o.user.user.id);
    const got = await o.editor.client.getWorkflow({ workflowId: o.workflow.id });
    expect(got.workflow!.webhook!.url).toBe(on.webhook!.url);
    const team = await db().teams.findOne({ _id: o.team.id });
    expect(team?.memberIds).toEqual(expect.arrayContaining([o.admin.user.id, o.editor.user.id, o.user.user.id]));
  });

  it("serves AdminService over native gRPC", async () => {
    const o = await org();
    const r = await grpcUnary(
      server.grpcAddr,
      "/runhook.v1.AdminService/CreateProject",
      CreateProjectRequestSchema,
      CreateProjectResponseSchema,
      create(CreateProjectRequestSchema, { name: `g-${o.tag}` }),
      o.boot.adminToken,
    );
    expect(r.error).toBeUndefined();
    expect(r.value!.project!.name).toBe(`g-${o.tag}`);
    const denied = await grpcUnary(
      server.grpcAddr,
      "/runhook.v1.AdminService/CreateProject",
      CreateProjectRequestSchema,
      CreateProjectResponseSchema,
      { name: "x" },
      o.user.token,
    );
    expect(denied.error?.code).toBe(grpc.status.PERMISSION_DENIED);
  });

  it("publishes versions, deactivates one, changes trigger roles", async () => {
    const o = await org();
    const c = o.editor.client;
    const p2 = await c.publishWorkflow({ workflowId: o.workflow.id, steps: [load] });
    expect(p2.workflow!.versions.map((v) => [v.version, v.active])).toEqual([
      [1, true],
      [2, true],
    ]);
    const d = await c.deactivateWorkflowVersion({ workflowId: o.workflow.id, version: 1 });
    expect(d.workflow!.versions.map((v) => [v.version, v.active])).toEqual([
      [1, false],
      [2, true],
    ]);
    const p3 = await c.publishWorkflow({ workflowId: o.workflow.id, steps: [load], triggerRoles: ["admin"], updateTriggerRoles: true });
    expect(p3.workflow!.triggerRoles).toEqual(["admin"]);
    const p4 = await c.publishWorkflow({ workflowId: o.workflow.id, steps: [load] });
    expect(p4.workflow!.triggerRoles).toEqual(["admin"]);
    expect(await code(c.deactivateWorkflowVersion({ workflowId: o.workflow.id, version: 9 }))).toBe(Code.NotFound);
  });

  it("gives concurrent publishes distinct version numbers", async () => {
    const o = await org();
    await Promise.all(Array.from({ length: 5 }, () => o.editor.client.publishWorkflow({ workflowId: o.workflow.id, steps: [load] })));
    const wf = (await o.editor.client.getWorkflow({ workflowId: o.workflow.id })).workflow!;
    expect(wf.versions.map((v) => v.version)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("sets the webhook rate limit (1 to 100000)", async () => {
    const o = await org();
    const r = await o.editor.client.setWebhookRateLimit({ workflowId: o.workflow.id, rateLimitPerMinute: 5 });
    expect(r.webhook!.rateLimitPerMinute).toBe(5);
    expect(await code(o.editor.client.setWebhookRateLimit({ workflowId: o.workflow.id, rateLimitPerMinute: 0 }))).toBe(Code.InvalidArgument);
    expect(await code(o.editor.client.setWebhookRateLimit({ workflowId: o.workflow.id, rateLimitPerMinute: 100_001 }))).toBe(Code.InvalidArgument);
  });

  it("removes a project role with an empty role", async () => {
    const o = await org();
    await o.root.setProjectRole({ projectId: o.project.id, userId: o.user.user.id, role: "" });
    expect(await db().projectRoles.countDocuments({ projectId: o.project.id, userId: o.user.user.id })).toBe(0);
    await o.root.setProjectRole({ projectId: o.project.id, userId: o.user.user.id, role: "editor" });
    await o.root.setProjectRole({ projectId: o.project.id, userId: o.user.user.id, role: "user" });
    expect((await db().projectRoles.findOne({ projectId: o.project.id, userId: o.user.user.id }))?.role).toBe("user");
  });
});

describe("AdminService: validation", () => {
  it("answers INVALID_ARGUMENT with a clear message for bad input", async () => {
    const o = await org();
    const r = o.root;
    const wf = (steps: Step[], extra: Record<string, unknown> = {}) =>
      r.createWorkflow({ renderingId: o.rendering.id, collectionId: o.collection.id, name: "w", steps, ...extra });
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ["project name", () => r.createProject({ name: "bad name!" }), /name/],
      ["empty project name", () => r.createProject({ name: "" }), /name/],
      ["environment name", () => r.createEnvironment({ projectId: o.project.id, name: "a/b" }), /name/],
      [
        "reserved data database",
        () => r.createEnvironment({ projectId: o.project.id, name: "x", dataDatabase: server.deps.store.databaseName }),
        /data_database/,
      ],
      ["bad data database", () => r.createEnvironment({ projectId: o.project.id, name: "x", dataDatabase: "a.b" }), /data_database/],
      ["user e-mail", () => r.createUser({ email: "nope" }), /email/],
      ["collection name", () => r.createCollection({ environmentId: o.env.id, name: "a.b" }), /name/],
      ["primary key field", () => r.createCollection({ environmentId: o.env.id, name: "c1", primaryKey: ["$x"] }), /primary_key/],
      ["duplicate primary key field", () => r.createCollection({ environmentId: o.env.id, name: "c2", primaryKey: ["a", "a"] }), /primary_key/],
      [
        "permission role",
        () => r.setCollectionPermission({ permission: { renderingId: o.rendering.id, collectionId: o.collection.id, readRoles: ["owner"] } }),
        /read_roles/,
      ],
      [
        "permission scope operator",
        () => r.setCollectionPermission({ permission: { renderingId: o.rendering.id, collectionId: o.collection.id, scope: { $where: "1" } } }),
        /scope/,
      ],
      [
        "permission scope object",
        () => r.setCollectionPermission({ permission: { renderingId: o.rendering.id, collectionId: o.collection.id, scope: { region: { $ne: "eu" } } } }),
        /scope/,
      ],
      ["project role", () => r.setProjectRole({ projectId: o.project.id, userId: o.user.user.id, role: "owner" }), /role/],
      ["no steps", () => wf([]), /steps/],
      ["step without kind", () => wf([{}]), /steps\[0\]/],
      ["wait too long", () => wf([wait(86_401)]), /steps\[0\]\.wait\.seconds/],
      ["empty update", () => wf([update({})]), /update_record\.set/],
      ["update of the primary key", () => wf([update({ id: "x" })]), /primary key/],
      ["update of _id", () => wf([update({ _id: "x" })]), /primary key/],
      ["update with an operator", () => wf([update({ status: { $inc: 1 } })]), /\$/],
      ["empty note", () => wf([note("  ")]), /add_note\.content/],
      ["trigger role", () => wf([load], { triggerRoles: ["root"] }), /trigger_roles/],
      ["workflow name", () => wf([load], { name: "" }), /name/],
      ["token ttl", () => r.createApplicationToken({ ttlSeconds: 10 }), /ttl_seconds/],
      ["api token ttl", () => r.createApiToken({ projectId: o.project.id, ttlSeconds: 31_536_001 }), /ttl_seconds/],
      ["missing id", () => r.getWorkflow({ workflowId: "" }), /workflow_id/],
    ];
    for (const [name, p, msg] of cases) {
      const err = await p().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, name).toBe(Code.InvalidArgument);
      expect(err?.rawMessage, name).toMatch(msg);
    }
    // Wait 0 and 86400 are the bounds.
    expect(await code(wf([wait(0), wait(86_400)]))).toBe("ok");
  });

  it("answers ALREADY_EXISTS for duplicates", async () => {
    const o = await org();
    const r = o.root;
    expect(await code(r.createProject({ name: o.project.name }))).toBe(Code.AlreadyExists);
    expect(await code(r.createEnvironment({ projectId: o.project.id, name: "production" }))).toBe(Code.AlreadyExists);
    expect(await code(r.createTeam({ projectId: o.project.id, name: "ops" }))).toBe(Code.AlreadyExists);
    expect(await code(r.createRendering({ teamId: o.team.id, environmentId: o.env.id }))).toBe(Code.AlreadyExists);
    expect(await code(r.createCollection({ environmentId: o.env.id, name: "orders" }))).toBe(Code.AlreadyExists);
    expect(await code(r.createUser({ email: o.user.user.email }))).toBe(Code.AlreadyExists);
    expect(await code(adminClient(server.baseUrl, BOOTSTRAP_SECRET).bootstrap({ organizationName: `org-${o.tag}`, adminEmail: "other@example.test" }))).toBe(
      Code.AlreadyExists,
    );
  });

  it("answers NOT_FOUND for unknown ids, and for resources of another organization", async () => {
    const o = await org();
    const other = await org();
    const r = o.root;
    const ghost = "00000000-0000-4000-8000-000000000000";
    expect(await code(r.getWorkflow({ workflowId: ghost }))).toBe(Code.NotFound);
    expect(await code(r.enableWebhook({ workflowId: ghost }))).toBe(Code.NotFound);
    expect(await code(r.createEnvironment({ projectId: ghost, name: "x" }))).toBe(Code.NotFound);
    expect(await code(r.setTeamMember({ teamId: ghost, userId: o.user.user.id, member: true }))).toBe(Code.NotFound);
    expect(await code(r.setTeamMember({ teamId: o.team.id, userId: ghost, member: true }))).toBe(Code.NotFound);
    expect(await code(r.revokeApplicationToken({ tokenId: ghost }))).toBe(Code.NotFound);
    expect(await code(r.revokeApiToken({ tokenId: ghost }))).toBe(Code.NotFound);
    expect(await code(r.createRendering({ teamId: o.team.id, environmentId: other.env.id }))).toBe(Code.NotFound);
    expect(await code(r.createWorkflow({ renderingId: o.rendering.id, collectionId: other.collection.id, name: "w", steps: [load] }))).toBe(Code.NotFound);
    expect(await code(r.getWorkflow({ workflowId: other.workflow.id }))).toBe(Code.NotFound);
    expect(await code(r.setProjectRole({ projectId: o.project.id, userId: other.user.user.id, role: "user" }))).toBe(Code.NotFound);
    expect(await code(r.revokeApplicationToken({ tokenId: other.user.tokenId }))).toBe(Code.NotFound);
  });
});

describe("AdminService: who may call what", () => {
  it("answers UNAUTHENTICATED without a valid application token", async () => {
    const o = await org();
    expect(await code(adminClient(server.baseUrl, `rh_app_${"A".repeat(43)}`).createProject({ name: "x" }))).toBe(Code.Unauthenticated);
    const api = await o.admin.client.createApiToken({ projectId: o.project.id });
    expect(await code(adminClient(server.baseUrl, api.plaintext).getWorkflow({ workflowId: o.workflow.id }))).toBe(Code.Unauthenticated);
    expect(await code(adminClient(server.baseUrl, BOOTSTRAP_SECRET).createProject({ name: "x" }))).toBe(Code.Unauthenticated);
  });

  it("organization admin: everything in the organization", async () => {
    const o = await org();
    expect(await code(o.root.createUser({ email: `u-${o.tag}@example.test` }))).toBe("ok");
    expect(await code(o.root.createApiToken({ projectId: o.project.id }))).toBe("ok");
    expect(await code(o.root.regenerateWebhook({ workflowId: o.workflow.id }))).toBe("ok");
  });

  it("project admin: everything in the project incl. API tokens, but not organization-level changes", async () => {
    const o = await org();
    const c = o.admin.client;
    expect(await code(c.createEnvironment({ projectId: o.project.id, name: "staging" }))).toBe("ok");
    expect(await code(c.createTeam({ projectId: o.project.id, name: "t2" }))).toBe("ok");
    expect(await code(c.setProjectRole({ projectId: o.project.id, userId: o.user.user.id, role: "editor" }))).toBe("ok");
    // requires_sso is changed only from an SSO session (the SSO tests below).
    expect(await code(c.updateProject({ projectId: o.project.id, requiresSso: true }))).toBe(Code.PermissionDenied);
    const api = await c.createApiToken({ projectId: o.project.id, name: "siem" });
    expect(api.plaintext).toMatch(/^rh_api_/);
    expect(api.token!.user!.id).toBe(o.admin.user.id);
    expect(await code(c.revokeApiToken({ tokenId: api.token!.id }))).toBe("ok");
    expect((await db().apiTokens.findOne({ _id: api.token!.id }))?.revokedAt).toBeInstanceOf(Date);
    expect(await code(c.createProject({ name: `p-${o.tag}` }))).toBe(Code.PermissionDenied);
    expect(await code(c.createUser({ email: `x-${o.tag}@example.test` }))).toBe(Code.PermissionDenied);
  });

  it("editor: workflows and webhooks only", async () => {
    const o = await org();
    const c = o.editor.client;
    expect(await code(c.enableWebhook({ workflowId: o.workflow.id }))).toBe("ok");
    expect(await code(c.disableWebhook({ workflowId: o.workflow.id }))).toBe("ok");
    expect(await code(c.regenerateWebhook({ workflowId: o.workflow.id }))).toBe("ok");
    expect(await code(c.publishWorkflow({ workflowId: o.workflow.id, steps: [load] }))).toBe("ok");
    expect(await code(c.createApiToken({ projectId: o.project.id }))).toBe(Code.PermissionDenied);
    expect(await code(c.createEnvironment({ projectId: o.project.id, name: "e2" }))).toBe(Code.PermissionDenied);
    expect(await code(c.setProjectRole({ projectId: o.project.id, userId: o.editor.user.id, role: "admin" }))).toBe(Code.PermissionDenied);
    expect(await code(c.setCollectionPermission({ permission: { renderingId: o.rendering.id, collectionId: o.collection.id, readRoles: ["user"] } }))).toBe(
      Code.PermissionDenied,
    );
  });

  it("user: own application tokens only", async () => {
    const o = await org();
    const c = o.user.client;
    expect(await code(c.getWorkflow({ workflowId: o.workflow.id }))).toBe(Code.PermissionDenied);
    expect(await code(c.enableWebhook({ workflowId: o.workflow.id }))).toBe(Code.PermissionDenied);
    expect(await code(c.createWorkflow({ renderingId: o.rendering.id, collectionId: o.collection.id, name: "w", steps: [load] }))).toBe(Code.PermissionDenied);
    const mine = await c.createApplicationToken({ name: "ci", ttlSeconds: 3600 });
    expect(mine.token!.user!.id).toBe(o.user.user.id);
    expect(mine.token!.sso).toBe(false);
    const ttl = Number(mine.token!.expiresAt!.seconds) - Number(mine.token!.createdAt!.seconds);
    expect(ttl).toBe(3600);
    expect(await code(c.createApplicationToken({ userId: o.editor.user.id }))).toBe(Code.PermissionDenied);
    expect(await code(c.revokeApplicationToken({ tokenId: o.editor.tokenId }))).toBe(Code.NotFound);
    expect(await code(c.revokeApplicationToken({ tokenId: mine.token!.id }))).toBe("ok");
  });

  it("application tokens: 90 days by default, stored only as a hash", async () => {
    const o = await org();
    const t = await o.user.client.createApplicationToken({});
    const days = (Number(t.token!.expiresAt!.seconds) - Number(t.token!.createdAt!.seconds)) / 86400;
    expect(days).toBe(90);
    const doc = await db().appTokens.findOne({ _id: t.token!.id });
    expect(JSON.stringify(doc)).not.toContain(t.plaintext);
  });

  it("SSO tokens come only from the identity provider's stand-in (the operator secret) or an SSO session, for oneself", async () => {
    const o = await org();
    // Not an organization admin's to hand out, for others or for itself; not a user's.
    expect(await code(o.root.createApplicationToken({ userId: o.user.user.id, sso: true }))).toBe(Code.PermissionDenied);
    expect(await code(o.root.createApplicationToken({ sso: true }))).toBe(Code.PermissionDenied);
    expect(await code(o.user.client.createApplicationToken({ sso: true }))).toBe(Code.PermissionDenied);
    // IssueSsoToken: the operator secret only.
    expect(await code(o.root.issueSsoToken({ userId: o.user.user.id }))).toBe(Code.Unauthenticated);
    const operator = adminClient(server.baseUrl, BOOTSTRAP_SECRET);
    const userSso = await operator.issueSsoToken({ userId: o.user.user.id, name: "sso login" });
    expect(userSso.token).toMatchObject({ sso: true, user: { id: o.user.user.id } });
    // An SSO session makes more SSO tokens for itself only.
    const fromSession = await adminClient(server.baseUrl, userSso.plaintext).createApplicationToken({ sso: true });
    expect(fromSession.token).toMatchObject({ sso: true, user: { id: o.user.user.id } });
    const rootSso = adminClient(server.baseUrl, (await operator.issueSsoToken({ userId: o.boot.admin!.id })).plaintext);
    expect(await code(rootSso.createApplicationToken({ userId: o.user.user.id, sso: true }))).toBe(Code.PermissionDenied);
    expect(await code(rootSso.createApplicationToken({ userId: o.user.user.id }))).toBe("ok");
  });

  it("requires_sso and API tokens of an SSO project need the caller's own SSO session", async () => {
    const o = await org();
    const adminSso = adminClient(server.baseUrl, (await adminClient(server.baseUrl, BOOTSTRAP_SECRET).issueSsoToken({ userId: o.admin.user.id })).plaintext);
    expect(await code(o.admin.client.updateProject({ projectId: o.project.id, requiresSso: true }))).toBe(Code.PermissionDenied);
    expect(await code(o.root.updateProject({ projectId: o.project.id, requiresSso: true }))).toBe(Code.PermissionDenied);
    expect((await adminSso.updateProject({ projectId: o.project.id, requiresSso: true })).project!.requiresSso).toBe(true);
    expect(await code(o.admin.client.createApiToken({ projectId: o.project.id }))).toBe(Code.PermissionDenied);
    expect(await code(adminSso.createApiToken({ projectId: o.project.id }))).toBe("ok");
    // Nor can a non-SSO session turn it off again.
    expect(await code(o.admin.client.updateProject({ projectId: o.project.id, requiresSso: false }))).toBe(Code.PermissionDenied);
  });

  it("organization admins revoke tokens of users of their organization", async () => {
    const o = await org();
    const r = await o.root.revokeApplicationToken({ tokenId: o.user.tokenId });
    expect(r.token!.revokedAt).toBeDefined();
    expect(await code(o.user.client.createApplicationToken({}))).toBe(Code.Unauthenticated);
  });
});

describe("AdminService: admin logs", () => {
  it("entries about a user's tokens reach /v1 in every project of the user; a run names the token that started it", async () => {
    const o = await org();
    const p2 = (await o.root.createProject({ name: `p2-${o.tag}` })).project!;
    await o.root.setProjectRole({ projectId: p2.id, userId: o.user.user.id, role: "user" });
    await o.root.setProjectRole({ projectId: p2.id, userId: o.admin.user.id, role: "admin" });
    const tok = await o.user.client.createApplicationToken({ name: "ci" });
    const on = await o.editor.client.enableWebhook({ workflowId: o.workflow.id });
    const hook = await postHook(local(on.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl), tok.plaintext, { record_id: "1" });
    expect(hook.status).toBe(202);
    await o.user.client.revokeApplicationToken({ tokenId: tok.token!.id });
    // /v1 names users by their number; the user's own entries are the two about its token.
    const userNumber = (await db().users.findOne({ _id: o.user.user.id }))!.number!;
    const user = { object: "user", id: userNumber, username: "user", email: o.user.user.email };
    for (const project of [o.project, p2]) {
      const api = (await o.admin.client.createApiToken({ projectId: project.id })).plaintext;
      const res = await fetch(`${server.baseUrl}/v1/project/${project.name}/admin-logs?userId=${userNumber}`, {
        headers: { authorization: `Bearer ${api}` },
      });
      expect(res.status).toBe(200);
      const about = await db()
        .adminLogs.find({ projectId: project.id, target: `token/${tok.token!.id}` })
        .sort({ seq: -1 })
        .toArray();
      expect(
        about.map((e) => e.action),
        project.name,
      ).toEqual(["token.revoked", "token.created"]);
      const entries = ((await res.json()) as { data: unknown[] }).data;
      expect(entries, project.name).toEqual(
        about.map((e) => ({
          object: "adminLog",
          id: String(e.seq),
          type: "update",
          resource: "user-project",
          initiator: "administrator",
          createdAt: expect.stringMatching(/Z$/),
          user,
          newValue: { user },
        })),
      );
    }
    const run = await fetch(`${server.baseUrl}/v1/runs/${hook.body.runId}`, { headers: { authorization: `Bearer ${o.admin.token}` } });
    expect(((await run.json()) as { tokenId: string }).tokenId).toBe(tok.token!.id);
  });

  it("logs every change with its actor and action name, never a secret", async () => {
    const o = await org();
    const e = o.editor.client;
    await e.enableWebhook({ workflowId: o.workflow.id });
    await e.disableWebhook({ workflowId: o.workflow.id });
    await e.regenerateWebhook({ workflowId: o.workflow.id });
    await e.setWebhookRateLimit({ workflowId: o.workflow.id, rateLimitPerMinute: 9 });
    await e.publishWorkflow({ workflowId: o.workflow.id, steps: [load] });
    await e.deactivateWorkflowVersion({ workflowId: o.workflow.id, version: 1 });
    const tok = await o.user.client.createApplicationToken({ name: "mine" });
    await o.user.client.revokeApplicationToken({ tokenId: tok.token!.id });
    const api = await o.admin.client.createApiToken({ projectId: o.project.id });
    await o.admin.client.revokeApiToken({ tokenId: api.token!.id });
    const entries = await db().adminLogs.find({ organizationId: o.orgId }).sort({ _id: 1 }).toArray();
    const by = (action: string) => entries.filter((x) => x.action === action);
    for (const action of [
      "organization.created",
      "project.created",
      "environment.created",
      "team.created",
      "rendering.created",
      "collection.created",
      "permissions.changed",
      "user.created",
      "project.role.changed",
      "team.member.added",
      "workflow.created",
      "workflow.published",
      "workflow.deactivated",
      "webhook.enabled",
      "webhook.disabled",
      "webhook.regenerated",
      "webhook.rate_limit.changed",
      "token.created",
      "token.revoked",
      "api_token.created",
      "api_token.revoked",
    ]) {
      expect(by(action).length, action).toBeGreaterThan(0);
    }
    expect(by("webhook.enabled")[0]).toMatchObject({
      actor: { id: o.editor.user.id, email: o.editor.user.email },
      projectId: o.project.id,
      environment: "production",
      target: `workflow/${o.workflow.id}`,
    });
    expect(by("webhook.rate_limit.changed")[0]!.details).toEqual({ from: 60, to: 9 });
    expect(by("token.revoked").at(-1)!.actor.id).toBe(o.user.user.id);
    expect(by("api_token.created")[0]).toMatchObject({ actor: { id: o.admin.user.id }, projectId: o.project.id });
    const all = JSON.stringify(entries);
    for (const secret of [o.boot.adminToken, o.user.token, o.editor.token, tok.plaintext, api.plaintext]) expect(all).not.toContain(secret);
    expect(all).not.toMatch(/rh_(app|api)_/);
    expect(all).not.toContain("/hooks/");
  });
});

describe("runhook admin (CLI)", () => {
  it("calls AdminService and prints JSON; usage errors (a missing, unknown or valueless flag) exit 2", async () => {
    const o = await org();
    const env = { RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: o.editor.token };
    const steps = JSON.stringify([{ type: "load_record" }, { wait: { seconds: 2 } }, { update_record: { set: { status: "x" } } }]);
    const created = await run(
      ["admin", "workflows", "create", "--rendering", o.rendering.id, "--collection", o.collection.id, "--name", "cli", "--steps", steps],
      env,
    );
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const wf = JSON.parse(created.stdout) as { workflow: { id: string; versions: { steps: object[] }[] } };
    expect(wf.workflow.versions[0]!.steps).toEqual([{ loadRecord: {} }, { wait: { seconds: 2 } }, { updateRecord: { set: { status: "x" } } }]);
    const enabled = await run(["admin", "webhook", "enable", `--workflow=${wf.workflow.id}`], env);
    expect(JSON.parse(enabled.stdout).webhook.url).toMatch(/\/hooks\//);
    const limited = await run(["admin", "webhook", "rate-limit", "--workflow", wf.workflow.id, "--per-minute", "7"], env);
    expect(JSON.parse(limited.stdout).webhook.rateLimitPerMinute).toBe(7);
    const denied = await run(["admin", "api-tokens", "create", "--project", o.project.id], env);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/permission_denied/);
    const usage = await run(["admin", "workflows", "get"], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--workflow is required/);
    const unknown = await run(["admin", "frobnicate"], env);
    expect(unknown.code).toBe(2);
    // One strict parser for every command: a mistyped flag is refused, never ignored.
    const typo = await run(["admin", "workflows", "get", "--workflow", wf.workflow.id, "--wokflow", "x"], env);
    expect([typo.code, typo.stdout]).toEqual([2, ""]);
    expect(typo.stderr).toMatch(/unknown option '--wokflow'/i);
    const valueless = await run(["admin", "projects", "update", "--project", o.project.id, "--sso"], env);
    expect([valueless.code, valueless.stdout]).toEqual([2, ""]);
    expect(valueless.stderr).toMatch(/--sso/);
    const boot = await run(["admin", "bootstrap", "--org", `cli-${o.tag}`, "--email", `cli-${o.tag}@example.test`], {
      RUNHOOK_URL: server.baseUrl,
      RUNHOOK_BOOTSTRAP_SECRET: BOOTSTRAP_SECRET,
    });
    expect(boot.code).toBe(0);
    expect(JSON.parse(boot.stdout).adminToken).toMatch(/^rh_app_/);
  });
});

describe("runhook seed --json", () => {
  it("prints one JSON object whose webhook URL and tokens work; each call makes fresh tokens", async () => {
    const dbName = testDbName();
    const env = testEnv(dbName, { PUBLIC_BASE_URL: "http://hooks.example.test:9999" });
    const first = await run(["seed", "--json"], env);
    expect(first.code, first.stderr).toBe(0);
    const lines = first.stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const out = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(Object.keys(out).sort()).toEqual([
      "adminToken",
      "apiToken",
      "baseUrl",
      "collection",
      "environmentName",
      "projectName",
      "recordIds",
      "userToken",
      "webhookUrl",
    ]);
    expect(out).toMatchObject({
      baseUrl: "http://hooks.example.test:9999",
      collection: "orders",
      projectName: expect.any(String),
      environmentName: expect.any(String),
    });
    expect(out.webhookUrl).toMatch(/^http:\/\/hooks\.example\.test:9999\/hooks\/[A-Za-z0-9_-]+$/);
    expect(out.userToken).toMatch(/^rh_app_/);
    expect(out.apiToken).toMatch(/^rh_api_/);
    expect(out.adminToken).toMatch(/^rh_app_/);
    const recordIds = out.recordIds as string[];
    expect(recordIds.length).toBeGreaterThanOrEqual(3);

    const second = JSON.parse((await run(["seed", "--json"], env)).stdout) as Record<string, unknown>;
    expect(second.userToken).not.toBe(out.userToken);
    expect(second.apiToken).not.toBe(out.apiToken);
    expect(second.adminToken).not.toBe(out.adminToken);
    expect(second.webhookUrl).toBe(out.webhookUrl);
    expect(second.recordIds).toEqual(recordIds);

    const s = await startServer({ dbName, env: { RUNHOOK_EXECUTOR: "false", PUBLIC_BASE_URL: "http://hooks.example.test:9999" } });
    try {
      // This database holds the seeded world only: its environments, in `_id` order.
      const environments = await storeFixtures(s.deps.store)
        .environments.find({}, { sort: { _id: 1 } })
        .toArray();
      const environment = environments.find((e) => e.name === out.environmentName);
      const records = await storeFixtures(s.deps.store)
        .records(environment!.dataDatabase, "orders")
        .find({}, { sort: { _id: 1 } })
        .toArray();
      expect(records.map((r) => String(r.id))).toEqual(expect.arrayContaining(recordIds));
      const url = local(out.webhookUrl as string, "http://hooks.example.test:9999", s.baseUrl);
      const a = await postHook(url, out.userToken as string, { record_id: recordIds[0] });
      expect(a.status).toBe(202);
      const b = await postHook(url, second.userToken as string, { record_id: recordIds[0] });
      expect(b.status).toBe(409);
      const wf = await storeFixtures(s.deps.store).workflows.findOne({}, { sort: { _id: 1 } });
      expect(await s.deps.store.immutable.workflowSteps(wf!._id, wf!.versions[0]!)).toEqual([
        { type: "load_record" },
        { type: "wait", seconds: 5 },
        { type: "update_record", set: { status: "processed" } },
        expect.objectContaining({ type: "add_note" }),
      ]);
      expect(await storeFixtures(s.deps.store).adminLogs.countDocuments({ projectId: environment!.projectId, action: "webhook.enabled" })).toBeGreaterThan(0);
      // The project API token is a valid project admin token of the demo project.
      const api = await storeFixtures(s.deps.store)
        .apiTokens.find({}, { sort: { _id: 1 } })
        .toArray();
      expect(api).toHaveLength(2);
    } finally {
      await s.stop();
    }
  }, 120_000);
});
