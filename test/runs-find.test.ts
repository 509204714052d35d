// Finding runs and entries by what an operator knows: the run search by a record id alone (in
// every collection of the environment), by a workflow's name (resolved within the environment,
// to the workflows whose runs the caller sees), a workflow filter that cannot match refused in
// words, each run with its workflow's name; and the activity log's action filter checked
// against the actions runhook writes. Over /v1 and native gRPC, scans refused; another
// organization's records and names find nothing and are never named back. Executors off: the
// runs are stored as each case needs them.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ListActivityLogsRequestSchema, ListActivityLogsResponseSchema } from "../gen/runhook/v1/log_pb.js";
import { CreateRunBatchRequestSchema, CreateRunBatchResponseSchema, ListRunsRequestSchema, ListRunsResponseSchema } from "../gen/runhook/v1/run_pb.js";
import { RUNHOOK_ACTIVITY_ACTIONS } from "../src/lib/activity-actions.js";
import { finishedActiveKey, storeFixtures } from "../src/store/index.js";
import type { RunDoc, RunState } from "../src/store/types.js";
import { createWorld, worldRun, type World } from "../fixtures/world.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, grpcUnary } from "./helpers/webhook.js";

let server: TestServer;
let w: World;
let other: World;
/** The workflows of w's environment: the team's "test workflow" (w.workflowId), another team's of the same name, and "invoices" (admins only). */
let namesake: string;
let invoices: string;
const T0 = Date.parse("2025-04-01T10:00:00Z");
const runs: Record<string, RunDoc> = {};

function runDoc(
  world: World,
  o: { at: number; collection?: string; recordId: string; workflowId?: string; renderingId?: string; state?: RunState; error?: string },
) {
  const createdAt = new Date(T0 + o.at * 60_000);
  const doc = worldRun(world, o.recordId, [{ type: "load_record" }], {
    collection: o.collection ?? world.collection,
    workflowId: o.workflowId ?? world.workflowId,
    renderingId: o.renderingId ?? world.renderingId,
    createdAt,
  });
  const finishedAt = new Date(createdAt.getTime() + 1000);
  return { ...doc, state: o.state ?? "FAILED", error: o.error ?? "", finishedAt, activeKey: finishedActiveKey(doc._id, finishedAt) };
}

beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR: "false" } });
  w = await createWorld(server);
  other = await createWorld(server);
  const owner = adminClient(server.baseUrl, w.ownerToken);
  await owner.createCollection({ environmentId: w.environmentId, name: "customers", primaryKey: ["id"] });
  const sales = (await owner.createTeam({ projectId: w.projectId, name: "sales" })).team!;
  const salesRendering = (await owner.createRendering({ teamId: sales.id, environmentId: w.environmentId })).rendering!;
  const load = [{ kind: { case: "loadRecord" as const, value: {} } }];
  namesake = (await owner.createWorkflow({ renderingId: salesRendering.id, collectionId: w.collectionId, name: "test workflow", steps: load })).workflow!.id;
  invoices = (await owner.createWorkflow({ renderingId: w.renderingId, collectionId: w.collectionId, name: "invoices", steps: load, triggerRoles: ["admin"] }))
    .workflow!.id;
  // Another organization: a workflow whose name only it knows, and a run on a record id that w's environment has too.
  await adminClient(server.baseUrl, other.ownerToken).createWorkflow({
    renderingId: other.renderingId,
    collectionId: other.collectionId,
    name: "secret payroll",
    steps: load,
  });
  Object.assign(runs, {
    orders: runDoc(w, { at: 1, recordId: "shared", error: "record not found\nthe collection orders has no record shared" }),
    customers: runDoc(w, { at: 2, collection: "customers", recordId: "shared", state: "SUCCEEDED" }),
    elsewhere: runDoc(w, { at: 3, recordId: "another" }),
    namesake: runDoc(w, { at: 4, recordId: "shared", workflowId: namesake, renderingId: salesRendering.id }),
    invoices: runDoc(w, { at: 5, recordId: "shared", workflowId: invoices }),
    gone: runDoc(w, { at: 6, recordId: "gone", workflowId: randomUUID() }),
  });
  await storeFixtures(server.deps.store).insertRuns([...Object.values(runs), runDoc(other, { at: 2, recordId: "shared" })]);
});
afterAll(async () => {
  await server?.stop();
});

const runsPath = () => `/v1/project/${w.projectName}/environment/${w.environmentName}/runs`;
/** The ids of these runs of the fixture, newest first (the list's default order). */
const newestFirst = (...names: string[]) =>
  names
    .map((n) => runs[n]!)
    .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())
    .map((r) => r._id);

/** Every run a search finds over /v1, page after page (pages of one: the cursor carries the filter). */
async function found(token: string, params: Record<string, string>): Promise<string[]> {
  const api = apiClient(server.baseUrl, token);
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 20; page++) {
    const res = await api.get(runsPath() + qs({ ...params, limit: 1, cursor }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids.push(...res.body.runs.map((r: { id: string }) => r.id));
    if (!res.body.hasMore) return ids;
    cursor = res.body.nextCursor;
  }
  throw new Error("more than 20 pages");
}

/** ListRuns over native gRPC. */
const grpcList = (token: string, filter: Record<string, unknown>, world: World = w) =>
  grpcUnary(
    server.grpcAddr,
    "/runhook.v1.RunService/ListRuns",
    ListRunsRequestSchema,
    ListRunsResponseSchema,
    { projectName: world.projectName, environmentName: world.environmentName, options: { limit: 100 }, filter },
    token,
  );

describe("by record id alone", () => {
  it("finds the runs on the record in every collection of the environment, and only there", async () => {
    expect(await found(w.apiToken, { recordId: "shared" })).toEqual(newestFirst("orders", "customers", "namesake", "invoices"));
    expect(await found(w.apiToken, { recordId: "shared", order: "asc" })).toEqual(newestFirst("orders", "customers", "namesake", "invoices").reverse());
    expect(await found(w.apiToken, { recordId: "shared", collection: "customers" })).toEqual([runs.customers!._id]);
    expect(await found(w.apiToken, { recordId: "shared", state: "SUCCEEDED,CANCELLED" })).toEqual([runs.customers!._id]);
    expect(await found(w.apiToken, { recordId: "nowhere" })).toEqual([]);
    // Another organization's runs on a record of the same id stay in its own environment.
    const theirs = await grpcList(other.apiToken, { recordId: "shared" }, other);
    expect(theirs.value!.runs.map((r) => r.environmentId)).toEqual([other.environmentId]);
  });

  it("is served by the environment's record id index, not a walk of the whole environment", async () => {
    const plan = await storeFixtures(server.deps.store).explain({
      find: "runs",
      filter: { environmentId: w.environmentId, recordId: "shared" },
      sort: { createdAt: -1, _id: -1 },
      limit: 2,
    });
    expect(JSON.stringify(plan)).toContain('"indexName":"environmentId_1_recordId_1_createdAt_1__id_1"');
  });

  it("over native gRPC, as a user: the runs of the workflows it may trigger", async () => {
    const res = await grpcList(w.userToken, { recordId: "shared" });
    expect(res.error).toBeUndefined();
    expect(res.value!.runs.map((r) => r.id)).toEqual(newestFirst("orders", "customers"));
  });
});

describe("by workflow name", () => {
  it("finds the runs of every workflow of the environment with that exact name", async () => {
    expect(await found(w.apiToken, { workflowName: "test workflow" })).toEqual(newestFirst("orders", "customers", "elsewhere", "namesake"));
    expect(await found(w.adminToken, { workflowName: "invoices", recordId: "shared" })).toEqual([runs.invoices!._id]);
    // With an id too, both apply.
    expect(await found(w.apiToken, { workflowName: "test workflow", workflowId: namesake })).toEqual([runs.namesake!._id]);
    expect(await found(w.apiToken, { workflowName: "test workflow", workflowId: invoices })).toEqual([]);
  });

  it("as a user, among the workflows whose runs it sees: another team's namesake is left out, an unseen name refused as unknown", async () => {
    const res = await grpcList(w.userToken, { workflowName: "test workflow" });
    expect(res.value!.runs.map((r) => r.id)).toEqual(newestFirst("orders", "customers", "elsewhere"));
    const refused = await apiClient(server.baseUrl, w.userToken).get(runsPath() + qs({ workflowName: "invoices" }));
    expect([refused.status, refused.body.code]).toEqual([400, "invalid_argument"]);
    expect(refused.body.error).toBe('no workflow of this environment whose runs you see is named "invoices"');
  });

  it("a name of no workflow here (another organization's among them) is a 400 in words that names nothing else", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    for (const name of ["secret payroll", "test", "Test Workflow"]) {
      const res = await api.get(runsPath() + qs({ workflowName: name }));
      expect([res.status, res.body.code], name).toEqual([400, "invalid_argument"]);
      expect(res.body.error).toBe(`no workflow of this environment whose runs you see is named "${name}"`);
    }
    const grpc = await grpcList(w.apiToken, { workflowName: "secret payroll" });
    expect(grpc.error?.code).toBe(3);
    expect(grpc.error?.details).not.toMatch(/test workflow|invoices/);
  });

  it("a workflow id that is not a full id (the list's short prefix) is a 400 that points to the name", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    for (const id of [w.workflowId.slice(0, 8), "test workflow"]) {
      const res = await api.get(runsPath() + qs({ workflowId: id }));
      expect([res.status, res.body.code], id).toEqual([400, "invalid_argument"]);
      expect(res.body.error).toMatch(/workflowId must be a workflow's full id .* use workflowName/);
    }
    // A full id in capitals is the same id.
    expect(await found(w.apiToken, { workflowId: namesake.toUpperCase() })).toEqual([runs.namesake!._id]);
  });

  it("a cursor is bound to the name", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    const first = await api.get(runsPath() + qs({ workflowName: "test workflow", limit: 1 }));
    expect(first.body.hasMore).toBe(true);
    const moved = await api.get(runsPath() + qs({ workflowName: "invoices", limit: 1, cursor: first.body.nextCursor }));
    expect([moved.status, moved.body.error]).toEqual([400, expect.stringMatching(/cursor/)]);
  });

  it("a batch takes the name too, and refuses one of no workflow", async () => {
    const create = (filter: Record<string, unknown>) =>
      grpcUnary(
        server.grpcAddr,
        "/runhook.v1.RunService/CreateRunBatch",
        CreateRunBatchRequestSchema,
        CreateRunBatchResponseSchema,
        { projectName: w.projectName, environmentName: w.environmentName, action: "retry", dryRun: true, filter },
        w.adminToken,
      );
    const made = await create({ workflowName: "test workflow", recordId: "shared" });
    expect(made.error).toBeUndefined();
    expect(made.value!.batch!.filter).toMatchObject({ workflowName: "test workflow", recordId: "shared", collection: "" });
    expect((await create({ workflowName: "secret payroll" })).error?.code).toBe(3);
  });
});

describe("each run", () => {
  it("carries its workflow's name and version, as GetRun does; a run of a workflow that is gone, no name", async () => {
    const api = apiClient(server.baseUrl, w.apiToken);
    const page = await api.get(runsPath() + qs({ recordId: "shared", limit: 10 }));
    const byId = new Map(page.body.runs.map((r: { id: string }) => [r.id, r]));
    expect(byId.get(runs.orders!._id)).toMatchObject({ workflowName: "test workflow", workflowVersion: 1, error: runs.orders!.error });
    expect(byId.get(runs.invoices!._id)).toMatchObject({ workflowName: "invoices" });
    expect((await api.get(`/v1/runs/${runs.orders!._id}`)).body).toEqual(byId.get(runs.orders!._id));
    const gone = await api.get(runsPath() + qs({ recordId: "gone" }));
    expect(gone.body.runs).toHaveLength(1);
    expect(gone.body.runs[0].workflowName).toBe("");
  });
});

describe("the activity log's action filter", () => {
  const list = (filter: Record<string, unknown>) =>
    grpcUnary(
      server.grpcAddr,
      "/runhook.v1.LogService/ListActivityLogs",
      ListActivityLogsRequestSchema,
      ListActivityLogsResponseSchema,
      { projectName: w.projectName, environmentName: w.environmentName, filter },
      w.apiToken,
    );

  it("takes each action runhook writes, and refuses anything else in words naming them", async () => {
    for (const action of RUNHOOK_ACTIVITY_ACTIONS) expect((await list({ action })).error, action).toBeUndefined();
    expect((await list({ actions: ["workflow.run.failed", "note.created"] })).error).toBeUndefined();
    for (const filter of [{ action: "failed" }, { actions: ["workflow.run.failed", "workflow.published"] }]) {
      const refused = await list(filter);
      expect(refused.error?.code, JSON.stringify(filter)).toBe(3);
      // grpc-js leaves the commas of grpc-message percent-encoded.
      expect(decodeURIComponent(refused.error!.details)).toContain(`action must be one of ${RUNHOOK_ACTIVITY_ACTIONS.join(", ")}`);
    }
  });
});
