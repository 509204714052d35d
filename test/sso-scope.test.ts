// An SSO login stretches nowhere: an API token made in an SSO session never outlives the
// session's token (and tokens made before that rule are bound at start), and a project that
// requires SSO refuses every AdminService call that touches it from a token made without one.
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { addApiToken, addAppToken, addUser, createWorld } from "../fixtures/world.js";
import { apiClient } from "./helpers/api.js";
import { BOOTSTRAP_SECRET, serverForFile, startServer } from "./helpers/server.js";
import { adminClient, code } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });

const YEAR_S = 31_536_000;
const seconds = (t: { seconds: bigint } | undefined) => Number(t!.seconds);

describe("an API token made in an SSO session", () => {
  it("never outlives the SSO token of the session: a longer lifetime is refused, the default is cut to it", async () => {
    const w = await createWorld(server);
    const login = await adminClient(server.baseUrl, BOOTSTRAP_SECRET).issueSsoToken({ userId: w.admin._id, ttlSeconds: 120 });
    const loginExpiry = seconds(login.token!.expiresAt);
    const session = adminClient(server.baseUrl, login.plaintext);

    const err = await session.createApiToken({ projectId: w.projectId, ttlSeconds: YEAR_S }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    expect((err as ConnectError).rawMessage).toContain("may not outlive the SSO token that makes it");

    const byDefault = await session.createApiToken({ projectId: w.projectId });
    expect(byDefault.token!.sso).toBe(true);
    expect(seconds(byDefault.token!.expiresAt)).toBeLessThanOrEqual(loginExpiry);
    const short = await session.createApiToken({ projectId: w.projectId, ttlSeconds: 60 });
    expect(seconds(short.token!.expiresAt) - seconds(short.token!.createdAt)).toBe(60);

    // A token made outside an SSO session keeps the lifetime asked for (it carries no SSO standing).
    const plain = await adminClient(server.baseUrl, w.adminToken).createApiToken({ projectId: w.projectId, ttlSeconds: YEAR_S });
    expect(plain.token!.sso).toBe(false);
    expect(seconds(plain.token!.expiresAt) - seconds(plain.token!.createdAt)).toBe(YEAR_S);
  });

  it("made before the rule, is bound at start to the SSO token that made it, or stops when none is left", async () => {
    const w = await createWorld(server);
    const hour = new Date(Date.now() + 3_600_000);
    // A longer SSO login of the admin, revoked before the API token was made: it made nothing.
    const revoked = await addAppToken(server, w.admin._id, { sso: true, expiresAt: new Date(Date.now() + 86_400_000) });
    await adminClient(server.baseUrl, w.ownerToken).revokeApplicationToken({ tokenId: revoked.id });
    // The admin's SSO login (an hour), then an SSO API token stored as before the rule (a day, no record of its session).
    await addAppToken(server, w.admin._id, { sso: true, expiresAt: hour });
    const bound = await addApiToken(server, w.admin._id, w.projectId, { sso: true });
    // Another admin's SSO API token whose SSO login is gone.
    const orphanAdmin = await addUser(server, w, "admin", { teamId: w.teamId });
    const orphan = await addApiToken(server, orphanAdmin._id, w.projectId, { sso: true });
    const logs = `/v1/project/${w.projectName}/admin-logs`;
    expect((await apiClient(server.baseUrl, orphan.plaintext).get(logs)).status).toBe(200);

    // The next start on the same database binds them.
    const next = await startServer({ dbName: server.dbName, env: { RUNHOOK_EXECUTOR: "false" } });
    try {
      const admin = adminClient(next.baseUrl, w.ownerToken);
      expect((await admin.getApiToken({ tokenId: bound.id })).token!.expiresAt).toEqual(
        expect.objectContaining({ seconds: BigInt(Math.floor(hour.getTime() / 1000)) }),
      );
      expect((await apiClient(next.baseUrl, bound.plaintext).get(logs)).status).toBe(200);
      expect((await apiClient(next.baseUrl, orphan.plaintext).get(logs)).status).toBe(401);
      expect((await apiClient(server.baseUrl, orphan.plaintext).get(logs)).status).toBe(401);
    } finally {
      await next.stop();
    }
  });
});

describe("a project that requires SSO, on AdminService", () => {
  it("refuses every call that touches the project from a token made outside an SSO session; organization calls are unchanged", async () => {
    const w = await createWorld(server, { requiresSso: true });
    // The token of an SSO login (a client is no promise's value: it answers every property).
    const sso = async (userId: string) => (await adminClient(server.baseUrl, BOOTSTRAP_SECRET).issueSsoToken({ userId })).plaintext;
    const calls = (c: ReturnType<typeof adminClient>) => ({
      getProject: () => c.getProject({ projectId: w.projectId }),
      listEnvironments: () => c.listEnvironments({ projectId: w.projectId }),
      listApiTokens: () => c.listApiTokens({ projectId: w.projectId }),
      getWebhook: () => c.getWebhook({ workflowId: w.workflowId }),
      listWorkflows: () => c.listWorkflows({ renderingId: w.renderingId }),
      listCollections: () => c.listCollections({ environmentId: w.environmentId }),
      listTeams: () => c.listTeams({ projectId: w.projectId }),
      createTeam: () => c.createTeam({ projectId: w.projectId, name: `t-${randomUUID().slice(0, 6)}` }),
      setProjectRole: () => c.setProjectRole({ projectId: w.projectId, userId: w.user._id, role: "user" }),
      publishWorkflow: () => c.publishWorkflow({ workflowId: w.workflowId, steps: [{ kind: { case: "loadRecord", value: {} } }] }),
      createApiToken: () => c.createApiToken({ projectId: w.projectId }),
    });
    const outcomes = async (c: ReturnType<typeof adminClient>) => {
      const out: Record<string, Code | "ok"> = {};
      for (const [name, call] of Object.entries(calls(c))) out[name] = await code(call());
      return out;
    };
    const all = (v: Code | "ok") => Object.fromEntries(Object.keys(calls(adminClient(server.baseUrl, ""))).map((k) => [k, v]));

    // The project's admin and the organization's owner, each with an ordinary token: denied everywhere.
    for (const token of [w.adminToken, w.ownerToken]) {
      const c = adminClient(server.baseUrl, token);
      expect(await outcomes(c)).toEqual(all(Code.PermissionDenied));
      const err = await c.listApiTokens({ projectId: w.projectId }).catch((e: unknown) => ConnectError.from(e));
      expect((err as ConnectError).rawMessage).toContain("requires a token generated in an SSO session");
      // Calls of the organization: as before.
      expect((await c.whoAmI({})).user?.id).toBeTruthy();
      expect((await c.listProjects({})).projects.map((p) => p.id)).toContain(w.projectId);
    }
    // The same people logged in with SSO: allowed.
    expect(await outcomes(adminClient(server.baseUrl, await sso(w.admin._id)))).toEqual(all("ok"));
    expect(await outcomes(adminClient(server.baseUrl, await sso(w.owner._id)))).toEqual(all("ok"));
    // Over /v1 too, with the same rule: 403.
    const denied = await apiClient(server.baseUrl, w.adminToken).get(`/v1/project/${w.projectName}/environment/${w.environmentName}/runs`);
    expect(denied.status).toBe(403);
  });
});
