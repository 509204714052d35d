// Access across tenants (issue #12): a project API token never reads or changes another
// project's logs, notes or runs, whatever ids or path spellings it tries; an application
// token cannot use the public API; every spelling of a /v1 route is authenticated and
// counted by the per-token rate limit. Real server and database; raw sockets where fetch
// would normalise the path.
import { randomUUID } from "node:crypto";
import { storeFixtures, type StoreFixtures } from "../src/store/index.js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { apiClient } from "./helpers/api.js";
import { rawHttp, rawRequest } from "./helpers/raw.js";
import { queueRun } from "./helpers/runs.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, awaitFreshWindow } from "./helpers/webhook.js";
import { addApiToken, addEnvironment, createWorld, type World } from "../fixtures/world.js";
import { errorBody } from "../src/rpc/errors.js";

let server: TestServer;
let db: StoreFixtures;
/** The caller's project, and the other project it must never reach. */
let a: World;
let b: World;
/** B's note, by its /v1 id (its number: unique across every project). */
let bNoteId: number;
let bRunId: string;

const envPath = (w: World, env = w.environmentName) => `/v1/project/${w.projectName}/environment/${env}`;
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR: "false" } });
  db = storeFixtures(server.deps.store);
  a = await createWorld(server);
  b = await createWorld(server);
  await addEnvironment(server, b, "b-only");
  // B's data: a note (and its activity entry), an ongoing run, an admin log entry.
  const note = await apiClient(server.gateway, b.apiToken).post(`${envPath(b)}/notes`, {
    collection: b.collection,
    recordId: "r1",
    title: "B only",
    content: "<p>secret of B</p>",
  });
  expect(note.status).toBe(201);
  bNoteId = note.body.id;
  bRunId = (await queueRun(server.deps.store, b, "r1"))._id;
  await adminClient(server.baseUrl, b.adminToken).setWebhookRateLimit({ workflowId: b.workflowId, rateLimitPerMinute: 7 });
  // A has data of its own, so that "empty" is not the only possible answer.
  expect((await apiClient(server.gateway, a.apiToken).post(`${envPath(a)}/notes`, { collection: a.collection, recordId: "r1", content: "a" })).status).toBe(
    201,
  );
});
afterAll(async () => {
  await server?.stop();
});

/** Status and body, for comparing two answers. */
async function answer(method: string, path: string, token: string, body?: unknown) {
  const r = await apiClient(server.gateway, token).call(method, path, body === undefined ? {} : { body });
  return { status: r.status, body: r.body as unknown };
}

describe("logs of another project", () => {
  it("are 403 on the other project's paths, exactly like a project that does not exist", async () => {
    for (const list of ["activity-logs", "notes"]) {
      const other = await answer("GET", `${envPath(b)}/${list}`, a.apiToken);
      expect(other).toEqual({ status: 403, body: errorBody("permission_denied", "the token does not belong to this project") });
      expect(await answer("GET", `/v1/project/no-such-project-${randomUUID()}/environment/production/${list}`, a.apiToken)).toEqual(other);
    }
    const admin = await answer("GET", `/v1/project/${b.projectName}/admin-logs`, a.apiToken);
    expect(admin.status).toBe(403);
    expect(await answer("GET", `/v1/project/no-such-project/admin-logs`, a.apiToken)).toEqual(admin);
    // NDJSON export too.
    const ndjson = await fetch(`${server.baseUrl}${envPath(b)}/activity-logs`, { headers: { ...auth(a.apiToken), accept: "application/x-ndjson" } });
    expect(ndjson.status).toBe(403);
  });

  it("an environment of another project is 404 under the token's project, like one that does not exist", async () => {
    const other = await answer("GET", `${envPath(a, "b-only")}/activity-logs`, a.apiToken);
    const none = await answer("GET", `${envPath(a, "nope")}/activity-logs`, a.apiToken);
    expect(other.status).toBe(404);
    expect(none.status).toBe(404);
    expect(other.body).toMatchObject({ code: "not_found" });
    expect(none.body).toMatchObject({ code: "not_found" });
  });

  it("the token's own lists never contain another project's entries, whatever the filters or cursor", async () => {
    const api = apiClient(server.gateway, a.apiToken);
    // /v1 items name users by email and per-organization number, runs by id: B's show its users' emails or its run.
    const ofB = new RegExp([b.owner.email, b.admin.email, b.user.email, bRunId, "B only", "secret of B"].map((x) => x.replace(/[.+]/g, "\\$&")).join("|"));
    const aEmails = [a.owner.email, a.admin.email, a.user.email];
    const onlyA = (items: { user?: { email: string } }[], what: string) => {
      expect(JSON.stringify(items), what).not.toMatch(ofB);
      for (const item of items) if (item.user) expect(aEmails, what).toContain(item.user.email);
    };
    // B's user numbers are resolved in A's organization (they may name A's users, never B's).
    const bAdminNumber = (await db.users.findOne({ _id: b.admin._id }))!.number!;
    for (const [q, empty] of [
      [`runId=${bRunId}`, true],
      [`userEmail=${encodeURIComponent(b.admin.email)}`, true],
      [`action=createNote&userEmail=${encodeURIComponent(b.admin.email)}`, true],
      [`recordId=r1&collectionName=${b.collection}`, false],
      [`userId=${bAdminNumber}`, false],
      [`teamName=${encodeURIComponent("(no team)")}&limit=100`, false],
      ["order=asc&limit=100", false],
    ] as const) {
      const r = await api.get(`${envPath(a)}/activity-logs?${q}`);
      expect(r.status, q).toBe(200);
      onlyA(r.body.data, q);
      if (empty) expect(r.body.data, q).toEqual([]);
    }
    const all = await api.get(`${envPath(a)}/activity-logs?limit=100`);
    expect(all.body.data.length).toBeGreaterThan(0);
    onlyA(all.body.data, "all");
    const admin = await api.get(`/v1/project/${a.projectName}/admin-logs?limit=100&userEmail=${encodeURIComponent(b.admin.email)}`);
    expect(admin.status).toBe(200);
    expect(admin.body.data).toEqual([]);
    const adminByNumber = await api.get(`/v1/project/${a.projectName}/admin-logs?limit=100&userId=${bAdminNumber}`);
    expect(adminByNumber.status).toBe(200);
    onlyA(adminByNumber.body.data, "admin-logs by number");
    onlyA((await api.get(`/v1/project/${a.projectName}/admin-logs?limit=100`)).body.data, "admin-logs");
    const exported = await (
      await fetch(`${server.baseUrl}${envPath(a)}/activity-logs`, { headers: { ...auth(a.apiToken), accept: "application/x-ndjson" } })
    ).text();
    expect(exported.length).toBeGreaterThan(0);
    expect(exported).not.toMatch(ofB);
    // A cursor issued to B is bound to B's environment: 400, never B's entries (B's own path takes it).
    const bPage = await apiClient(server.gateway, b.apiToken).get(`${envPath(b)}/activity-logs?limit=1&order=asc`);
    expect(bPage.body.nextCursor).toBeTypeOf("string");
    expect((await apiClient(server.gateway, b.apiToken).get(`${envPath(b)}/activity-logs?limit=1&order=asc&cursor=${bPage.body.nextCursor}`)).status).toBe(200);
    const withB = await api.get(`${envPath(a)}/activity-logs?limit=1&order=asc&cursor=${bPage.body.nextCursor}`);
    expect(withB.status).toBe(400);
    expect(withB.body).toMatchObject({ code: "invalid_argument" });
  });
});

describe("notes of another project", () => {
  it("are 404 under the token's project and 403 under theirs — exactly as a note that does not exist — and never change", async () => {
    // Note ids are numbers, unique across projects: one no note has.
    const unknown = bNoteId + 1_000_000;
    const ops: [string, string, unknown?][] = [
      ["GET", ""],
      ["PATCH", "", { title: "taken", archived: true }],
      ["POST", "/messages", { content: "<p>injected</p>" }],
      ["DELETE", ""],
    ];
    for (const [method, suffix, body] of ops) {
      const own = await answer(method, `${envPath(a)}/notes/${bNoteId}${suffix}`, a.apiToken, body);
      expect(own, `${method} ${suffix}`).toEqual({ status: 404, body: errorBody("not_found", "unknown note") });
      expect(await answer(method, `${envPath(a)}/notes/${unknown}${suffix}`, a.apiToken, body)).toEqual(own);
      const theirs = await answer(method, `${envPath(b)}/notes/${bNoteId}${suffix}`, a.apiToken, body);
      expect(theirs.status, `${method} ${suffix}`).toBe(403);
      expect(await answer(method, `${envPath(b)}/notes/${unknown}${suffix}`, a.apiToken, body)).toEqual(theirs);
    }
    // B's note's UUID (the id gRPC gives it) is no /v1 id: 404 under A's path too.
    const bNote = await db.notes.findOne({ seq: bNoteId });
    expect(await answer("GET", `${envPath(a)}/notes/${bNote!._id}`, a.apiToken)).toEqual({ status: 404, body: errorBody("not_found", "unknown note") });
    for (const q of [`recordId=r1&collectionName=${b.collection}`, `userEmail=${encodeURIComponent(b.admin.email)}`, "order=asc&limit=100"]) {
      const listed = await apiClient(server.gateway, a.apiToken).get(`${envPath(a)}/notes?${q}`);
      expect(listed.status, q).toBe(200);
      expect(
        listed.body.data.map((n: { id: number }) => n.id),
        q,
      ).not.toContain(bNoteId);
      expect(JSON.stringify(listed.body.data), q).not.toMatch(/secret of B|B only/);
      expect(JSON.stringify(listed.body.data), q).not.toContain(b.admin.email);
    }
    expect((await apiClient(server.gateway, a.apiToken).get(`${envPath(a)}/notes?userEmail=${encodeURIComponent(b.admin.email)}`)).body.data).toEqual([]);
    const note = await db.notes.findOne({ seq: bNoteId });
    expect(note).toMatchObject({ title: "B only", archivedAt: null });
    expect(note!.messages).toHaveLength(1);
    expect((await apiClient(server.gateway, b.apiToken).get(`${envPath(b)}/notes/${bNoteId}`)).status).toBe(200);
  });
});

describe("runs of another project", () => {
  it("a project API token never reads or cancels another project's run", async () => {
    // Another organization's run is as unknown as a missing one: the same 404, no id in it.
    const other = await answer("GET", `/v1/runs/${bRunId}`, a.apiToken);
    expect(other).toEqual({ status: 404, body: errorBody("not_found", "run not found") });
    expect(await answer("GET", `/v1/runs/${bRunId}?wait=30s`, a.apiToken)).toEqual(other);
    expect(await answer("GET", `/v1/runs/${randomUUID()}`, a.apiToken)).toEqual(other);
    // Cancelling takes an application token: an API token is 403 for any id, known or not.
    const cancel = await answer("POST", `/v1/runs/${bRunId}/cancel`, a.apiToken);
    expect(cancel.status).toBe(403);
    expect(await answer("POST", `/v1/runs/${randomUUID()}/cancel`, a.apiToken)).toEqual(cancel);
    // A's users may not cancel B's run either: to them it does not exist.
    expect(await answer("POST", `/v1/runs/${bRunId}/cancel`, a.adminToken)).toEqual(other);
    expect((await db.runs.findOne({ _id: bRunId }))!.state).toBe("QUEUED");

    // The same over Connect.
    const runs = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const err = await runs.getRun({ runId: bRunId }, { headers: auth(a.apiToken) }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.NotFound);
    const logs = createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const lerr = await logs
      .listActivityLogs({ projectName: b.projectName, environmentName: b.environmentName }, { headers: auth(a.apiToken) })
      .catch((e: unknown) => ConnectError.from(e));
    expect((lerr as ConnectError).code).toBe(Code.PermissionDenied);
  });
});

describe("application tokens and the public API", () => {
  it("an application token cannot read or write the public API: 401", async () => {
    for (const token of [a.userToken, a.adminToken]) {
      for (const [method, path, body] of [
        ["GET", `${envPath(a)}/activity-logs`],
        ["GET", `/v1/project/${a.projectName}/admin-logs`],
        ["GET", `${envPath(a)}/notes`],
        ["POST", `${envPath(a)}/notes`, { collection: a.collection, recordId: "r1", content: "x" }],
      ] as [string, string, unknown?][]) {
        expect(await answer(method, path, token, body), `${method} ${path}`).toEqual({
          status: 401,
          body: errorBody("unauthenticated", "missing, expired or invalid bearer token"),
        });
      }
    }
    const logs = createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const err = await logs.listAdminLogs({ projectName: a.projectName }, { headers: auth(a.adminToken) }).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });
});

/** Spellings of A's admin-logs route that Fastify routes to the same handler. */
const routedSpellings = (w: World) => [
  `/v1/project/${w.projectName}/admin-logs`,
  `/v1/project/${w.projectName}/admin-logs/`,
  `/v1/project/%70${w.projectName.slice(1)}/admin-logs`,
  `/v1/project/${w.projectName}/admin%2Dlogs`,
  `/%761/project/${w.projectName}/admin-logs`,
  `/%76%31/project/${w.projectName}/admin-logs`,
  `http://runhook.test/v1/project/${w.projectName}/admin-logs`,
  `http://runhook.test/%761/project/${w.projectName}/admin-logs?limit=1`,
];

describe("path spellings", () => {
  const get = (target: string, headers: Record<string, string> = {}) => rawHttp(server.baseUrl, rawRequest("GET", target, headers));

  it("every spelling that reaches a /v1 handler is authenticated and rate-limited like the plain path", async () => {
    for (const target of routedSpellings(a)) {
      const ok = await get(target, auth(a.apiToken));
      expect(ok.status, target).toBe(200);
      expect(ok.headers["x-ratelimit-remaining"], target).toMatch(/^\d+$/);
      const none = await get(target);
      expect(none.status, target).toBe(401);
      expect(JSON.parse(none.body)).toMatchObject({ code: "unauthenticated" });
      expect(none.headers["x-ratelimit-limit"], target).toBeDefined();
      const other = await get(target, auth(b.apiToken));
      expect(other.status, target).toBe(403);
      expect(other.headers["x-ratelimit-remaining"], target).toMatch(/^\d+$/);
    }
    // Spelled as B's project by percent-encoding: still B's project.
    expect((await get(`/v1/project/%70${b.projectName.slice(1)}/admin-logs`, auth(a.apiToken))).status).toBe(403);
    expect((await get(`/%761/runs/${bRunId}`, auth(a.apiToken))).status).toBe(404);
    expect((await get(`/v1/project/%70${a.projectName.slice(1)}/environment/production/notes/${bNoteId}`, auth(a.apiToken))).status).toBe(404);
  });

  it("spellings the router does not match reach no handler: 404, never data", async () => {
    for (const target of [
      `/V1/project/${a.projectName}/admin-logs`,
      `//v1/project/${a.projectName}/admin-logs`,
      `/v1//project/${a.projectName}/admin-logs`,
      `/v1/./project/${a.projectName}/admin-logs`,
      `/v1/x/../project/${a.projectName}/admin-logs`,
      `/v1%2Fproject/${a.projectName}/admin-logs`,
      `/v1;x/project/${a.projectName}/admin-logs`,
    ]) {
      const r = await get(target, auth(a.apiToken));
      expect(r.status, target).toBe(404);
      expect(JSON.parse(r.body), target).toMatchObject({ code: "not_found" });
    }
  });

  it("the per-token rate limit counts every spelling, 404s under /v1 included", async () => {
    const limited = await startServer({ dbName: server.dbName, env: { RUNHOOK_API_RATE_LIMIT: "10", RUNHOOK_EXECUTOR: "false" } });
    try {
      const token = (await addApiToken(server, a.admin._id, a.projectId)).plaintext;
      await awaitFreshWindow(20_000);
      const targets = [...routedSpellings(a), `/%761/runs/${bRunId}`, `/%761/nothing`];
      const remaining: number[] = [];
      for (const target of targets) {
        const r = await rawHttp(limited.baseUrl, rawRequest("GET", target, auth(token)));
        expect(r.status, target).not.toBe(429);
        remaining.push(Number(r.headers["x-ratelimit-remaining"]));
      }
      expect(remaining).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
      for (const target of targets) {
        const r = await rawHttp(limited.baseUrl, rawRequest("GET", target, auth(token)));
        expect(r.status, target).toBe(429);
        expect(r.headers["retry-after"], target).toMatch(/^\d+$/);
        expect(JSON.parse(r.body)).toMatchObject({ code: "resource_exhausted" });
      }
    } finally {
      await limited.stop();
    }
  });
});
