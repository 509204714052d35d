// SSO sessions and what they make: an SSO token made from an SSO token never outlives it (only a
// new SSO login, IssueSsoToken, starts a new lifetime); once a project requires SSO, its API
// tokens made outside an SSO session stop working on every path. Real server, real database.
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { GetRunRequestSchema, GetRunResponseSchema } from "../gen/runhook/v1/run_pb.js";
import { ListAdminLogsRequestSchema, ListAdminLogsResponseSchema } from "../gen/runhook/v1/log_pb.js";
import { addApiToken, createWorld, type World } from "../fixtures/world.js";
import { apiClient } from "./helpers/api.js";
import { BOOTSTRAP_SECRET, serverForFile } from "./helpers/server.js";
import { adminClient, code, grpcUnary, postHook } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });

const DAY_S = 86_400;
const seconds = (t: { seconds: bigint } | undefined) => Number(t!.seconds);

describe("an SSO token made from an SSO token", () => {
  it("never expires after the token that makes it; a new SSO login starts a new lifetime", async () => {
    const w = await createWorld(server);
    const operator = adminClient(server.baseUrl, BOOTSTRAP_SECRET);
    // The SSO login: an hour.
    const login = await operator.issueSsoToken({ userId: w.user._id, name: "sso login", ttlSeconds: 3600 });
    const loginExpiry = seconds(login.token!.expiresAt);
    const session = adminClient(server.baseUrl, login.plaintext);

    // A year asked for: refused, saying why.
    const err = await session.createApplicationToken({ sso: true, ttlSeconds: 365 * DAY_S }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    expect((err as ConnectError).rawMessage).toContain("may not outlive the SSO token that makes it");

    // The default lifetime (90 days) is cut to the session's.
    const byDefault = await session.createApplicationToken({ sso: true });
    expect(byDefault.token!.sso).toBe(true);
    expect(seconds(byDefault.token!.expiresAt)).toBeLessThanOrEqual(loginExpiry);

    // Shorter than the session: as asked.
    const short = await session.createApplicationToken({ sso: true, ttlSeconds: 600 });
    expect(seconds(short.token!.expiresAt) - seconds(short.token!.createdAt)).toBe(600);

    // Nor can a chain stretch it: a token made from the default one is bounded by the login too.
    const chained = adminClient(server.baseUrl, byDefault.plaintext);
    expect(await code(chained.createApplicationToken({ sso: true, ttlSeconds: 7200 }))).toBe(Code.FailedPrecondition);
    expect(seconds((await chained.createApplicationToken({ sso: true })).token!.expiresAt)).toBeLessThanOrEqual(loginExpiry);

    // A token that is not an SSO token keeps its own lifetime (it never passes for an SSO login).
    const plain = await session.createApplicationToken({ ttlSeconds: 365 * DAY_S });
    expect(plain.token!.sso).toBe(false);
    expect(seconds(plain.token!.expiresAt) - seconds(plain.token!.createdAt)).toBe(365 * DAY_S);

    // A new SSO login is not bounded by the earlier one.
    const again = await operator.issueSsoToken({ userId: w.user._id });
    expect(seconds(again.token!.expiresAt) - seconds(again.token!.createdAt)).toBe(90 * DAY_S);
  });
});

describe("API tokens of a project that comes to require SSO", () => {
  /** What an API token gets on each path that accepts one: /v1 logs and runs (HTTP status), and native gRPC (status code). */
  async function answers(w: World, token: string, runId: string) {
    const api = apiClient(server.baseUrl, token);
    const grpcCode = async (p: ReturnType<typeof grpcUnary>) => (await p).error?.code ?? 0;
    return {
      adminLogs: (await api.get(`/v1/project/${w.projectName}/admin-logs`)).status,
      activityLogs: (await api.get(`/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`)).status,
      run: (await api.get(`/v1/runs/${runId}`)).status,
      grpcAdminLogs: await grpcCode(
        grpcUnary(
          server.grpcAddr,
          "/runhook.v1.LogService/ListAdminLogs",
          ListAdminLogsRequestSchema,
          ListAdminLogsResponseSchema,
          { projectName: w.projectName },
          token,
        ),
      ),
      grpcRun: await grpcCode(grpcUnary(server.grpcAddr, "/runhook.v1.RunService/GetRun", GetRunRequestSchema, GetRunResponseSchema, { runId }, token)),
    };
  }
  const OK = { adminLogs: 200, activityLogs: 200, run: 200, grpcAdminLogs: 0, grpcRun: 0 };
  const DENIED = { adminLogs: 403, activityLogs: 403, run: 403, grpcAdminLogs: 7, grpcRun: 7 }; // 7: PERMISSION_DENIED

  it("stop working when requires_sso is switched on unless they were generated in an SSO session, on /v1 and gRPC alike", async () => {
    const w = await createWorld(server);
    const runId = (await postHook(server.baseUrl + w.hookPath, w.userToken, { record_id: "r1" })).body.runId!;
    const adminSso = adminClient(server.baseUrl, (await adminClient(server.baseUrl, BOOTSTRAP_SECRET).issueSsoToken({ userId: w.admin._id })).plaintext);
    // w.apiToken: made by the project admin's ordinary token; `legacy`: made before runhook recorded how.
    const legacy = (await addApiToken(server, w.admin._id, w.projectId)).plaintext;
    const fromSso = await adminSso.createApiToken({ projectId: w.projectId, name: "from sso" });
    expect(fromSso.token!.sso).toBe(true);
    for (const token of [w.apiToken, legacy, fromSso.plaintext]) expect(await answers(w, token, runId)).toEqual(OK);

    await adminSso.updateProject({ projectId: w.projectId, requiresSso: true });
    expect(await answers(w, w.apiToken, runId)).toEqual(DENIED);
    expect(await answers(w, legacy, runId)).toEqual(DENIED);
    expect(await answers(w, fromSso.plaintext, runId)).toEqual(OK);
    const refused = await apiClient(server.baseUrl, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs`);
    const why = expect.stringContaining("was not generated in an SSO session");
    expect(refused.body).toEqual({ code: "permission_denied", message: why, error: why });

    // Not requiring SSO any more, the project takes them again.
    await adminSso.updateProject({ projectId: w.projectId, requiresSso: false });
    expect(await answers(w, w.apiToken, runId)).toEqual(OK);
  });
});
