// Every query runhook makes is served by an index: a workload of the public API (webhook calls
// and their runs, a conflict, an idempotent repeat, run reads, the run search with each filter
// (a record id alone, a workflow's name),
// the published log lists with each filter (time bounds, teams, user numbers, actions that name
// several of runhook's), notes by number and with each filter, the numbering of users at start,
// a retention sweep, a failed authentication whose count is shared, run batches worked through,
// listed and cancelled, the entries of runs' changes found pending) is run while the
// driver's commands are recorded, and each distinct query among them is explained by the
// server: the plan must be an index scan, never a collection scan. On the embedded server the
// suite also runs with scans refused
// (notablescan); on a real MongoDB (MONGODB_URI) this is the check that its planner agrees.
// The same workload checks that every query of a data step carries its time limit (maxTimeMS).
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { storeFixtures, sweepExpired, type CommandStartedEvent, type StoreFixtures } from "../src/store/index.js";
import { apiClient, qs } from "./helpers/api.js";
import { DATA_QUERY_TIME_LIMIT_MS } from "../src/store/records.js";
import { RUN_SEARCH_TIME_LIMIT_MS } from "../src/store/run-search.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, postHook, sleep } from "./helpers/webhook.js";
import { waitForRun } from "./helpers/runs.js";
import { createWorld, type World } from "../fixtures/world.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { bindUnboundSsoApiTokens } from "../src/domain/auth/sso-tokens.js";
import { sweepPendingEntries } from "../src/domain/runs/activity.js";
import { numberUnnumberedUsers } from "../src/domain/auth/user-numbers.js";

let server: TestServer;
let fx: StoreFixtures;
let w: World;

beforeAll(async () => {
  server = await startServer();
  fx = storeFixtures(server.deps.store);
  w = await createWorld(server, {
    steps: [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }, { type: "add_note", title: "", content: "done" }],
  });
});
afterAll(async () => {
  await server?.stop();
});

/** The /v1 ids (numbers) of the world's user and owner. */
async function userNumbers(): Promise<{ userNumber: number; ownerNumber: number }> {
  const numberOf = async (id: string) => (await fx.users.findOne({ _id: id }))!.number!;
  return { userNumber: await numberOf(w.user._id), ownerNumber: await numberOf(w.owner._id) };
}

/** The commands that read or select documents, and where their filter and sort are. */
const QUERIES: Record<string, (c: Record<string, unknown>) => { filter: unknown; sort?: unknown }[]> = {
  find: (c) => [{ filter: c.filter, sort: c.sort }],
  findAndModify: (c) => [{ filter: c.query, sort: c.sort }],
  count: (c) => [{ filter: c.query }],
  distinct: (c) => [{ filter: c.query }],
  aggregate: (c) => [{ filter: (c.pipeline as Record<string, unknown>[])[0]?.$match }],
  update: (c) => (c.updates as { q: unknown }[]).map((u) => ({ filter: u.q })),
  delete: (c) => (c.deletes as { q: unknown }[]).map((u) => ({ filter: u.q })),
};

/** A query's shape: the command, the collection, the filter's fields and operators (not values), the sort. */
function shape(name: string, records: boolean, collection: string, q: { filter: unknown; sort?: unknown }): string {
  const fields = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(fields)
      : v && typeof v === "object" && !(v instanceof Date)
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k.startsWith("$") || typeof x === "object" ? fields(x) : 1]))
        : 1;
  return `${name} ${records ? "<records>" : collection} ${JSON.stringify(fields(q.filter))} ${JSON.stringify(q.sort ?? {})}`;
}

/** Every stage name of a plan (MongoDB 7+ nests the plan under queryPlan). */
function stages(node: unknown, out: string[] = []): string[] {
  if (!node || typeof node !== "object") return out;
  const n = node as Record<string, unknown>;
  if (typeof n.stage === "string") out.push(n.stage);
  for (const key of ["inputStage", "queryPlan", "winningPlan"]) stages(n[key], out);
  for (const child of (n.inputStages as unknown[]) ?? []) stages(child, out);
  return out;
}

it("every query the store made in a workload is an index scan", async () => {
  const recorded: CommandStartedEvent[] = [];
  const events = fx.commandEvents();
  const record = (e: CommandStartedEvent) => void recorded.push(e);
  events.on("commandStarted", record);
  try {
    const hook = `${server.baseUrl}${w.hookPath}`;
    const first = await postHook(hook, w.userToken, { record_id: "r1" }, { headers: { "idempotency-key": randomUUID() } });
    expect(first.status).toBe(202);
    expect((await postHook(hook, w.userToken, { record_id: "r1" })).status).toBe(409);
    const second = await postHook(hook, w.userToken, { record_id: "r2" });
    await waitForRun(server.deps.store, first.body.runId!);
    await waitForRun(server.deps.store, second.body.runId!);
    const api = apiClient(server.baseUrl, w.apiToken);
    expect((await api.get(`/v1/runs/${first.body.runId}`)).status).toBe(200);
    // The run search: every filter alone, several states, both orders, the time ranges, a next page.
    const runs = `/v1/project/${w.projectName}/environment/${w.environmentName}/runs`;
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    for (const params of [
      {},
      { order: "asc" },
      { workflowId: w.workflowId },
      { collection: w.collection },
      { collection: w.collection, recordId: "r1" },
      { recordId: "r1" },
      { recordId: "r1", state: "FAILED,SUCCEEDED" },
      { workflowName: "test workflow" },
      { state: "SUCCEEDED" },
      { state: "FAILED,SUCCEEDED,QUEUED" },
      { via: "webhook" },
      { userId: w.user._id },
      { from: hourAgo, to: new Date(Date.now() + 60_000).toISOString() },
      { finishedFrom: hourAgo },
      { state: "FAILED", finishedFrom: hourAgo, finishedTo: new Date(Date.now() + 60_000).toISOString() },
      { workflowId: w.workflowId, collection: w.collection, recordId: "r1", state: "SUCCEEDED", via: "webhook", userId: w.user._id, from: hourAgo },
    ]) {
      const page = await api.get(runs + qs({ ...params, limit: 1 }));
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      if (page.body.nextCursor) expect((await api.get(runs + qs({ ...params, limit: 1, cursor: page.body.nextCursor }))).status).toBe(200);
    }
    // A user who is no admin sees the runs of the workflows it may trigger: one query per workflow,
    // or, for more workflows × states than the search merges, one `$in` of them all.
    const user = apiClient(server.baseUrl, w.userToken);
    expect((await user.get(runs + qs({ limit: 1 }))).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      await adminClient(server.baseUrl, w.ownerToken).createWorkflow({
        renderingId: w.renderingId,
        collectionId: w.collectionId,
        name: `more ${i}`,
        steps: [{ kind: { case: "loadRecord", value: {} } }],
      });
    }
    expect((await user.get(runs + qs({ state: "QUEUED,RUNNING,SUCCEEDED,FAILED,CANCELLED", limit: 1 }))).status).toBe(200);
    // What every start does: bind the SSO API tokens made before their SSO token was recorded, and number the users who have no number.
    await bindUnboundSsoApiTokens(server.deps.store.directory);
    await numberUnnumberedUsers(server.deps.store.directory);
    const { userNumber, ownerNumber } = await userNumbers();
    // Time bounds: one on a millisecond, one within a millisecond (the entries with a time of their own).
    const time = { "createdAt.gte": new Date(Date.now() - 60_000).toISOString(), "createdAt.lt": `${new Date().toISOString().slice(0, -1)}123Z` };
    const logs = `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
    for (const params of [
      {},
      { order: "asc", limit: 2 },
      { action: "update" },
      // Two runhook actions (a failed and a cancelled run): one query each, merged.
      { action: "abortWorkflow" },
      { type: "write", action: "createNote", teamName: "ops" },
      { teamName: "ops" },
      { teamName: "(no team)" },
      { collectionName: w.collection, recordId: "r1" },
      { userId: userNumber },
      { userEmail: "nobody@example.test" },
      time,
      { ...time, order: "asc" },
    ]) {
      const page = await api.get(logs + qs(params));
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      if (page.body.nextCursor) expect((await api.get(logs + qs({ ...params, cursor: page.body.nextCursor }))).status).toBe(200);
    }
    const admin = `/v1/project/${w.projectName}/admin-logs`;
    // type=update names more runhook actions than a selection queries one by one: one `$in`.
    for (const params of [
      {},
      { type: "update" },
      { resource: "team" },
      { initiator: "forestAdmin" },
      { userId: ownerNumber },
      { userEmail: w.owner.email },
      time,
    ]) {
      const page = await api.get(admin + qs(params));
      expect(page.status, JSON.stringify(page.body)).toBe(200);
    }
    // The organization's own admin log (entries without a project), with an organization API token.
    const orgToken = (await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "indexes" })).plaintext;
    const orgApi = apiClient(server.baseUrl, orgToken);
    for (const params of [
      {},
      { order: "asc", limit: 1 },
      { resource: "user-project", type: "add" },
      { type: "update" },
      { userId: ownerNumber },
      { userEmail: w.owner.email },
      time,
    ]) {
      const page = await orgApi.get(`/v1/organization/admin-logs${qs(params)}`);
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      if (page.body.nextCursor) expect((await orgApi.get(`/v1/organization/admin-logs${qs({ ...params, cursor: page.body.nextCursor })}`)).status).toBe(200);
    }
    const exported = await fetch(`${server.baseUrl}/v1/organization/admin-logs`, {
      headers: { authorization: `Bearer ${orgToken}`, accept: "application/x-ndjson" },
    });
    expect(exported.status).toBe(200);
    expect((await exported.text()).trim().split("\n").length).toBeGreaterThan(1);
    // The log digests: a pass of the background signer (the streams written lately, each one's
    // last digest, its positions), then exports that carry them (whole, by time, filtered), and the keys.
    await server.logDigests!.runOnce();
    for (const params of [{}, { order: "asc" }, time, { recordId: "r1" }]) {
      const ndjson = await fetch(`${server.baseUrl}${logs}${qs(params)}`, {
        headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
      });
      expect(ndjson.status).toBe(200);
      // A time range carries only the digests it covers whole (maybe none); the others all of them.
      if (params !== time) expect(await ndjson.text()).toContain('{"digest":');
    }
    expect((await api.get(`/v1/project/${w.projectName}/environment/${w.environmentName}/log-keys`)).status).toBe(200);
    const notes = `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;
    const note = await api.post(notes, { collectionName: w.collection, recordId: "r1", content: "<p>hi</p>" });
    expect(note.status).toBe(201);
    const notesTime = (field: string) => ({ [`${field}.gte`]: time["createdAt.gte"], [`${field}.lt`]: time["createdAt.lt"] });
    for (const params of [
      {},
      { order: "asc" },
      { collectionName: w.collection, recordId: "r1" },
      { userId: ownerNumber },
      { userEmail: w.owner.email },
      { teamName: "ops" },
      { teamName: "(no team)" },
      notesTime("createdAt"),
      notesTime("updatedAt"),
      notesTime("archivedAt"),
    ]) {
      const page = await api.get(notes + qs({ ...params, limit: 1 }));
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      if (page.body.nextCursor) expect((await api.get(notes + qs({ ...params, limit: 1, cursor: page.body.nextCursor }))).status).toBe(200);
    }
    // A note by its number (the /v1 id): read, replied to, archived, deleted.
    expect((await api.get(`${notes}/${note.body.id}`)).status).toBe(200);
    expect((await api.post(`${notes}/${note.body.id}/messages`, { content: "<p>again</p>" })).status).toBe(201);
    expect((await api.patch(`${notes}/${note.body.id}`, { archived: true })).status).toBe(200);
    expect((await api.del(`${notes}/${note.body.id}`)).status).toBe(204);
    // The AdminService lists, each on its first page and the next (a page of one).
    const owner = adminClient(server.baseUrl, w.ownerToken);
    const member = adminClient(server.baseUrl, w.adminToken);
    const lists: [string, (pageToken: string) => Promise<{ nextPageToken: string }>][] = [
      ["users", (pageToken) => owner.listUsers({ pageSize: 1, pageToken })],
      ["projects", (pageToken) => owner.listProjects({ pageSize: 1, pageToken })],
      ["projects of a member", (pageToken) => member.listProjects({ pageSize: 1, pageToken })],
      ["environments", (pageToken) => owner.listEnvironments({ projectId: w.projectId, pageSize: 1, pageToken })],
      ["teams", (pageToken) => owner.listTeams({ projectId: w.projectId, pageSize: 1, pageToken })],
      ["team members", (pageToken) => owner.listTeamMembers({ teamId: w.teamId, pageSize: 1, pageToken })],
      ["renderings", (pageToken) => owner.listRenderings({ projectId: w.projectId, pageSize: 1, pageToken })],
      ["renderings of an environment", (pageToken) => owner.listRenderings({ projectId: w.projectId, environmentId: w.environmentId, pageToken })],
      ["collections", (pageToken) => owner.listCollections({ environmentId: w.environmentId, pageSize: 1, pageToken })],
      ["permissions", (pageToken) => owner.listCollectionPermissions({ renderingId: w.renderingId, pageSize: 1, pageToken })],
      ["workflows", (pageToken) => owner.listWorkflows({ renderingId: w.renderingId, pageSize: 1, pageToken })],
      ["workflow versions", (pageToken) => owner.listWorkflowVersions({ workflowId: w.workflowId, pageSize: 1, pageToken })],
      ["application tokens", (pageToken) => owner.listApplicationTokens({ pageSize: 1, pageToken })],
      ["API tokens", (pageToken) => owner.listApiTokens({ projectId: w.projectId, pageSize: 1, pageToken })],
      ["organization API tokens", (pageToken) => owner.listOrganizationApiTokens({ pageSize: 1, pageToken })],
    ];
    // A publish (its steps stored, then the version that names them), whose answer reads them back.
    await owner.publishWorkflow({ workflowId: w.workflowId, steps: [{ kind: { case: "loadRecord", value: {} } }] });
    for (const [, list] of lists) {
      const first = await list("");
      if (first.nextPageToken) await list(first.nextPageToken);
    }
    await owner.whoAmI({});
    // Run batches: a retry of the runs so far (claimed, walked, paced, each run's item), a dry run
    // of selected runs, a cancel batch cancelled at once, the lists (an admin's, a user's), a batch read.
    const batches = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const asAdmin = { headers: { authorization: `Bearer ${w.adminToken}` } };
    const where = { projectName: w.projectName, environmentName: w.environmentName };
    const retry = (await batches.createRunBatch({ ...where, action: "retry", filter: { states: ["SUCCEEDED"] } }, asAdmin)).batch!;
    const dry = (await batches.createRunBatch({ ...where, action: "retry", dryRun: true, runIds: [first.body.runId!] }, asAdmin)).batch!;
    const cancel = (await batches.createRunBatch({ ...where, action: "cancel", filter: { states: ["QUEUED"], workflowName: "test workflow" } }, asAdmin))
      .batch!;
    await batches.cancelRunBatch({ batchId: cancel.id }, asAdmin).catch(() => {}); // finished already, maybe
    for (const id of [retry.id, dry.id]) {
      for (let i = 0; i < 300 && (await batches.getRunBatch({ batchId: id }, asAdmin)).batch!.state === "RUNNING"; i++) await sleep(50);
    }
    expect((await batches.listRunBatches({ ...where, options: { limit: 1 } }, asAdmin)).hasMore).toBe(true);
    const page = await batches.listRunBatches({ ...where, options: { limit: 1 } }, asAdmin);
    expect((await batches.listRunBatches({ ...where, options: { limit: 1, cursor: page.nextCursor! } }, asAdmin)).batches).toHaveLength(1);
    expect((await batches.listRunBatches(where, { headers: { authorization: `Bearer ${w.userToken}` } })).batches).toEqual([]);
    // A sweep that finds something to remove: a month and a day from now, the runs have expired.
    await sweepExpired(server.deps.store, undefined, new Date(Date.now() + 31 * 86_400_000));
    await server.deps.store.runs.queueStats();
    // Entries stored with their change: a reader's look-up of a position, the sweep (all counted as old), a move.
    await server.deps.store.logs.pendingAt("activity", `a:${w.environmentId}`, 1);
    await sweepPendingEntries(server.deps.store, Date.now() + 60_000);
    await server.deps.store.runs.relocatePending(randomUUID(), "a:none:1", { key: "a:none:2", seq: 2, micros: 0 });
    // A failed authentication, whose count is shared (an upsert, then a read of the totals) within a second.
    expect((await apiClient(server.baseUrl, `rh_api_${"0".repeat(32)}_${"A".repeat(43)}`).get(admin)).status).toBe(401);
    // (The retention sweep reads rate_limits too: the shared read is the one of `auth:` documents.)
    const sharedRead = () =>
      recorded.some((e) => e.commandName === "find" && (e.command as { find?: string }).find === "rate_limits" && JSON.stringify(e.command).includes('"auth:'));
    for (let i = 0; i < 100 && !sharedRead(); i++) await sleep(50);
  } finally {
    events.off("commandStarted", record);
  }

  // Every query of a data step carries its time limit.
  const recordQueries = recorded.filter((e) => e.databaseName !== server.deps.store.databaseName && ["find", "update"].includes(e.commandName));
  expect(recordQueries.length).toBeGreaterThanOrEqual(2);
  expect(recordQueries.filter((e) => (e.command as { maxTimeMS?: number }).maxTimeMS !== DATA_QUERY_TIME_LIMIT_MS).map((e) => e.commandName)).toEqual([]);
  // So does every query of the run search (a wide finish range would otherwise read a whole environment).
  const searches = recorded.filter(
    (e) =>
      e.commandName === "find" &&
      (e.command as { find?: string; filter?: { environmentId?: unknown } }).find === "runs" &&
      (e.command as { filter?: { environmentId?: unknown } }).filter?.environmentId !== undefined,
  );
  expect(searches.length).toBeGreaterThan(5);
  expect(searches.filter((e) => (e.command as { maxTimeMS?: number }).maxTimeMS !== RUN_SEARCH_TIME_LIMIT_MS).length).toBe(0);

  const explained = new Map<string, string[]>();
  for (const e of recorded) {
    const toQuery = QUERIES[e.commandName];
    if (!toQuery) continue;
    const command = e.command as Record<string, unknown>;
    const collection = String(command[e.commandName]);
    const records = e.databaseName !== server.deps.store.databaseName;
    for (const q of toQuery(command)) {
      const key = shape(e.commandName, records, collection, q);
      if (explained.has(key)) continue;
      // The command as the application sent it, without what belongs to its session and its acknowledgement.
      const { lsid, $clusterTime, $db, txnNumber, writeConcern, readConcern, $readPreference, ...body } = command as Record<string, unknown>;
      void [lsid, $clusterTime, $db, txnNumber, writeConcern, readConcern, $readPreference];
      const plan = await fx.explain(body, records ? e.databaseName : undefined);
      explained.set(key, stages((plan as { queryPlanner?: unknown }).queryPlanner));
    }
  }
  // The workload reached the queries that matter: claims, log pages, notes, the sweep, the records.
  const keys = [...explained.keys()];
  // …and the /v1 lists' own: time bounds (on a millisecond, within one), teams, user numbers, notes by number, action alternatives.
  for (const [prefix, part] of [
    ["find activity_logs", '{"environmentId":1,"timestamp":{"$gte":1},'],
    ["find activity_logs", '{"environmentId":1,"timestamp":1,"micros":{"$gte":1},'],
    ['find admin_logs {"projectId":1,"timestamp"', ""],
    ['find admin_logs {"organizationId":1,"projectId":1,"timestamp"', ""],
    ["find activity_logs", '"rendering":1,'],
    ["find activity_logs", '"action":1,"rendering":1,'],
    ["find activity_logs", '"action":1,"seq"'],
    ["find admin_logs", '"action":{"$in":[1'],
    ["find users", '{"organizationId":1,"number":1}'],
    ["find users", ' {"number":1} '],
    ["find notes", '{"seq":1,"projectId":1,"environmentId":1}'],
    ["findAndModify notes", '{"seq":1,"projectId":1,"environmentId":1'],
    ["find notes", '"user.id":1'],
    ["find notes", '"user.email":1'],
    ["find notes", '"renderingId":{"$in":[1]}'],
    ["find notes", '"createdAt":{"$gte":1,"$lt":1}'],
    ["find notes", '"updatedAt":{"$gte":1,"$lt":1}'],
    ["find notes", '"archivedAt":{"$gte":1,"$lt":1}'],
    // Run batches: the claim, a batch's pace, a run's retries, the lists, the selected runs of a batch.
    ["findAndModify run_batches", '{"state":1,"lease.expiresAt":{"$lt":1}}'],
    ["aggregate runs", '{"batchId":1,"state":{"$in":[1,1]}}'],
    ["find runs", '{"retryOf":1}'],
    ["find runs", '{"pendingLog.key":1}'],
    ["find runs", '{"pendingLog.key":{"$gte":1}}'],
    ["update runs", '{"_id":1,"pendingLog.key":1}'],
    ["find run_batches", '"createdBy.id":1'],
    ["find run_batches", '"$or"'],
    ["find run_batch_items", '{"_id":1}'],
    ["find runs", '"_id":{"$in":[1]}'],
    // A record id alone, and a workflow's name (resolved in each rendering of the environment).
    ["find runs", '{"environmentId":1,"recordId":1}'],
    ["find workflows", '{"renderingId":1,"name":1}'],
    // Log digests: the streams written lately (by the logs' time index), a stream's digests by `_id`.
    ["find activity_logs", '{"timestamp":{"$gte":1}}'],
    ["find admin_logs", '{"timestamp":{"$gte":1}}'],
    ["find log_digests", '{"_id":{"$gt":1,"$lte":1}}'],
    ["find log_digests", '{"timestamp":{"$lte":1}}'],
  ]) {
    expect(
      keys.some((k) => k.startsWith(prefix!) && k.includes(part!)),
      `no ${prefix} …${part} in ${keys.join("\n")}`,
    ).toBe(true);
  }
  for (const expected of [
    "findAndModify runs",
    "find activity_logs",
    "find admin_logs",
    "find notes",
    "delete runs",
    "find <records>",
    "update rate_limits",
    "find rate_limits",
    "find users",
    "find projects",
    "find project_roles",
    "find environments",
    "find teams",
    "find renderings",
    "find collections",
    "find permissions",
    "find workflows",
    "find workflow_steps",
    "find app_tokens",
    "find api_tokens",
    "find org_api_tokens",
  ]) {
    expect(
      keys.some((k) => k.startsWith(expected)),
      `no ${expected} in ${keys.join("\n")}`,
    ).toBe(true);
  }
  const scans = [...explained].filter(
    ([, s]) => s.includes("COLLSCAN") || (!s.includes("IXSCAN") && !s.includes("IDHACK") && !s.includes("EXPRESS_IXSCAN") && !s.includes("EOF")),
  );
  expect(scans.map(([k, s]) => `${k}: ${s.join(" < ")}`)).toEqual([]);
});
