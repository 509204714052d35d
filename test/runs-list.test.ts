// The run search (RunService.ListRuns, GET /v1/project/{p}/environment/{e}/runs): who sees
// which runs, every filter alone and combined, both orders, the time ranges, and paging that
// yields every run exactly once while runs are inserted between pages. The executors are off:
// runs are stored in the states and at the times each case needs.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ListRunsRequestSchema, ListRunsResponseSchema } from "../gen/runhook/v1/run_pb.js";
import { finishedActiveKey, storeFixtures } from "../src/store/index.js";
import type { RunDoc, RunState } from "../src/store/types.js";
import { addAppToken, addUser, createWorld, worldRun, type World } from "../fixtures/world.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, grpcUnary } from "./helpers/webhook.js";

let server: TestServer;
let w: World;
let other: World;
/** Every run of the world's environment, as stored. */
const runs: RunDoc[] = [];
const WORKFLOW_B = randomUUID();
const T0 = Date.parse("2025-03-01T10:00:00Z");
const minutes = (n: number) => new Date(T0 + n * 60_000);

/** A run of `w` in `state`, created at `createdAt`, finished `runFor` ms later when finished. */
function runDoc(
  world: World,
  o: { state: RunState; createdAt: Date; recordId?: string; workflowId?: string; user?: World["user"]; via?: "webhook" | "grpc"; runFor?: number },
): RunDoc {
  const user = o.user ?? world.user;
  const doc = worldRun(world, o.recordId ?? "r1", [{ type: "load_record" }], {
    workflowId: o.workflowId ?? world.workflowId,
    userId: user._id,
    userEmail: user.email,
    via: o.via ?? "webhook",
    createdAt: o.createdAt,
  });
  const finished = ["SUCCEEDED", "FAILED", "CANCELLED"].includes(o.state);
  const finishedAt = finished ? new Date(o.createdAt.getTime() + (o.runFor ?? 1000)) : null;
  // A finished run frees its (workflow, record) slot.
  return { ...doc, state: o.state, finishedAt, activeKey: finishedAt ? finishedActiveKey(doc._id, finishedAt) : doc.activeKey };
}

const STATES: RunState[] = ["SUCCEEDED", "FAILED", "CANCELLED", "FAILED", "SUCCEEDED"];

beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR: "false" } });
  w = await createWorld(server);
  other = await createWorld(server);
  // 30 finished runs over 30 minutes (two of them at the same millisecond as a neighbour, so the
  // id decides their order), alternating workflows, records, users and vias; then one ongoing
  // run per (workflow, record) slot it may hold.
  for (let i = 0; i < 30; i++) {
    runs.push(
      runDoc(w, {
        state: STATES[i % STATES.length]!,
        createdAt: minutes(i === 7 || i === 20 ? i - 1 : i),
        recordId: `r${(i % 3) + 1}`,
        workflowId: i % 4 === 0 ? WORKFLOW_B : w.workflowId,
        user: i % 2 === 0 ? w.user : w.admin,
        via: i % 5 === 0 ? "grpc" : "webhook",
        runFor: i % 6 === 0 ? 2 * 3600_000 : 1000,
      }),
    );
  }
  runs.push(runDoc(w, { state: "QUEUED", createdAt: minutes(40), recordId: "r1" }));
  runs.push(runDoc(w, { state: "RUNNING", createdAt: minutes(41), recordId: "r2", user: w.admin }));
  await storeFixtures(server.deps.store).insertRuns(runs);
  // Runs of another project's environment, never listed here.
  await storeFixtures(server.deps.store).insertRuns([runDoc(other, { state: "FAILED", createdAt: minutes(5) })]);
});
afterAll(async () => {
  await server?.stop();
});

const path = (world: World = w) => `/v1/project/${world.projectName}/environment/${world.environmentName}/runs`;

/** The ids of `docs` in the list order. */
function ordered(docs: RunDoc[], order: "asc" | "desc" = "desc"): string[] {
  const sign = order === "asc" ? 1 : -1;
  return [...docs].sort((a, b) => sign * (a.createdAt.getTime() - b.createdAt.getTime() || (a._id < b._id ? -1 : 1))).map((r) => r._id);
}

/** Every page of a search, following nextCursor. */
async function all(token: string, params: Record<string, string | number>): Promise<string[]> {
  const api = apiClient(server.baseUrl, token);
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const res = await api.get(path() + qs({ ...params, cursor }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids.push(...res.body.runs.map((r: { id: string }) => r.id));
    if (!res.body.hasMore) return ids;
    cursor = res.body.nextCursor;
  }
  throw new Error("more than 100 pages");
}

describe("filters and order", () => {
  const cases: [string, Record<string, string>, (r: RunDoc) => boolean][] = [
    ["no filter", {}, () => true],
    ["workflowId", { workflowId: WORKFLOW_B }, (r) => r.workflowId === WORKFLOW_B],
    ["collection", { collection: "orders" }, () => true],
    ["collection + recordId", { collection: "orders", recordId: "r2" }, (r) => r.recordId === "r2"],
    ["recordId alone", { recordId: "r2" }, (r) => r.recordId === "r2"],
    ["workflowName", { workflowName: "test workflow" }, (r) => r.workflowId === w.workflowId],
    ["one state", { state: "FAILED" }, (r) => r.state === "FAILED"],
    ["several states", { state: "FAILED,CANCELLED,QUEUED" }, (r) => ["FAILED", "CANCELLED", "QUEUED"].includes(r.state)],
    ["via", { via: "grpc" }, (r) => r.via === "grpc"],
    ["userId", { userId: "ADMIN" }, (r) => r.userId === w.admin._id],
    ["created range", { from: minutes(10).toISOString(), to: minutes(20).toISOString() }, (r) => r.createdAt >= minutes(10) && r.createdAt < minutes(20)],
    [
      "finished range",
      { finishedFrom: minutes(60).toISOString(), finishedTo: minutes(200).toISOString() },
      (r) => r.finishedAt !== null && r.finishedAt >= minutes(60) && r.finishedAt < minutes(200),
    ],
    ["failed runs of one record", { state: "FAILED", collection: "orders", recordId: "r1" }, (r) => r.state === "FAILED" && r.recordId === "r1"],
    [
      "workflow + states + via + user + created range",
      { workflowId: "WORKFLOW_A", state: "SUCCEEDED,FAILED", via: "webhook", userId: "USER", from: minutes(3).toISOString() },
      (r) =>
        r.workflowId === w.workflowId &&
        ["SUCCEEDED", "FAILED"].includes(r.state) &&
        r.via === "webhook" &&
        r.userId === w.user._id &&
        r.createdAt >= minutes(3),
    ],
    [
      "state + finished range",
      { state: "FAILED", finishedFrom: minutes(0).toISOString(), finishedTo: minutes(25).toISOString() },
      (r) => r.state === "FAILED" && r.finishedAt !== null && r.finishedAt < minutes(25),
    ],
  ];
  const resolve = (p: Record<string, string>) =>
    Object.fromEntries(Object.entries(p).map(([k, v]) => [k, { ADMIN: w.admin._id, USER: w.user._id, WORKFLOW_A: w.workflowId }[v] ?? v]));

  for (const [name, params, match] of cases) {
    it(`${name}: newest first by default, oldest first with order=asc, across pages of 4`, async () => {
      const expected = runs.filter(match);
      expect(expected.length, "the case selects something").toBeGreaterThan(0);
      expect(await all(w.apiToken, { ...resolve(params), limit: 4 })).toEqual(ordered(expected));
      expect(await all(w.apiToken, { ...resolve(params), limit: 4, order: "asc" })).toEqual(ordered(expected, "asc"));
    });
  }

  it("each run carries what GET /v1/runs/{runId} answers", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    const page = await api.get(path() + qs({ limit: 1 }));
    const [first] = page.body.runs;
    expect(first.id).toBe(ordered(runs)[0]);
    expect((await api.get(`/v1/runs/${first.id}`)).body).toEqual(first);
  });

  it("answers nextCursor always with asc, and not on the last desc page", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    const desc = await api.get(path() + qs({ limit: 1000 }));
    expect(desc.body.hasMore).toBe(false);
    expect(desc.body.nextCursor).toBeUndefined();
    const asc = await api.get(path() + qs({ limit: 1000, order: "asc" }));
    expect(asc.body.hasMore).toBe(false);
    expect(typeof asc.body.nextCursor).toBe("string");
    // Caught up: nothing new after it.
    expect((await api.get(path() + qs({ limit: 1000, order: "asc", cursor: asc.body.nextCursor }))).body.runs).toEqual([]);
  });

  it("refuses bad parameters with 400 naming them", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    for (const [params, message] of [
      [{ state: "BROKEN" }, /state/],
      [{ workflowId: "b7633e71" }, /workflowId must be a workflow's full id/],
      [{ workflowName: "no such workflow" }, /no workflow of this environment whose runs you see is named "no such workflow"/],
      [{ via: "fax" }, /via/],
      [{ finishedFrom: "yesterday" }, /finishedFrom/],
      [{ order: "up" }, /order/],
      [{ limit: "0" }, /limit/],
      [{ statee: "FAILED" }, /unknown query parameter/],
      [{ cursor: "not-a-cursor" }, /cursor/],
    ] as const) {
      const res = await api.get(path() + qs(params));
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(res.body.code).toBe("invalid_argument");
      expect(res.body.error).toMatch(message);
    }
  });
});

describe("paging", () => {
  it("yields every run exactly once while runs are inserted between pages, in either order", async () => {
    const before = ordered(runs);
    for (const order of ["desc", "asc"] as const) {
      const api = apiClient(server.baseUrl, w.apiToken);
      const seen: string[] = [];
      let cursor: string | undefined;
      let inserted = 0;
      for (;;) {
        const res = await api.get(path() + qs({ limit: 5, order, cursor }));
        expect(res.status).toBe(200);
        seen.push(...res.body.runs.map((r: { id: string }) => r.id));
        // New runs arrive meanwhile: one now, one at the time of the page's last run (its id decides).
        const last = runs.find((r) => r._id === seen[seen.length - 1]);
        const fresh = [runDoc(w, { state: "FAILED", createdAt: new Date() })];
        if (last) fresh.push(runDoc(w, { state: "SUCCEEDED", createdAt: last.createdAt }));
        await storeFixtures(server.deps.store).insertRuns(fresh);
        inserted += fresh.length;
        if (!res.body.hasMore) break;
        cursor = res.body.nextCursor;
      }
      expect(new Set(seen).size, "no run twice").toBe(seen.length);
      const old = seen.filter((id) => before.includes(id));
      expect(old).toEqual(order === "desc" ? before : [...before].reverse());
      expect(inserted).toBeGreaterThan(5);
    }
  });

  it("refuses a cursor of another query (filters, order, time range, environment) with 400", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    const first = await api.get(path() + qs({ limit: 2, state: "FAILED" }));
    const cursor = first.body.nextCursor as string;
    expect(first.body.hasMore).toBe(true);
    expect((await api.get(path() + qs({ limit: 2, state: "FAILED", cursor }))).status).toBe(200);
    for (const params of [
      { state: "CANCELLED" },
      { state: "FAILED", order: "asc" },
      { state: "FAILED", from: minutes(1).toISOString() },
      { state: "FAILED", via: "grpc" },
    ]) {
      const res = await api.get(path() + qs({ ...params, cursor }));
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(res.body.error).toMatch(/cursor/);
    }
    // Another project's token cannot carry it over either: its own environment binds it.
    const res = await apiClient(server.baseUrl, other.apiToken).get(path(other) + qs({ state: "FAILED", cursor }));
    expect(res.status).toBe(400);
    // A cursor of another list (notes) is not a run cursor.
    const notes = await api.get(`/v1/project/${w.projectName}/environment/${w.environmentName}/notes?order=asc`);
    expect(notes.body.nextCursor).toBeTypeOf("string");
    expect((await api.get(path() + qs({ cursor: notes.body.nextCursor }))).status).toBe(400);
  });
});

describe("scope", () => {
  const ids = (body: { runs: { id: string }[] }) => body.runs.map((r) => r.id);
  /** The runs a user with no admin role sees: those of the workflows it may trigger (not WORKFLOW_B, which does not exist). */
  const ofItsWorkflows = (filter: (r: RunDoc) => boolean = () => true) => ordered(runs.filter((r) => r.workflowId === w.workflowId && filter(r)));

  it("a project API token sees every run of its environment; another project's token is 403, an unknown environment 404", async () => {
    const listed = await all(w.apiToken, { limit: 1000 });
    expect(listed.filter((id) => runs.some((r) => r._id === id))).toEqual(ordered(runs));
    const foreign = await apiClient(server.baseUrl, other.apiToken).get(path());
    expect(foreign.status).toBe(403);
    expect(foreign.body.code).toBe("permission_denied");
    expect((await apiClient(server.baseUrl, w.apiToken).get(`/v1/project/${w.projectName}/environment/nowhere/runs`)).status).toBe(404);
    expect((await apiClient(server.baseUrl).get(path())).status).toBe(401);
  });

  it("an organization API token is 403", async () => {
    const orgToken = (await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "runs" })).plaintext;
    expect((await apiClient(server.baseUrl, orgToken).get(path())).status).toBe(403);
  });

  it("application tokens: an admin sees every run, a user those of the workflows it may trigger; no role or another organization are 403", async () => {
    const admin = apiClient(server.baseUrl, w.adminToken);
    const user = apiClient(server.baseUrl, w.userToken);
    const adminAll = await admin.get(path() + qs({ limit: 1000 }));
    expect(adminAll.status).toBe(200);
    expect(ids(adminAll.body).filter((id) => runs.some((r) => r._id === id))).toEqual(ordered(runs));
    // The organization's owner (an organization admin) too.
    expect((await apiClient(server.baseUrl, w.ownerToken).get(path() + qs({ limit: 1 }))).status).toBe(200);

    const seen = await user.get(path() + qs({ limit: 1000 }));
    expect(seen.status).toBe(200);
    expect(ids(seen.body).filter((id) => runs.some((r) => r._id === id))).toEqual(ofItsWorkflows());
    expect((await user.get(path() + qs({ userId: w.user._id, state: "FAILED" }))).body.runs.length).toBeGreaterThan(0);
    // Another user's runs of those workflows too.
    const theirs = await user.get(path() + qs({ userId: w.admin._id, limit: 1000 }));
    expect(theirs.status).toBe(200);
    expect(ids(theirs.body).filter((id) => runs.some((r) => r._id === id))).toEqual(ofItsWorkflows((r) => r.userId === w.admin._id));

    const noRole = await addUser(server, w, null);
    const noRoleToken = await addAppToken(server, noRole._id);
    expect((await apiClient(server.baseUrl, noRoleToken.plaintext).get(path())).status).toBe(403);
    expect((await apiClient(server.baseUrl, other.userToken).get(path())).status).toBe(403);
    // A project name that does not exist in the user's organization: 403 as well.
    expect((await user.get(`/v1/project/nope-${randomUUID()}/environment/${w.environmentName}/runs`)).status).toBe(403);
  });

  it("over native gRPC: the same rule and the same runs", async () => {
    const call = (token: string, filter: Record<string, unknown> = {}) =>
      grpcUnary(
        server.grpcAddr,
        "/runhook.v1.RunService/ListRuns",
        ListRunsRequestSchema,
        ListRunsResponseSchema,
        { projectName: w.projectName, environmentName: w.environmentName, options: { limit: 1000 }, filter },
        token,
      );
    const admin = await call(w.adminToken, { states: ["FAILED"] });
    expect(admin.value!.runs.map((r) => r.id).filter((id) => runs.some((r) => r._id === id))).toEqual(ordered(runs.filter((r) => r.state === "FAILED")));
    const user = await call(w.userToken);
    expect(user.value!.runs.map((r) => r.id).filter((id) => runs.some((r) => r._id === id))).toEqual(
      ordered(runs.filter((r) => r.workflowId === w.workflowId)),
    );
    expect((await call(w.userToken, { workflowId: WORKFLOW_B })).value!.runs).toEqual([]);
    expect((await call(other.apiToken)).error?.code).toBe(7);
    const viaApi = await call(w.apiToken, { collection: "orders", recordId: "r3" });
    expect(viaApi.value!.runs.map((r) => r.id).filter((id) => runs.some((r) => r._id === id))).toEqual(ordered(runs.filter((r) => r.recordId === "r3")));
  });
});
