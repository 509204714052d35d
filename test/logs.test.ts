// Public API: activity logs and admin logs as the published document has them — the envelope
// and items, filters, createdAt ranges (to the microsecond), newest-first order, paging by
// cursor and by createdAt alone, the cursor binding, tail-safety with holes and tombstones
// (order=asc), auth and parameter errors, and the NDJSON export. What runhook records beyond
// the published items (via, details) is read over Connect.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { errorBody } from "../src/rpc/errors.js";
import { isDuplicateKey, MongoServerError, storeFixtures, type CommandStartedEvent, type Store, type StoreFixtures } from "../src/store/index.js";
import { createLogReader, type LogReader } from "../src/domain/logs/reader.js";
import { activityStream, adminStream, streamKey, watermarkId, type NewActivity, type NewAdminEntry } from "../src/store/logs.js";
import type { ActivityLogDoc } from "../src/store/types.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { addApiToken, addEnvironment, addUser, createWorld, type World } from "../fixtures/world.js";

let server: TestServer;
let db: StoreFixtures;
let w: World;
let other: World;
let stagingId: string;
/** The published `createdAt` of each entry this file wrote, by name (from the time stored with it). */
const t: Record<string, string> = {};
/** The users' numbers (their id in the published items), by name. */
const num: Record<"admin" | "user", number> = { admin: 0, user: 0 };

/** A time in microseconds since the epoch as the published items write it: RFC 3339, UTC, 6 fractional digits. */
const isoMicros = (micros: number) => `${new Date(Math.floor(micros / 1000)).toISOString().slice(0, -1)}${String(micros % 1000).padStart(3, "0")}Z`;
/** The microseconds of such a time. */
const microsOf = (iso: string) => Date.parse(`${iso.slice(0, 23)}Z`) * 1000 + Number(iso.slice(23, 26));
/** The time `delta` microseconds after `iso`. */
const shifted = (iso: string, delta: number) => isoMicros(microsOf(iso) + delta);
/** The same instant written with a +01:00 offset (still 6 fractional digits). */
const plusOneHour = (iso: string) => `${shifted(iso, 3_600_000_000).slice(0, -1)}+01:00`;

/** The time stored with the entry at `seq` of a stream, in microseconds. */
async function microsAt(kind: "activity" | "admin", stream: string, seq: number): Promise<number> {
  const doc = (await server.deps.store.logs.at(kind, stream, seq)) as { timestamp?: Date; micros?: number } | null;
  if (doc?.micros === undefined) throw new Error(`no entry with a time of its own at ${stream}:${seq}`);
  expect(doc.timestamp!.getTime()).toBe(Math.floor(doc.micros / 1000));
  return doc.micros;
}

/** Appends an activity entry a few milliseconds after the previous one, so each has a millisecond of its own. */
async function act(world: World, over: Partial<NewActivity> = {}): Promise<number> {
  await sleep(3);
  return server.deps.store.logs.appendActivity({
    projectId: world.projectId,
    environmentId: world.environmentId,
    environment: world.environmentName,
    rendering: null,
    user: { id: world.admin._id, email: world.admin.email },
    action: "record.updated",
    via: "api",
    collection: null,
    recordId: null,
    runId: null,
    details: {},
    ...over,
  });
}

/** Appends an admin log entry of the world's project by its admin, a few milliseconds after the previous one. */
async function adm(world: World, over: Partial<NewAdminEntry> = {}): Promise<number> {
  await sleep(3);
  return server.deps.store.logs.appendAdmin({
    organizationId: world.orgId,
    projectId: world.projectId,
    environment: null,
    actor: { id: world.admin._id, email: world.admin.email },
    action: "webhook.enabled",
    target: `workflow/${world.workflowId}`,
    details: {},
    ...over,
  });
}

const envPath = (name: string) => `/v1/project/${w.projectName}/environment/${name}/activity-logs`;
const base = () => envPath(w.environmentName);
const adminBase = () => `/v1/project/${w.projectName}/admin-logs`;
const connectLogs = () => createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));

/** Every page of a listing, following nextCursor until hasMore is false. */
async function all(path: string, params: Record<string, string | number | undefined>) {
  const c = apiClient(server.gateway, w.apiToken);
  const out: any[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const r = await c.get(path + qs({ ...params, cursor }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    out.push(...r.body.data);
    if (!r.body.hasMore) return { entries: out, last: r.body };
    expect(r.body.nextCursor).toBeTypeOf("string");
    cursor = r.body.nextCursor;
  }
  throw new Error("too many pages");
}

const ids: Record<string, number> = {};

beforeAll(async () => {
  server = await startServer();
  db = storeFixtures(server.deps.store);
  w = await createWorld(server);
  other = await createWorld(server);
  stagingId = await addEnvironment(server, w, "staging");
  for (const k of ["admin", "user"] as const) num[k] = (await db.users.findOne({ _id: w[k]._id }))!.number!;
  const u = { id: w.user._id, email: w.user.email };
  ids.a = await act(w, {
    action: "workflow.run.triggered",
    via: "webhook",
    user: u,
    rendering: w.renderingId,
    collection: "orders",
    recordId: "r1",
    runId: "run-1",
    details: { workflowId: w.workflowId, when: new Date("2025-01-01T00:00:00Z"), n: 3, nested: { ok: true, list: [1, "x", null] } },
  });
  ids.b = await act(w, {
    action: "workflow.run.succeeded",
    via: "workflow",
    user: u,
    rendering: w.renderingId,
    collection: "orders",
    recordId: "r1",
    runId: "run-1",
  });
  ids.c = await act(w, { action: "record.updated", collection: "orders", recordId: "r2", runId: "run-2" });
  ids.d = await act(w, { action: "note.created", collection: "customers", recordId: "c1" });
  ids.e = await act(w, { action: "note.deleted", collection: "orders", recordId: "r1" });
  // Not in this environment's log: another environment of the project, another project.
  ids.staging = await act(w, { environmentId: stagingId, environment: "staging" });
  ids.other = await act(other);
  ids.f = await act(w, { action: "record.updated", user: u });

  ids.adm1 = await adm(w);
  ids.adm2 = await adm(w, { environment: "production", actor: { id: w.user._id, email: w.user.email }, action: "workflow.published", details: { version: 2 } });
  ids.admOrg = await adm(w, { projectId: null, action: "token.created", target: "token/x" });
  ids.admOther = await adm(other, { target: "workflow/y" });
  ids.adm3 = await adm(w, { action: "api_token.created", target: "api_token/z" });
  const stream = activityStream(w.environmentId);
  for (const k of ["a", "b", "c", "d", "e", "f"]) t[k] = isoMicros(await microsAt("activity", stream, ids[k]!));
  for (const k of ["adm1", "adm2", "adm3"]) t[k] = isoMicros(await microsAt("admin", adminStream(w.orgId, w.projectId), ids[k]!));
});

afterAll(async () => {
  await server?.stop();
});

const idsOf = (entries: { id: string }[]) => entries.map((e) => Number(e.id));
/** The entries of this environment, newest first (the default order). */
const newestFirst = () => [ids.f, ids.e, ids.d, ids.c, ids.b, ids.a];

describe("activity logs", () => {
  it("lists the environment's entries newest first in the published envelope, with every item mapped", async () => {
    const r = await apiClient(server.gateway, w.apiToken).get(base());
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["data", "hasMore", "parameters"]); // the last page of a desc list: no nextCursor
    expect(r.body.hasMore).toBe(false);
    expect(r.body.parameters).toEqual({ projectName: w.projectName, environmentName: "production", limit: 10 });
    const entries = r.body.data;
    expect(idsOf(entries)).toEqual(newestFirst());
    const user = { object: "user", id: num.user, username: "Test User", email: w.user.email };
    expect(entries[5]).toEqual({
      object: "activityLog",
      id: String(ids.a),
      type: "write",
      action: "triggerWorkflow",
      label: 'triggered the workflow "test workflow"',
      recordIds: ["r1"],
      createdAt: t.a,
      user,
      environment: { object: "environment", name: "production" },
      collection: { object: "collection", name: "orders" },
      team: { object: "team", name: "ops" },
      workflow: { object: "workflow", name: "test workflow", runId: "run-1" },
    });
    // No rendering: the team is "(no team)"; no run: no workflow.
    expect(entries[2]).toEqual({
      object: "activityLog",
      id: String(ids.d),
      type: "write",
      action: "createNote",
      label: "created a note",
      recordIds: ["c1"],
      createdAt: t.d,
      user: { object: "user", id: num.admin, username: "Test User", email: w.admin.email },
      environment: { object: "environment", name: "production" },
      collection: { object: "collection", name: "customers" },
      team: { object: "team", name: "(no team)" },
    });
    // No collection, no record: neither is made up.
    expect(entries[0]).not.toHaveProperty("collection");
    expect(entries[0].recordIds).toEqual([]);
    // Each createdAt is the entry's own time, to the microsecond, and they fall newest first.
    expect(entries.map((e: { createdAt: string }) => e.createdAt)).toEqual(["f", "e", "d", "c", "b", "a"].map((k) => t[k]));
    expect(new Set(entries.map((e: { createdAt: string }) => microsOf(e.createdAt))).size).toBe(6);
  });

  it("keeps what the published item leaves out (via, details, the user's uuid, the rendering) in LogService", async () => {
    const headers = { authorization: `Bearer ${w.apiToken}` };
    const r = await connectLogs().listActivityLogs(
      { projectName: w.projectName, environmentName: "production", options: { order: "asc" }, filter: { runId: "run-1" } },
      { headers },
    );
    expect(r.activityLogs.map((e) => Number(e.id))).toEqual([ids.a, ids.b]);
    const a = r.activityLogs[0]!;
    expect(a).toMatchObject({ action: "workflow.run.triggered", via: "webhook", rendering: w.renderingId, team: "ops", workflowName: "test workflow" });
    expect(a.user).toMatchObject({ id: w.user._id, email: w.user.email, number: BigInt(num.user) });
    expect(a.details).toEqual({ workflowId: w.workflowId, when: "2025-01-01T00:00:00.000Z", n: 3, nested: { ok: true, list: [1, "x", null] } });
    expect(r.activityLogs[1]).toMatchObject({ action: "workflow.run.succeeded", via: "workflow", details: {} });
  });

  it.each<[string, () => Record<string, string | number>, () => (number | undefined)[]]>([
    ["userId (the user's number)", () => ({ userId: num.user }), () => [ids.f, ids.b, ids.a]],
    ["userEmail", () => ({ userEmail: w.admin.email }), () => [ids.e, ids.d, ids.c]],
    ["action=update", () => ({ action: "update" }), () => [ids.f, ids.c]],
    ["action=triggerWorkflow", () => ({ action: "triggerWorkflow" }), () => [ids.a]],
    ["action=completeWorkflow", () => ({ action: "completeWorkflow" }), () => [ids.b]],
    ["action=deleteNote", () => ({ action: "deleteNote" }), () => [ids.e]],
    ["action=search", () => ({ action: "search" }), () => []],
    ["type=write", () => ({ type: "write" }), newestFirst],
    ["type=read", () => ({ type: "read" }), () => []],
    ["collectionName=orders", () => ({ collectionName: "orders" }), () => [ids.e, ids.c, ids.b, ids.a]],
    ["recordId=r1", () => ({ recordId: "r1" }), () => [ids.e, ids.b, ids.a]],
    ["runId=run-1", () => ({ runId: "run-1" }), () => [ids.b, ids.a]],
    ["teamName=ops", () => ({ teamName: "ops" }), () => [ids.b, ids.a]],
    ["teamName=(no team)", () => ({ teamName: "(no team)" }), () => [ids.f, ids.e, ids.d, ids.c]],
    ["teamName=nobody's", () => ({ teamName: "nobody's" }), () => []],
  ])("filters by %s", async (_, filter, expected) => {
    const { entries } = await all(base(), { ...filter(), limit: 2 });
    expect(idsOf(entries)).toEqual(expected());
  });

  it("filters by a user's number within the project's organization only", async () => {
    // The other organization numbers its users from 1 too: w's numbers name w's users here.
    const otherAdmin = (await db.users.findOne({ _id: other.admin._id }))!.number!;
    expect(otherAdmin).toBe(num.admin);
    expect(idsOf((await all(base(), { userId: otherAdmin })).entries)).toEqual([ids.e, ids.d, ids.c]);
    expect((await all(base(), { userId: 999_999 })).entries).toEqual([]);
  });

  it("combines filters, and echoes the document's parameters (typed) but not runhook's", async () => {
    const { entries, last } = await all(base(), { collectionName: "orders", recordId: "r1", action: "deleteNote" });
    expect(idsOf(entries)).toEqual([ids.e]);
    const params = { limit: 3, userId: num.user, teamName: "ops", "createdAt.gte": t.a, order: "asc", runId: "run-1" };
    const r = await apiClient(server.gateway, w.apiToken).get(base() + qs(params));
    expect(idsOf(r.body.data)).toEqual([ids.a, ids.b]);
    expect(r.body.parameters).toEqual({
      projectName: w.projectName,
      environmentName: "production",
      limit: 3,
      userId: num.user,
      teamName: "ops",
      "createdAt.gte": t.a,
    });
    expect(last.parameters).toMatchObject({ collectionName: "orders", recordId: "r1", action: "deleteNote", limit: 10 });
  });

  it.each<[string, () => Record<string, string>, () => (number | undefined)[]]>([
    ["gte (inclusive) and lt (exclusive)", () => ({ "createdAt.gte": t.b!, "createdAt.lt": t.e! }), () => [ids.d, ids.c, ids.b]],
    ["lte (inclusive)", () => ({ "createdAt.gte": t.b!, "createdAt.lte": t.d! }), () => [ids.d, ids.c, ids.b]],
    ["gt (exclusive)", () => ({ "createdAt.gt": t.b!, "createdAt.lt": t.e! }), () => [ids.d, ids.c]],
    ["eq", () => ({ "createdAt.eq": t.c! }), () => [ids.c]],
    ["an offset", () => ({ "createdAt.gte": plusOneHour(t.d!) }), () => [ids.f, ids.e, ids.d]],
    // To the microsecond: one microsecond either side of an entry's time.
    ["eq a microsecond before", () => ({ "createdAt.eq": shifted(t.c!, -1) }), () => []],
    ["eq a microsecond after", () => ({ "createdAt.eq": shifted(t.c!, 1) }), () => []],
    ["lt its time", () => ({ "createdAt.gt": t.b!, "createdAt.lt": t.c! }), () => []],
    ["lt a microsecond after", () => ({ "createdAt.gt": t.b!, "createdAt.lt": shifted(t.c!, 1) }), () => [ids.c]],
    ["lte a microsecond before", () => ({ "createdAt.gt": t.b!, "createdAt.lte": shifted(t.c!, -1) }), () => []],
    ["gt a microsecond before", () => ({ "createdAt.gt": shifted(t.c!, -1), "createdAt.lt": t.d! }), () => [ids.c]],
    ["gte a microsecond after", () => ({ "createdAt.gte": shifted(t.c!, 1), "createdAt.lt": t.d! }), () => []],
    // Several bounds narrow the range; bounds that leave nothing select nothing (not an error).
    ["the narrowest of several", () => ({ "createdAt.gte": t.a!, "createdAt.gt": t.b!, "createdAt.lt": t.f!, "createdAt.lte": t.d! }), () => [ids.d, ids.c]],
    ["crossed bounds", () => ({ "createdAt.gte": t.e!, "createdAt.lt": t.b! }), () => []],
  ])("filters createdAt by %s", async (_, range, expected) => {
    const { entries } = await all(base(), { ...range(), limit: 2 });
    expect(idsOf(entries)).toEqual(expected());
  });

  it("pages newest first with the cursor and omits nextCursor on the last page", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    for (const order of [undefined, "desc"]) {
      const p1 = await c.get(base() + qs({ order, limit: 4 }));
      expect(idsOf(p1.body.data)).toEqual([ids.f, ids.e, ids.d, ids.c]);
      expect(p1.body.hasMore).toBe(true);
      const p2 = await c.get(base() + qs({ order, limit: 4, cursor: p1.body.nextCursor }));
      expect(idsOf(p2.body.data)).toEqual([ids.b, ids.a]);
      expect(p2.body.hasMore).toBe(false);
      expect(p2.body).not.toHaveProperty("nextCursor");
    }
  });

  it("pages oldest first with order=asc (the tail): every entry exactly once; asc always returns a cursor", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const seen: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const r = await c.get(base() + qs({ order: "asc", limit: 4, cursor }));
      pages++;
      seen.push(...idsOf(r.body.data));
      expect(r.body.nextCursor).toBeTypeOf("string");
      cursor = r.body.nextCursor;
      if (!r.body.hasMore) break;
    }
    expect(pages).toBe(2);
    expect(seen).toEqual([...newestFirst()].reverse());
    // Caught up: polling the cursor again gives nothing, then exactly the new entry.
    const empty = await c.get(base() + qs({ order: "asc", limit: 4, cursor }));
    expect(empty.body).toMatchObject({ data: [], hasMore: false });
    expect(empty.body.nextCursor).toBeTypeOf("string");
    const g = await act(w);
    const next = await c.get(base() + qs({ order: "asc", limit: 4, cursor: empty.body.nextCursor }));
    expect(idsOf(next.body.data)).toEqual([g]);
    await db.removeActivityEntries([streamKey(activityStream(w.environmentId), g)]);
  });

  it("pages newest first by createdAt.lt of each page's last item alone, every entry once, however many share a millisecond", async () => {
    const name = `burst-${randomUUID().slice(0, 8)}`;
    const env = await addEnvironment(server, w, name);
    // Written concurrently through the store: most of them within one or two milliseconds.
    const seqs = await Promise.all(Array.from({ length: 60 }, () => act(w, { environmentId: env, environment: name })));
    const docs = await db.activityLogs.find({ environmentId: env }).toArray();
    const millis = docs.map((d) => d.timestamp.getTime());
    expect(new Set(millis).size).toBeLessThan(millis.length); // some share a millisecond…
    expect(new Set(docs.map((d) => d.micros)).size).toBe(docs.length); // … none a microsecond
    const c = apiClient(server.gateway, w.apiToken);
    const first = await c.get(envPath(name));
    expect(first.body.data).toHaveLength(10); // the default limit
    expect(first.body.hasMore).toBe(true);
    const seen: number[] = [];
    let before: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const r = await c.get(envPath(name) + qs({ limit: 7, "createdAt.lt": before }));
      expect(r.status).toBe(200);
      seen.push(...idsOf(r.body.data));
      if (!r.body.hasMore) break;
      before = r.body.data.at(-1).createdAt;
    }
    expect(seen).toEqual([...seqs].sort((x, y) => y - x));
  });

  it("rejects a cursor used with other filters, order or range, and a forged cursor", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const p1 = await c.get(base() + qs({ limit: 2, collectionName: "orders" }));
    const cursor = p1.body.nextCursor as string;
    expect((await c.get(base() + qs({ limit: 2, collectionName: "orders", cursor }))).status).toBe(200);
    const otherFilters = errorBody("invalid_argument", "cursor was issued for other filters, order or time range; start again without a cursor");
    for (const params of [
      { collectionName: "customers" },
      {},
      { collectionName: "orders", order: "asc" },
      { collectionName: "orders", "createdAt.gte": t.a! },
      { collectionName: "orders", action: "update" },
      { collectionName: "orders", teamName: "ops" },
      { collectionName: "orders", userId: num.user },
    ]) {
      const r = await c.get(base() + qs({ ...params, cursor }));
      expect(r.status, JSON.stringify(params)).toBe(400);
      expect(r.body).toEqual(otherFilters);
    }
    // Another list's cursor (admin log) is bound to another list.
    const adm = await c.get(adminBase() + qs({ limit: 1 }));
    expect(await c.get(base() + qs({ cursor: adm.body.nextCursor }))).toMatchObject({ status: 400, body: otherFilters });
    // Tampered: flip a byte of the payload.
    const raw = Buffer.from(cursor, "base64url");
    raw[raw.length - 3]! ^= 1;
    const forged = errorBody("invalid_argument", "cursor is malformed or was not issued by this server");
    const bad = await c.get(base() + qs({ collectionName: "orders", cursor: raw.toString("base64url") }));
    expect(bad).toMatchObject({ status: 400, body: forged });
    expect(await c.get(base() + qs({ cursor: "not a cursor!" }))).toMatchObject({ status: 400, body: forged });
  });

  it.each([
    ["limit=abc", "limit"],
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=1000", "limit"],
    ["limit=-1", "limit"],
    ["order=up", "order"],
    ["createdAt.gte=notatime", "createdAt.gte"],
    ["createdAt.lt=2025-13-01T00:00:00Z", "createdAt.lt"],
    ["createdAt.eq=2025-02-30T00:00Z", "createdAt.eq"],
    ["createdAt.lte=2025-03-01", "createdAt.lte"],
    ["createdAt.gt=2025-03-01T24:00Z", "createdAt.gt"],
    ["createdAt.gte=2025-03-01T00:00:00+25:00", "createdAt.gte"],
    ["createdAt.from=2025-03-01T00:00Z", "createdAt.from"],
    ["userId=0", "userId"],
    ["userId=abc", "userId"],
    [`userId=${randomUUID()}`, "userId"],
    ["action=record.updated", "action"],
    ["type=admin", "type"],
    ["userid=x", "userid"],
    ["action=update&action=delete", "action"],
    // runhook's former parameters are gone.
    ["from=2025-03-01T00:00:00Z", "from"],
    ["to=2025-03-01T00:00:00Z", "to"],
    ["collection=orders", "collection"],
    // The document's schemas allow no empty value.
    ["teamName=", "teamName must not be empty"],
    ["recordId=&runId=", "recordId must not be empty"],
    ["createdAt.lt=", "createdAt.lt must not be empty"],
  ])("rejects %s with a 400 naming the parameter", async (query, name) => {
    const r = await apiClient(server.gateway, w.apiToken).get(`${base()}?${query}`);
    expect(r.status).toBe(400);
    expect(r.body).toEqual(errorBody("invalid_argument", expect.stringContaining(`${name}`) as unknown as string));
  });

  it("says what limit takes", async () => {
    const r = await apiClient(server.gateway, w.apiToken).get(`${base()}?limit=101`);
    expect(r.body).toEqual(errorBody("invalid_argument", 'limit must be a whole number from 1 to 100, got "101"'));
  });

  it("accepts limit 1 and 100", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    expect(idsOf((await c.get(`${base()}?limit=1`)).body.data)).toEqual([ids.f]);
    expect((await c.get(`${base()}?limit=100`)).body.data).toHaveLength(6);
  });

  it("answers 401 without, with a bad or a revoked token", async () => {
    const c = apiClient(server.gateway);
    for (const token of [undefined, `rh_api_${"x".repeat(43)}`, "garbage", w.userToken]) {
      const r = await c.get(base(), { token: token ?? null });
      expect(r.status).toBe(401);
      expect(r.body).toEqual(errorBody("unauthenticated", r.body.message));
      expect(r.body.message).toBeTypeOf("string");
    }
    const made = await addApiToken(server, w.admin._id, w.projectId);
    expect((await c.get(base(), { token: made.plaintext })).status).toBe(200);
    await server.deps.store.directory.apiTokens.revoke(w.orgId, made.id, new Date());
    expect((await c.get(base(), { token: made.plaintext })).status).toBe(401);
  });

  it("answers 403 for another project's token or an unknown project, 404 for an unknown environment", async () => {
    const c = apiClient(server.gateway, other.apiToken);
    const r = await c.get(base());
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ code: "permission_denied", message: expect.any(String) });
    expect((await c.get(`/v1/project/nope-${randomUUID()}/environment/production/activity-logs`)).status).toBe(403);
    const mine = apiClient(server.gateway, w.apiToken);
    const nf = await mine.get(`/v1/project/${w.projectName}/environment/nope/activity-logs`);
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual(errorBody("not_found", expect.stringContaining("nope") as unknown as string));
    // The other project's environment by name is not reachable through this project.
    expect((await mine.get(`/v1/project/${other.projectName}/environment/production/activity-logs`)).status).toBe(403);
  });

  it("answers 403 when the token's creator is no longer an admin of the project", async () => {
    const ex = await addUser(server, w, "editor");
    const made = await addApiToken(server, ex._id, w.projectId);
    const r = await apiClient(server.gateway, made.plaintext).get(base());
    expect(r.status).toBe(403);
  });

  it("streams NDJSON with Accept: application/x-ndjson (ignoring limit): the list's items, one a line; errors as JSON", async () => {
    const ndjson = async (query: string) => {
      const res = await fetch(`${server.baseUrl}${base()}?${query}`, { headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
      return (await res.text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
    };
    const lines = await ndjson("limit=1&collectionName=orders");
    expect(idsOf(lines)).toEqual([ids.e, ids.c, ids.b, ids.a]);
    expect(lines).toEqual((await all(base(), { collectionName: "orders" })).entries);
    expect(idsOf(await ndjson("order=asc"))).toEqual([...newestFirst()].reverse());
    expect(idsOf(await ndjson(`createdAt.gt=${t.b}&createdAt.lte=${t.d}`))).toEqual([ids.d, ids.c]);
    const unauth = await fetch(`${server.baseUrl}${base()}`, { headers: { accept: "application/x-ndjson" } });
    expect(unauth.status).toBe(401);
    expect(await unauth.json()).toMatchObject({ code: "unauthenticated" });
    const bad = await fetch(`${server.baseUrl}${base()}?from=2025-01-01T00:00:00Z`, {
      headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: "invalid_argument" });
  });
});

describe("admin logs", () => {
  // The entries this file wrote by hand (others are the making of its world and users, through the AdminService).
  const mine = <E extends { id: string }>(entries: E[]) => entries.filter((e) => Number(e.id) >= ids.adm1! && Number(e.id) <= ids.adm3!);
  const ours = (entries: { id: string }[]) => idsOf(mine(entries));

  it("lists the project's entries only (not org-level, not another project's), newest first, as published items", async () => {
    const listed = (await all(adminBase(), { limit: 100 })).entries;
    // Exactly the project's stream: the organization's own entry and the other project's are elsewhere.
    const stored = await db.adminLogs.find({ projectId: w.projectId }, { sort: { seq: -1 } }).toArray();
    expect(idsOf(listed)).toEqual(stored.map((d) => d.seq));
    expect(stored.map((d) => d.target)).not.toContain("token/x");
    expect(stored.map((d) => d.target)).not.toContain("workflow/y");
    const entries = mine(listed);
    expect(idsOf(entries)).toEqual([ids.adm3, ids.adm2, ids.adm1]);
    expect(entries[1]).toEqual({
      object: "adminLog",
      id: String(ids.adm2),
      type: "update",
      resource: "environment",
      initiator: "administrator",
      createdAt: t.adm2,
      user: { object: "user", id: num.user, username: "Test User", email: w.user.email },
    });
    expect(entries[0]).toMatchObject({ type: "update", resource: "user-project", initiator: "administrator", createdAt: t.adm3 });
    // The making of the world: the project (initial), its team (add, with its name), its users (add).
    const made = listed.filter((e) => Number(e.id) < ids.adm1!);
    expect(made.at(-1)).toMatchObject({ type: "initial", resource: "environment", initiator: "administrator" });
    expect(made).toContainEqual(expect.objectContaining({ type: "add", resource: "team", newValue: { name: "ops" } }));
    expect(made).toContainEqual(
      expect.objectContaining({
        type: "update",
        resource: "user-project",
        newValue: expect.objectContaining({ user: expect.objectContaining({ id: num.admin }) }),
      }),
    );
  });

  it("keeps the action, target and details in LogService", async () => {
    const r = await connectLogs().listAdminLogs(
      { projectName: w.projectName, options: { order: "asc" }, filter: { action: "workflow.published", userId: w.user._id } },
      { headers: { authorization: `Bearer ${w.apiToken}` } },
    );
    expect(r.adminLogs.map((e) => Number(e.id))).toEqual([ids.adm2]);
    expect(r.adminLogs[0]).toMatchObject({ environment: "production", target: `workflow/${w.workflowId}`, details: { version: 2 } });
    expect(r.adminLogs[0]!.actor).toMatchObject({ id: w.user._id, number: BigInt(num.user) });
  });

  it.each<[string, () => Record<string, string | number>, () => (number | undefined)[]]>([
    ["userId", () => ({ userId: num.user }), () => [ids.adm2]],
    ["userEmail", () => ({ userEmail: w.admin.email, limit: 1 }), () => [ids.adm3, ids.adm1]],
    ["resource=user-project", () => ({ resource: "user-project" }), () => [ids.adm3]],
    ["resource=environment and type=update", () => ({ resource: "environment", type: "update", limit: 1 }), () => [ids.adm2, ids.adm1]],
    ["type=add", () => ({ type: "add" }), () => []],
    ["initiator=administrator", () => ({ initiator: "administrator", limit: 2 }), () => [ids.adm3, ids.adm2, ids.adm1]],
    ["initiator=forestAdmin", () => ({ initiator: "forestAdmin" }), () => []],
    ["createdAt", () => ({ "createdAt.gte": t.adm2!, "createdAt.lt": t.adm3! }), () => [ids.adm2]],
    ["createdAt to the microsecond", () => ({ "createdAt.gt": shifted(t.adm2!, -1), "createdAt.lte": t.adm2! }), () => [ids.adm2]],
    ["order=asc", () => ({ order: "asc", limit: 1 }), () => [ids.adm1, ids.adm2, ids.adm3]],
    ["the default order", () => ({ limit: 1 }), () => [ids.adm3, ids.adm2, ids.adm1]],
  ])("filters by %s", async (_, params, expected) => {
    expect(ours((await all(adminBase(), params())).entries)).toEqual(expected());
  });

  it("refuses the activity log's parameters and another project's token", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    for (const q of ["collectionName=orders", "action=update", "resource=workflow", "initiator=system"]) {
      const bad = await c.get(`${adminBase()}?${q}`);
      expect(bad.status, q).toBe(400);
      expect(bad.body).toEqual(errorBody("invalid_argument", expect.stringContaining(q.split("=")[0]!) as unknown as string));
    }
    expect((await apiClient(server.gateway, other.apiToken).get(adminBase())).status).toBe(403);
  });
});

/** Entries of a new environment stored as they are (their times chosen), the stream's counter and watermark at the last. */
async function storedEnvironment(prefix: string, docs: (i: number) => Pick<ActivityLogDoc, "timestamp" | "micros">, n: number) {
  const name = `${prefix}-${randomUUID().slice(0, 8)}`;
  const env = await addEnvironment(server, w, name);
  const stream = activityStream(env);
  await db.insertActivityEntries(
    Array.from({ length: n }, (_, k) => ({
      _id: streamKey(stream, k + 1),
      seq: k + 1,
      ...docs(k + 1),
      projectId: w.projectId,
      environmentId: env,
      environment: name,
      rendering: null,
      user: { id: "u", email: "e" },
      action: "record.updated",
      via: "api" as const,
      collection: null,
      recordId: null,
      runId: null,
      details: {},
    })),
  );
  await db.setCounter(stream, n);
  await server.deps.store.logs.raiseWatermark(stream, n);
  return envPath(name);
}

describe("time ranges", () => {
  it("gives a stream's entries times of their own that rise with their numbers, however their writers interleave", async () => {
    const env = await addEnvironment(server, w, `times-${randomUUID().slice(0, 8)}`);
    const seqs = await Promise.all(Array.from({ length: 40 }, () => act(w, { environmentId: env })));
    const stream = activityStream(env);
    const times: number[] = [];
    for (const seq of seqs.sort((a, b) => a - b)) times.push(await microsAt("activity", stream, seq));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThan(times[i - 1]!);
  });

  it("takes times to the minute (YYYY-MM-DDTHH:MM, UTC unless an offset says) and to the microsecond", async () => {
    const ms = Math.floor((Date.now() - 86_400_000) / 60_000) * 60_000; // a minute of yesterday
    const minute = ms * 1000;
    const times = [minute - 60_000_000, minute - 1, minute, minute + 1, minute + 30_000_000, minute + 60_000_000 - 1, minute + 60_000_000];
    const path = await storedEnvironment("minutes", (i) => ({ timestamp: new Date(Math.floor(times[i - 1]! / 1000)), micros: times[i - 1]! }), times.length);
    const hhmm = new Date(ms).toISOString().slice(0, 16); // YYYY-MM-DDTHH:MM
    const next = new Date(ms + 60_000).toISOString().slice(0, 16);
    const c = apiClient(server.gateway, w.apiToken);
    const listed = async (range: Record<string, string>) => {
      const r = await c.get(path + qs({ ...range, order: "asc" }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return idsOf(r.body.data);
    };
    // Each time as it is, also a microsecond before a whole second (not rounded up to it).
    expect((await c.get(path + qs({ order: "asc" }))).body.data.map((e: { createdAt: string }) => e.createdAt)).toEqual(times.map(isoMicros));
    expect(isoMicros(minute - 1)).toBe(`${new Date(ms - 1000).toISOString().slice(0, 19)}.999999Z`);
    // So paging by the last item's createdAt alone visits each once.
    const visited: number[] = [];
    for (let before: string | undefined, more = true; more; ) {
      const r = await c.get(path + qs({ limit: 1, "createdAt.lt": before }));
      visited.push(...idsOf(r.body.data));
      more = r.body.hasMore && visited.length < 20;
      before = r.body.data.at(-1)?.createdAt;
    }
    expect(visited).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(await listed({ "createdAt.gte": hhmm })).toEqual([3, 4, 5, 6, 7]);
    expect(await listed({ "createdAt.lt": hhmm })).toEqual([1, 2]);
    expect(await listed({ "createdAt.eq": hhmm })).toEqual([3]);
    expect(await listed({ "createdAt.lte": hhmm })).toEqual([1, 2, 3]);
    expect(await listed({ "createdAt.gt": hhmm })).toEqual([4, 5, 6, 7]);
    expect(await listed({ "createdAt.gte": hhmm, "createdAt.lt": next })).toEqual([3, 4, 5, 6]);
    const inParis = `${new Date(ms + 2 * 3_600_000).toISOString().slice(0, 16)}+02:00`;
    expect(await listed({ "createdAt.gte": inParis, "createdAt.lt": `${next}Z` })).toEqual([3, 4, 5, 6]);
    expect(await listed({ "createdAt.gte": isoMicros(minute - 1), "createdAt.lte": isoMicros(minute + 1) })).toEqual([2, 3, 4]);
    // Past the microsecond: nanoseconds round up to the next whole microsecond.
    const plusOneNano = (micros: number) => isoMicros(micros).replace("Z", "001Z");
    expect(await listed({ "createdAt.gte": plusOneNano(minute - 2), "createdAt.lt": plusOneNano(minute) })).toEqual([2, 3]);
  });

  it("reads only the entries near a time range deep in a long stream, older entries (no micros) and newer alike", async () => {
    const T = Date.now() - 86_400_000;
    const N = 3000;
    // One entry a second, in number order as in time order (as appends leave them): the first
    // half as runhook stored them before it kept microseconds, the rest 750 µs into their second (the half of a millisecond that rounds up).
    const path = await storedEnvironment(
      "deep",
      (i) => (i <= N / 2 ? { timestamp: new Date(T + i * 1000) } : { timestamp: new Date(T + i * 1000), micros: (T + i * 1000) * 1000 + 750 }),
      N,
    );
    const at = (i: number, micros = 0) => isoMicros((T + i * 1000) * 1000 + micros);

    const recorded: CommandStartedEvent[] = [];
    const events = db.commandEvents();
    const logs = db.collectionNameOf("activityLogs");
    const record = (e: CommandStartedEvent) => void (e.commandName === "find" && e.command.find === logs && recorded.push(e));
    events.on("commandStarted", record);
    const c = apiClient(server.gateway, w.apiToken);
    const page = async (range: Record<string, string>, order?: string) => idsOf((await c.get(path + qs({ ...range, limit: 5, order }))).body.data);
    try {
      // Newer entries: a bound at an entry's own microsecond, and one just after it.
      const newer = { "createdAt.gte": at(2000, 750), "createdAt.lt": at(2600, 750) };
      expect(await page(newer, "asc")).toEqual([2000, 2001, 2002, 2003, 2004]);
      expect(await page(newer)).toEqual([2599, 2598, 2597, 2596, 2595]);
      expect(await page({ "createdAt.gt": at(2000, 750), "createdAt.lte": at(2600, 751) }, "asc")).toEqual([2001, 2002, 2003, 2004, 2005]);
      expect(await page({ "createdAt.gt": at(2000, 750), "createdAt.lte": at(2600, 751) })).toEqual([2600, 2599, 2598, 2597, 2596]);
      // Older entries (their millisecond is their time), and a range across both.
      expect(await page({ "createdAt.gte": at(500), "createdAt.lt": at(1100) }, "asc")).toEqual([500, 501, 502, 503, 504]);
      expect(await page({ "createdAt.gt": at(500), "createdAt.lte": at(1100) })).toEqual([1100, 1099, 1098, 1097, 1096]);
      expect(await page({ "createdAt.gte": at(1400, 1), "createdAt.lt": at(1600) })).toEqual([1599, 1598, 1597, 1596, 1595]);
      expect(await page({ "createdAt.gte": at(1400, 1), "createdAt.lt": at(1600) }, "asc")).toEqual([1401, 1402, 1403, 1404, 1405]);
    } finally {
      events.off("commandStarted", record);
    }
    // Each query of the log examined a few entries: not the thousands before the range, nor the hundreds in it.
    expect(recorded.filter((e) => JSON.stringify(e.command.filter ?? {}).includes("timestamp")).length).toBeGreaterThanOrEqual(8);
    for (const e of recorded) {
      const { lsid, $clusterTime, $db, $readPreference, ...body } = e.command as Record<string, unknown>;
      void [lsid, $clusterTime, $db, $readPreference];
      const plan = (await db.explain(body, undefined, "executionStats")) as { executionStats: { totalDocsExamined: number } };
      expect(plan.executionStats.totalDocsExamined, JSON.stringify(body)).toBeLessThanOrEqual(20);
    }
  });
});

/** An activity entry written straight at a position taken earlier (its number and time), as a writer that took it would. */
const entryAt = (stream: string, taken: { value: number; micros: number }, recordId: string) => ({
  _id: streamKey(stream, taken.value),
  seq: taken.value,
  timestamp: new Date(Math.floor(taken.micros / 1000)),
  micros: taken.micros,
  projectId: w.projectId,
  environmentId: w.environmentId,
  environment: "production",
  rendering: null,
  user: { id: "u", email: "e" },
  action: "record.updated",
  via: "api" as const,
  collection: null,
  recordId,
  runId: null,
  details: {},
});

const recordsOf = (entries: { recordIds: string[] }[]) => entries.flatMap((e) => e.recordIds);

describe("tail-safety: holes and tombstones (order=asc)", () => {
  const tail = { order: "asc", limit: 100 };

  it("waits for a hole that fills within the grace, and returns the entry in order", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const start = await c.get(base() + qs(tail));
    expect(start.body.hasMore).toBe(false);
    const cursor = start.body.nextCursor;
    // A slow writer: takes a number, inserts it 80 ms later; a fast one writes after it.
    const stream = activityStream(w.environmentId);
    const slow = await server.deps.store.counters.nextStamped(stream);
    const fast = await act(w, { recordId: "fast" });
    const slowInsert = new Promise<void>((r) => setTimeout(r, 80)).then(() => db.insertActivityEntries([entryAt(stream, slow, "slow")]));
    const page = await c.get(base() + qs({ ...tail, cursor }));
    await slowInsert;
    expect(recordsOf(page.body.data)).toEqual(["slow", "fast"]);
    expect(idsOf(page.body.data)).toEqual([slow.value, fast]);
    await db.removeActivityEntries([streamKey(stream, slow.value), streamKey(stream, fast)]);
    // (deleting entries is test cleanup only; it never happens in the service)
  });

  it("tombstones a hole left longer than the grace; the late writer collides and re-takes a number", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const start = await c.get(base() + qs(tail));
    const stream = activityStream(w.environmentId);
    const lost = await server.deps.store.counters.nextStamped(stream); // a writer that stalls (or crashed)
    const after = await act(w, { recordId: "after-hole" });
    const began = Date.now();
    const page = await c.get(base() + qs({ ...tail, cursor: start.body.nextCursor }));
    expect(Date.now() - began).toBeGreaterThanOrEqual(150); // waited the grace
    expect(idsOf(page.body.data)).toEqual([after]);
    const tomb = await db.activityLogs.findOne({ _id: streamKey(stream, lost.value) });
    expect(tomb).toMatchObject({ _id: streamKey(stream, lost.value), seq: lost.value, tomb: true, environmentId: null });
    // The stalled writer's insert now collides …
    const late = await db.insertActivityEntries([entryAt(stream, lost, "late")]).then(
      () => null,
      (err) => err,
    );
    expect(isDuplicateKey(late)).toBe(true);
    // … and the writer's retry takes a new number, after the consumer's position.
    const retried = await act(w, { recordId: "late" });
    expect(retried).toBeGreaterThan(after);
    const next = await c.get(base() + qs({ ...tail, cursor: page.body.nextCursor }));
    expect(recordsOf(next.body.data)).toEqual(["late"]);
    // Tombstones never appear, not even in the NDJSON export, newest first or in a time range around them.
    const exported = await fetch(`${server.baseUrl}${base()}`, { headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" } });
    expect((await exported.text()).includes(`"id":"${lost.value}"`)).toBe(false);
    expect(idsOf((await all(base(), { limit: 100 })).entries)).not.toContain(lost.value);
    const around = { "createdAt.gte": isoMicros(lost.micros), limit: 100 };
    expect(idsOf((await all(base(), around)).entries)).toEqual([retried, after]);
    // The watermark is shared in the database.
    const wm = await db.counters.findOne({ _id: watermarkId(stream) });
    expect(wm!.seq).toBeGreaterThanOrEqual(retried);
    await db.removeActivityEntries([streamKey(stream, after), streamKey(stream, retried)]);
  });

  it("a walk whose tombstone a full database refuses ends before the hole, without an error; it reads on once writes are accepted", async () => {
    const store = server.deps.store;
    const stream = activityStream(w.environmentId);
    const lost = await store.counters.nextStamped(stream); // a writer whose insert was refused
    const after = await act(w, { recordId: "after-full-hole" });
    const full = new MongoServerError({ message: "the embedded database's memory is full", code: 146 });
    const refused = async () => {
      throw full;
    };
    const fullStore = { ...store, logs: { ...store.logs, tombstone: refused, raiseWatermark: refused } } as Store;
    const walk = async (reader: LogReader) => {
      const seen: [number, number | null][] = [];
      for await (const r of reader.forward("activity", stream, lost.value - 1)) seen.push([r.seq, r.doc?.seq ?? null]);
      return seen;
    };
    expect(await walk(createLogReader(fullStore, { holeGraceMs: 10 }))).toEqual([]);
    expect(await db.activityLogs.findOne({ _id: streamKey(stream, lost.value) })).toBeNull(); // still a hole
    expect(await walk(createLogReader(store, { holeGraceMs: 10 }))).toEqual([
      [lost.value, null],
      [after, after],
    ]);
    await db.removeActivityEntries([streamKey(stream, after)]);
  });
});
