// AdminService reads: Get and List of every resource, each scoped as its changes are, paged
// (AIP-158) with page tokens bound to the caller and the query; WhoAmI; when tokens were last
// used; and `runhook admin … list|get|whoami`. On the real server and database.
import { toJsonString } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ApiTokenSchema, ApplicationTokenSchema } from "../gen/runhook/v1/admin_pb.js";
import { describe, expect, it } from "vitest";
import { addUser, createWorld, type World } from "../fixtures/world.js";
import { storeFixtures, type CommandStartedEvent } from "../src/store/index.js";
import { apiClient } from "./helpers/api.js";
import { table } from "../src/cli/admin-reads.js";
import { runCli } from "./helpers/cli.js";
import { serverForFile } from "./helpers/server.js";
import { adminClient, code, sleep } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false", RUNHOOK_ADMIN_RATE_LIMIT: "100000", RUNHOOK_ADMIN_ORG_RATE_LIMIT: "100000" } });
const client = (token: string) => adminClient(server.baseUrl, token);

/** A user of the world's organization with an application token, and its client. */
async function member(w: World, role: "admin" | "editor" | "user" | null, inTeam = false) {
  const u = await addUser(server, w, role, inTeam ? { teamId: w.teamId } : {});
  const token = (await client(w.ownerToken).createApplicationToken({ userId: u._id, name: "t" })).plaintext;
  return { ...u, token, c: client(token) };
}

/** Every page of a list, following next_page_token; `between` runs after each page. */
async function pages<T>(
  list: (pageToken: string) => Promise<{ items: T[]; nextPageToken: string }>,
  between: () => Promise<unknown> = async () => {},
): Promise<T[][]> {
  const out: T[][] = [];
  for (let token = ""; ; ) {
    const page = await list(token);
    out.push(page.items);
    if (!page.nextPageToken) return out;
    token = page.nextPageToken;
    await between();
  }
}

describe("scope: a user sees what its roles let it see, nothing of another organization", () => {
  it("projects: an organization admin's all of them, a member's its own, none without a role or of another organization", async () => {
    const w = await createWorld(server);
    const w2 = await createWorld(server, { organizationOf: w });
    const other = await createWorld(server);
    const ids = async (token: string) => (await client(token).listProjects({})).projects.map((p) => p.id).sort();
    expect(await ids(w.ownerToken)).toEqual([w.projectId, w2.projectId].sort());
    expect(await ids(w.adminToken)).toEqual([w.projectId]);
    expect(await ids(w2.userToken)).toEqual([w2.projectId]);
    expect(await ids((await member(w, null)).token)).toEqual([]);
    expect(await ids(other.ownerToken)).toEqual([other.projectId]);
    expect((await client(w.userToken).getProject({ projectId: w.projectId })).project!.name).toBe(w.projectName);
    expect(await code(client(w.userToken).getProject({ projectId: w2.projectId }))).toBe(Code.PermissionDenied);
    expect(await code(client(other.ownerToken).getProject({ projectId: w.projectId }))).toBe(Code.NotFound);
  });

  it("environments, teams, renderings, collections and permissions: as the changes of them", async () => {
    const w = await createWorld(server);
    const other = await createWorld(server);
    const editor = await member(w, "editor");
    const admin = client(w.adminToken);
    expect((await admin.listEnvironments({ projectId: w.projectId })).environments.map((e) => e.id)).toEqual([w.environmentId]);
    const teams = (await admin.listTeams({ projectId: w.projectId })).teams;
    expect(teams.map((t) => [t.id, [...t.memberIds].sort()])).toEqual([[w.teamId, [w.admin._id, w.user._id].sort()]]);
    expect((await admin.listTeamMembers({ teamId: w.teamId })).users.map((u) => u.email).sort()).toEqual([w.admin.email, w.user.email].sort());
    expect((await editor.c.listRenderings({ projectId: w.projectId })).renderings.map((r) => r.id)).toEqual([w.renderingId]);
    expect((await editor.c.listCollections({ environmentId: w.environmentId })).collections.map((c) => c.name)).toEqual([w.collection]);
    const perms = (await admin.listCollectionPermissions({ renderingId: w.renderingId })).collectionPermissions;
    expect(perms.map((p) => p.collectionId)).toEqual([w.collectionId]);
    expect((await admin.getCollectionPermission({ renderingId: w.renderingId, collectionId: w.collectionId })).permission!.readRoles).toContain("user");

    // Every role sees the environments (where its runs are searched); the data database only admins.
    expect((await admin.listEnvironments({ projectId: w.projectId })).environments[0]!.dataDatabase).not.toBe("");
    const user = client(w.userToken);
    for (const c of [editor.c, user]) {
      const [listed] = (await c.listEnvironments({ projectId: w.projectId })).environments;
      expect(listed).toMatchObject({ id: w.environmentId, name: w.environmentName, dataDatabase: "" });
      expect((await c.getEnvironment({ environmentId: w.environmentId })).environment).toMatchObject({ name: w.environmentName, dataDatabase: "" });
    }
    expect(await code((await member(other, "user")).c.listEnvironments({ projectId: w.projectId }))).toBe(Code.NotFound);
    // An editor changes workflows only; a user (even in the team) none of these.
    expect(await code(editor.c.listTeams({ projectId: w.projectId }))).toBe(Code.PermissionDenied);
    expect(await code(editor.c.listCollectionPermissions({ renderingId: w.renderingId }))).toBe(Code.PermissionDenied);
    for (const call of [
      () => user.listTeams({ projectId: w.projectId }),
      () => user.listRenderings({ projectId: w.projectId }),
      () => user.listCollections({ environmentId: w.environmentId }),
    ])
      expect(await code(call())).toBe(Code.PermissionDenied);

    // Another organization's owner: every parent and every Get is NOT_FOUND (as the changes answer).
    const o = client(other.ownerToken);
    for (const call of [
      () => o.listEnvironments({ projectId: w.projectId }),
      () => o.getEnvironment({ environmentId: w.environmentId }),
      () => o.listTeams({ projectId: w.projectId }),
      () => o.getTeam({ teamId: w.teamId }),
      () => o.listTeamMembers({ teamId: w.teamId }),
      () => o.listRenderings({ projectId: w.projectId }),
      () => o.getRendering({ renderingId: w.renderingId }),
      () => o.listCollections({ environmentId: w.environmentId }),
      () => o.getCollection({ collectionId: w.collectionId }),
      () => o.listCollectionPermissions({ renderingId: w.renderingId }),
      () => o.getCollectionPermission({ renderingId: w.renderingId, collectionId: w.collectionId }),
      () => o.listWorkflows({ renderingId: w.renderingId }),
      () => o.listWorkflowVersions({ workflowId: w.workflowId }),
      () => o.getWebhook({ workflowId: w.workflowId }),
      () => o.listApiTokens({ projectId: w.projectId }),
      () => o.getUser({ userId: w.user._id }),
      () => o.listApplicationTokens({ userId: w.user._id }),
    ])
      expect(await code(call())).toBe(Code.NotFound);
  });

  it("workflows: editors and admins with the webhook URL, the rendering's users without it, no one else", async () => {
    const w = await createWorld(server);
    const editor = await member(w, "editor");
    const outsider = await member(w, "user"); // a role, but not in the rendering's team
    const url = (await client(w.ownerToken).getWorkflow({ workflowId: w.workflowId })).workflow!.webhook!.url;
    expect(url).toContain("/hooks/");
    for (const c of [editor.c, client(w.adminToken), client(w.ownerToken)]) {
      const [wf] = (await c.listWorkflows({ renderingId: w.renderingId })).workflows;
      expect(wf!.webhook).toMatchObject({ enabled: true, url });
      expect((await c.getWebhook({ workflowId: w.workflowId })).webhook!.url).toBe(url);
    }
    const user = client(w.userToken);
    const [seen] = (await user.listWorkflows({ renderingId: w.renderingId })).workflows;
    expect(seen).toMatchObject({ id: w.workflowId, name: "test workflow", webhook: { enabled: true, url: "" } });
    expect((await user.getWebhook({ workflowId: w.workflowId })).webhook).toMatchObject({ enabled: true, url: "" });
    expect((await user.listWorkflowVersions({ workflowId: w.workflowId })).workflowVersions.map((v) => v.version)).toEqual([1]);
    expect(await code(outsider.c.listWorkflows({ renderingId: w.renderingId }))).toBe(Code.PermissionDenied);
    expect(await code(outsider.c.getWebhook({ workflowId: w.workflowId }))).toBe(Code.PermissionDenied);
    expect(await code((await member(w, null)).c.listWorkflows({ renderingId: w.renderingId }))).toBe(Code.PermissionDenied);
  });

  it("tokens: one's own application tokens, a project's API tokens for its admins (a demoted admin loses them), organization tokens for organization admins", async () => {
    const w = await createWorld(server);
    const other = await createWorld(server);
    const owner = client(w.ownerToken);
    const mine = (await client(w.userToken).listApplicationTokens({})).applicationTokens;
    expect(mine.map((t) => t.user!.id)).toEqual([w.user._id]);
    expect(toJsonString(ApplicationTokenSchema, mine[0]!)).not.toMatch(/rh_app_|hash/);
    expect(await code(client(w.userToken).listApplicationTokens({ userId: w.admin._id }))).toBe(Code.PermissionDenied);
    expect((await owner.listApplicationTokens({ userId: w.user._id })).applicationTokens.map((t) => t.id)).toEqual(mine.map((t) => t.id));
    expect((await client(w.userToken).getApplicationToken({ tokenId: mine[0]!.id })).token!.name).toBe("test user");
    expect(await code(client(w.adminToken).getApplicationToken({ tokenId: mine[0]!.id }))).toBe(Code.NotFound);
    expect(await code(client(other.ownerToken).getApplicationToken({ tokenId: mine[0]!.id }))).toBe(Code.NotFound);

    const admin = client(w.adminToken);
    const api = (await admin.listApiTokens({ projectId: w.projectId })).apiTokens;
    expect(api.map((t) => [t.projectId, t.user!.email, t.name])).toEqual([[w.projectId, w.admin.email, "test"]]);
    expect(toJsonString(ApiTokenSchema, api[0]!)).not.toMatch(/rh_api_|hash/);
    expect((await admin.getApiToken({ tokenId: api[0]!.id })).token!.id).toBe(api[0]!.id);
    expect(await code(client(w.userToken).listApiTokens({ projectId: w.projectId }))).toBe(Code.PermissionDenied);
    expect(await code(client(other.ownerToken).getApiToken({ tokenId: api[0]!.id }))).toBe(Code.NotFound);
    await owner.setProjectRole({ projectId: w.projectId, userId: w.admin._id, role: "editor" });
    expect(await code(admin.listApiTokens({ projectId: w.projectId }))).toBe(Code.PermissionDenied);
    expect(await code(admin.getApiToken({ tokenId: api[0]!.id }))).toBe(Code.PermissionDenied);

    const org = await owner.createOrganizationApiToken({ name: "siem" });
    expect((await owner.listOrganizationApiTokens({})).organizationApiTokens.map((t) => t.id)).toEqual([org.token!.id]);
    expect((await owner.getOrganizationApiToken({ tokenId: org.token!.id })).token!.name).toBe("siem");
    expect(await code(admin.listOrganizationApiTokens({}))).toBe(Code.PermissionDenied);
    expect((await client(other.ownerToken).listOrganizationApiTokens({})).organizationApiTokens).toEqual([]);
    expect(await code(client(other.ownerToken).getOrganizationApiToken({ tokenId: org.token!.id }))).toBe(Code.NotFound);
  });

  it("users and the organization: organization admins list the users; anyone gets its organization; WhoAmI describes the caller", async () => {
    const w = await createWorld(server);
    const other = await createWorld(server);
    const users = (await client(w.ownerToken).listUsers({})).users;
    expect(users.map((u) => u.email).sort()).toEqual([w.owner.email, w.admin.email, w.user.email].sort());
    expect((await client(other.ownerToken).listUsers({})).users.map((u) => u.email)).not.toContain(w.user.email);
    expect(await code(client(w.adminToken).listUsers({}))).toBe(Code.PermissionDenied);
    expect((await client(w.userToken).getOrganization({})).organization!.id).toBe(w.orgId);

    const me = await client(w.adminToken).whoAmI({});
    expect(me.user).toMatchObject({ id: w.admin._id, email: w.admin.email, organizationAdmin: false });
    expect(me.organization!.id).toBe(w.orgId);
    expect(me.roles).toEqual([expect.objectContaining({ projectId: w.projectId, projectName: w.projectName, role: "admin" })]);
    expect(me.token).toMatchObject({ sso: false, name: "test admin" });
    expect((await client(w.ownerToken).whoAmI({})).roles).toEqual([]); // organization admins hold everything without a role
    expect(await code(adminClient(server.baseUrl, w.apiToken).whoAmI({}))).toBe(Code.Unauthenticated);
  });
});

describe("paging", () => {
  it("lists every item exactly once across pages while items are added; page sizes are checked", async () => {
    const w = await createWorld(server);
    const owner = client(w.ownerToken);
    const before = await Promise.all(Array.from({ length: 11 }, (_, i) => owner.createEnvironment({ projectId: w.projectId, name: `e${i}` })));
    const expected = [w.environmentId, ...before.map((e) => e.environment!.id)];
    let n = 0;
    const seen = await pages(
      async (pageToken) => {
        const r = await owner.listEnvironments({ projectId: w.projectId, pageSize: 4, pageToken });
        return { items: r.environments.map((e) => e.id), nextPageToken: r.nextPageToken };
      },
      () => owner.createEnvironment({ projectId: w.projectId, name: `added${n++}` }),
    );
    expect(seen.slice(0, -1).every((p) => p.length === 4)).toBe(true);
    const all = seen.flat();
    expect(new Set(all).size).toBe(all.length); // nothing twice
    for (const id of expected) expect(all).toContain(id);
    expect([...all].sort()).toEqual(all); // by id

    const first = await owner.listEnvironments({ projectId: w.projectId, pageSize: 2 });
    expect(first.environments).toHaveLength(2);
    expect((await owner.listEnvironments({ projectId: w.projectId, pageSize: 5000 })).environments.length).toBe(expected.length + n);
    expect((await owner.listEnvironments({ projectId: w.projectId })).nextPageToken).toBe(""); // default 50 holds them all
    expect(await code(owner.listEnvironments({ projectId: w.projectId, pageSize: -1 }))).toBe(Code.InvalidArgument);
  });

  it("a page token of another query, another caller or edited is refused", async () => {
    const w = await createWorld(server);
    const w2 = await createWorld(server, { organizationOf: w });
    const owner = client(w.ownerToken);
    await Promise.all([1, 2, 3].map((i) => owner.createTeam({ projectId: w.projectId, name: `t${i}` })));
    const { nextPageToken } = await owner.listTeams({ projectId: w.projectId, pageSize: 1 });
    expect(nextPageToken).not.toBe("");
    expect(await code(owner.listTeams({ projectId: w.projectId, pageSize: 1, pageToken: nextPageToken }))).toBe("ok");
    expect(await code(owner.listTeams({ projectId: w2.projectId, pageToken: nextPageToken }))).toBe(Code.InvalidArgument);
    expect(await code(owner.listEnvironments({ projectId: w.projectId, pageToken: nextPageToken }))).toBe(Code.InvalidArgument);
    expect(await code(client(w.adminToken).listTeams({ projectId: w.projectId, pageToken: nextPageToken }))).toBe(Code.InvalidArgument);
    const edited = `${nextPageToken.slice(0, -2)}${nextPageToken.endsWith("A") ? "BB" : "AA"}`;
    expect(await code(owner.listTeams({ projectId: w.projectId, pageToken: edited }))).toBe(Code.InvalidArgument);
  });

  it("pages projects (both ways of seeing them), tokens, users and workflow versions", async () => {
    const w = await createWorld(server);
    const owner = client(w.ownerToken);
    await Promise.all([1, 2, 3, 4].map(() => createWorld(server, { organizationOf: w })));
    const projects = await owner.listProjects({});
    const byPages = (
      await pages(async (t) =>
        ((r) => ({ items: r.projects.map((p) => p.id), nextPageToken: r.nextPageToken }))(await owner.listProjects({ pageSize: 2, pageToken: t })),
      )
    ).flat();
    expect(byPages).toEqual(projects.projects.map((p) => p.id));
    expect(byPages).toHaveLength(5);

    // A member with roles on three of them pages through those (its roles, by project id).
    const m = await member(w, null);
    for (const p of projects.projects.slice(0, 3)) await owner.setProjectRole({ projectId: p.id, userId: m._id, role: "user" });
    const memberPages = await pages(async (t) =>
      ((r) => ({ items: r.projects.map((p) => p.id), nextPageToken: r.nextPageToken }))(await m.c.listProjects({ pageSize: 2, pageToken: t })),
    );
    expect(memberPages.flat()).toEqual(projects.projects.slice(0, 3).map((p) => p.id));

    for (let i = 0; i < 4; i++) await m.c.createApplicationToken({ name: `t${i}` });
    const tokens = await pages(async (t) =>
      ((r) => ({ items: r.applicationTokens.map((x) => x.id), nextPageToken: r.nextPageToken }))(
        await m.c.listApplicationTokens({ pageSize: 3, pageToken: t }),
      ),
    );
    expect(tokens.flat()).toHaveLength(5);
    const users = await pages(async (t) =>
      ((r) => ({ items: r.users.map((x) => x.id), nextPageToken: r.nextPageToken }))(await owner.listUsers({ pageSize: 4, pageToken: t })),
    );
    expect(new Set(users.flat()).size).toBe(users.flat().length);

    for (let i = 0; i < 3; i++) await owner.publishWorkflow({ workflowId: w.workflowId, steps: [{ kind: { case: "loadRecord", value: {} } }] });
    const versions = await pages(async (t) =>
      ((r) => ({ items: r.workflowVersions.map((v) => v.version), nextPageToken: r.nextPageToken }))(
        await owner.listWorkflowVersions({ workflowId: w.workflowId, pageSize: 3, pageToken: t }),
      ),
    );
    expect(versions).toEqual([[1, 2, 3], [4]]);
  });
});

describe("filters", () => {
  it("renderings of one environment", async () => {
    const w = await createWorld(server);
    const owner = client(w.ownerToken);
    const staging = (await owner.createEnvironment({ projectId: w.projectId, name: "staging" })).environment!;
    const r = (await owner.createRendering({ teamId: w.teamId, environmentId: staging.id })).rendering!;
    expect((await owner.listRenderings({ projectId: w.projectId })).renderings.map((x) => x.id).sort()).toEqual([w.renderingId, r.id].sort());
    expect((await owner.listRenderings({ projectId: w.projectId, environmentId: staging.id })).renderings.map((x) => x.id)).toEqual([r.id]);
    const other = await createWorld(server);
    expect(await code(owner.listRenderings({ projectId: w.projectId, environmentId: other.environmentId }))).toBe(Code.NotFound);
  });
});

describe("last used", () => {
  /** The updates of a token's lastUsedAt the store sends while `fn` runs, and until `settled` holds. */
  async function lastUsedWrites(collection: string, fn: () => Promise<void>, settled: () => Promise<boolean>): Promise<string[]> {
    const fx = storeFixtures(server.deps.store);
    const name = fx.collectionNameOf(collection as never);
    const writes: string[] = [];
    const record = (e: CommandStartedEvent) => {
      const c = e.command as { update?: string; updates?: { q: { _id?: string }; u: Record<string, unknown> }[] };
      if (e.commandName === "update" && c.update === name) for (const u of c.updates ?? []) if ("$max" in u.u) writes.push(String(u.q._id));
    };
    const events = fx.commandEvents();
    events.on("commandStarted", record);
    try {
      await fn();
      for (let i = 0; i < 200 && !(await settled()); i++) await sleep(25);
    } finally {
      events.off("commandStarted", record);
    }
    return writes;
  }

  it("records an application token's use once (not again within the minute), without raising the directory's version", async () => {
    const w = await createWorld(server);
    const m = await member(w, "user");
    const id = (await client(w.ownerToken).listApplicationTokens({ userId: m._id })).applicationTokens[0]!.id;
    expect((await client(w.ownerToken).getApplicationToken({ tokenId: id })).token!.lastUsedAt).toBeUndefined();
    const fx = storeFixtures(server.deps.store);
    const version = (await fx.organizationVersion(m._id))!.version;
    const used = async () => (await client(w.ownerToken).getApplicationToken({ tokenId: id })).token!.lastUsedAt !== undefined;
    const writes = await lastUsedWrites(
      "appTokens",
      async () => {
        for (let i = 0; i < 5; i++) await m.c.whoAmI({});
      },
      used,
    );
    expect(writes.filter((x) => x === id)).toEqual([id]);
    const at = (await client(w.ownerToken).getApplicationToken({ tokenId: id })).token!.lastUsedAt!;
    expect(Math.abs(Number(at.seconds) * 1000 - Date.now())).toBeLessThan(120_000);
    expect((await fx.organizationVersion(m._id))!.version).toBe(version);
    // More calls, then another token's first use (its write follows theirs): still one write of the first.
    const again = await lastUsedWrites(
      "appTokens",
      async () => {
        for (let i = 0; i < 5; i++) await m.c.whoAmI({});
        await client(w.adminToken).whoAmI({});
      },
      async () => (await client(w.ownerToken).listApplicationTokens({ userId: w.admin._id })).applicationTokens.every((t) => t.lastUsedAt !== undefined),
    );
    expect(again.filter((x) => x === id)).toEqual([]);
  });

  it("records the use of project and organization API tokens", async () => {
    const w = await createWorld(server);
    const owner = client(w.ownerToken);
    const org = await owner.createOrganizationApiToken({ name: "siem" });
    expect((await apiClient(server.baseUrl, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs`)).status).toBe(200);
    expect((await apiClient(server.baseUrl, org.plaintext).get("/v1/organization/admin-logs")).status).toBe(200);
    const apiUsed = async () => (await owner.listApiTokens({ projectId: w.projectId })).apiTokens[0]!.lastUsedAt !== undefined;
    const orgUsed = async () => (await owner.getOrganizationApiToken({ tokenId: org.token!.id })).token!.lastUsedAt !== undefined;
    for (let i = 0; i < 200 && !((await apiUsed()) && (await orgUsed())); i++) await sleep(25);
    expect([await apiUsed(), await orgUsed()]).toEqual([true, true]);
  });
});

describe("runhook admin list|get|whoami (CLI)", () => {
  const run = (args: string[], token: string) => runCli(["admin", ...args], { RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: token });
  const lines = (stdout: string) =>
    stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, any>);

  it("prints NDJSON when piped: every page of a list, one resource of a get, the caller of whoami", async () => {
    const w = await createWorld(server);
    const w2 = await createWorld(server, { organizationOf: w });
    const projects = await run(["projects", "list", "--page-size", "1"], w.ownerToken);
    expect([projects.code, projects.stderr]).toEqual([0, ""]);
    expect(
      lines(projects.stdout)
        .map((p) => p.id)
        .sort(),
    ).toEqual([w.projectId, w2.projectId].sort());

    const env = await run(["environments", "get", "--environment", w.environmentId], w.adminToken);
    expect(lines(env.stdout)).toEqual([{ id: w.environmentId, projectId: w.projectId, name: w.environmentName, dataDatabase: w.dataDatabase }]);

    const workflows = await run(["workflows", "list", "--rendering", w.renderingId], w.userToken);
    expect(lines(workflows.stdout)).toEqual([expect.objectContaining({ id: w.workflowId, webhook: expect.objectContaining({ enabled: true, url: "" }) })]);

    const me = await run(["whoami"], w.adminToken);
    const [who] = lines(me.stdout);
    expect(who).toMatchObject({
      user: { id: w.admin._id },
      organization: { id: w.orgId },
      roles: [{ projectId: w.projectId, role: "admin" }],
      token: { sso: false },
    });
    expect(me.stdout).not.toMatch(/rh_app_/);

    const tokens = await run(["api-tokens", "list", "--project", w.projectId], w.adminToken);
    expect(lines(tokens.stdout).map((t) => t.user.email)).toEqual([w.admin.email]);

    const usage = await run(["environments", "list"], w.adminToken);
    expect([usage.code, usage.stdout]).toEqual([2, ""]);
    expect(usage.stderr).toMatch(/--project is required/);
    const denied = await run(["users", "list"], w.userToken);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/permission_denied/);
  });

  it("prints a table on a terminal: a header and aligned columns, what a tenant wrote escaped", () => {
    const out = table(
      [
        { id: "a", name: "first", memberIds: ["u1", "u2"] },
        { id: "bb", name: "\u001b[31mred", memberIds: [] },
      ],
      ["id", "name", "memberIds"],
    );
    expect(out).toBe("ID  NAME           MEMBERIDS\na   first          u1,u2\nbb  \\u001b[31mred  -\n");
  });
});
