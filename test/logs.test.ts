// Public API: activity logs and admin logs — filters, time range, order, paging, the
// cursor binding, tail-safety with holes and tombstones, auth and parameter errors.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isDuplicateKey, storeFixtures, type CommandStartedEvent, type StoreFixtures } from "../src/store/index.js";
import { activityStream, adminStream, streamKey, watermarkId, type NewActivity, type NewAdminEntry } from "../src/store/logs.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { addApiToken, addEnvironment, addUser, createWorld, type World } from "../fixtures/world.js";

let server: TestServer;
let db: StoreFixtures;
let w: World;
let other: World;
let stagingId: string;
/** The time each entry this file wrote was given (the time its position was taken), by name. */
const t: Record<string, Date> = {};
/** A time as the API writes it (RFC 3339, milliseconds only when there are some). */
const rfc3339 = (d: Date) => d.toISOString().replace(".000Z", "Z");
/** The same instant written with a +01:00 offset. */
const plusOneHour = (d: Date) => new Date(d.getTime() + 3_600_000).toISOString().replace("Z", "+01:00");

/** The time stored with the entry at `seq` of a stream. */
async function timeOf(kind: "activity" | "admin", stream: string, seq: number): Promise<Date> {
  const doc = (await server.deps.store.logs.at(kind, stream, seq)) as { timestamp?: Date } | null;
  if (!doc?.timestamp) throw new Error(`no entry at ${stream}:${seq}`);
  return doc.timestamp;
}

/** Appends an activity entry a few milliseconds after the previous one, so each has a time of its own. */
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

const base = () => `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
const adminBase = () => `/v1/project/${w.projectName}/admin-logs`;

/** Every page of a listing, following nextCursor until hasMore is false. */
async function all(path: string, params: Record<string, string | number | undefined>, key = "activityLogs") {
  const c = apiClient(server.gateway, w.apiToken);
  const out: any[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const r = await c.get(path + qs({ ...params, cursor }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    out.push(...r.body[key]);
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
  for (const k of ["a", "b", "c", "d", "e", "f"]) t[k] = await timeOf("activity", stream, ids[k]!);
  for (const k of ["adm2", "adm3"]) t[k] = await timeOf("admin", adminStream(w.orgId, w.projectId), ids[k]!);
});

afterAll(async () => {
  await server?.stop();
});

const idsOf = (entries: { id: string }[]) => entries.map((e) => Number(e.id));

describe("activity logs", () => {
  it("lists the environment's entries in order, with every field mapped", async () => {
    const { entries, last } = await all(base(), {});
    expect(idsOf(entries)).toEqual([ids.a, ids.b, ids.c, ids.d, ids.e, ids.f]);
    expect(last.hasMore).toBe(false);
    expect(last.nextCursor).toBeTypeOf("string");
    expect(entries[0]).toEqual({
      id: String(ids.a),
      timestamp: rfc3339(t.a!),
      environment: "production",
      rendering: w.renderingId,
      user: { id: w.user._id, email: w.user.email },
      action: "workflow.run.triggered",
      via: "webhook",
      collection: "orders",
      recordId: "r1",
      runId: "run-1",
      details: { workflowId: w.workflowId, when: "2025-01-01T00:00:00.000Z", n: 3, nested: { ok: true, list: [1, "x", null] } },
    });
    // Unset optional fields are omitted, details always present.
    const d = entries[3];
    expect(d).not.toHaveProperty("rendering");
    expect(d).not.toHaveProperty("runId");
    expect(d.details).toEqual({});
  });

  it.each<[string, () => string, () => (number | undefined)[]]>([
    ["userId", () => w.user._id, () => [ids.a, ids.b, ids.f]],
    ["userEmail", () => w.admin.email, () => [ids.c, ids.d, ids.e]],
    ["action", () => "record.updated", () => [ids.c, ids.f]],
    ["collection", () => "orders", () => [ids.a, ids.b, ids.c, ids.e]],
    ["recordId", () => "r1", () => [ids.a, ids.b, ids.e]],
    ["runId", () => "run-1", () => [ids.a, ids.b]],
  ])("filters by %s", async (name, value, expected) => {
    const { entries } = await all(base(), { [name]: value(), limit: 2 });
    expect(idsOf(entries)).toEqual(expected());
  });

  it("combines filters", async () => {
    const { entries } = await all(base(), { collection: "orders", recordId: "r1", action: "note.deleted" });
    expect(idsOf(entries)).toEqual([ids.e]);
  });

  it("filters by from (inclusive) and to (exclusive)", async () => {
    const { entries } = await all(base(), { from: t.b!.toISOString(), to: t.e!.toISOString() });
    expect(idsOf(entries)).toEqual([ids.b, ids.c, ids.d]);
    const { entries: later } = await all(base(), { from: plusOneHour(t.d!) });
    expect(idsOf(later)).toEqual([ids.d, ids.e, ids.f]);
  });

  it("pages with small limits: every entry exactly once; asc always returns a cursor", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const seen: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const r = await c.get(base() + qs({ limit: 4, cursor }));
      pages++;
      seen.push(...idsOf(r.body.activityLogs));
      expect(r.body.nextCursor).toBeTypeOf("string");
      cursor = r.body.nextCursor;
      if (!r.body.hasMore) break;
    }
    expect(pages).toBe(2);
    expect(seen).toEqual([ids.a, ids.b, ids.c, ids.d, ids.e, ids.f]);
    // Caught up: polling the cursor again gives nothing, then exactly the new entry.
    const empty = await c.get(base() + qs({ limit: 4, cursor }));
    expect(empty.body).toMatchObject({ activityLogs: [], hasMore: false });
    expect(empty.body.nextCursor).toBeTypeOf("string");
    const g = await act(w);
    const next = await c.get(base() + qs({ limit: 4, cursor: empty.body.nextCursor }));
    expect(idsOf(next.body.activityLogs)).toEqual([g]);
    await db.removeActivityEntries([streamKey(activityStream(w.environmentId), g)]);
  });

  it("orders desc and omits nextCursor on the last page", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const p1 = await c.get(base() + qs({ order: "desc", limit: 4 }));
    expect(idsOf(p1.body.activityLogs)).toEqual([ids.f, ids.e, ids.d, ids.c]);
    expect(p1.body.hasMore).toBe(true);
    const p2 = await c.get(base() + qs({ order: "desc", limit: 4, cursor: p1.body.nextCursor }));
    expect(idsOf(p2.body.activityLogs)).toEqual([ids.b, ids.a]);
    expect(p2.body.hasMore).toBe(false);
    expect(p2.body).not.toHaveProperty("nextCursor");
  });

  it("rejects a cursor used with other filters, order or range, and a forged cursor", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const p1 = await c.get(base() + qs({ limit: 2, collection: "orders" }));
    const cursor = p1.body.nextCursor as string;
    expect((await c.get(base() + qs({ limit: 2, collection: "orders", cursor }))).status).toBe(200);
    for (const params of [{ collection: "customers" }, {}, { collection: "orders", order: "desc" }, { collection: "orders", from: t.a!.toISOString() }]) {
      const r = await c.get(base() + qs({ ...params, cursor }));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: "invalid_argument", error: expect.stringMatching(/cursor/) });
    }
    // Another list's cursor (admin log) is bound to another list.
    const adm = await c.get(adminBase() + qs({ limit: 1 }));
    expect((await c.get(base() + qs({ cursor: adm.body.nextCursor }))).status).toBe(400);
    // Tampered: flip a byte of the payload.
    const raw = Buffer.from(cursor, "base64url");
    raw[raw.length - 3]! ^= 1;
    const bad = await c.get(base() + qs({ collection: "orders", cursor: raw.toString("base64url") }));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/cursor/);
    expect((await c.get(base() + qs({ cursor: "not a cursor!" }))).status).toBe(400);
  });

  it.each([
    ["limit=abc", "limit"],
    ["limit=0", "limit"],
    ["limit=1001", "limit"],
    ["limit=-1", "limit"],
    ["order=up", "order"],
    ["from=notatime", "from"],
    ["to=2025-13-01T00:00:00Z", "to"],
    ["from=2025-03-01", "from"],
    ["userid=x", "userid"],
    ["action=a&action=b", "action"],
    ["from=2025-03-02T00:00:00Z&to=2025-03-01T00:00:00Z", "from"],
  ])("rejects %s with a 400 naming the parameter", async (query, name) => {
    const r = await apiClient(server.gateway, w.apiToken).get(`${base()}?${query}`);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ code: "invalid_argument", error: expect.stringContaining(name) });
  });

  it("accepts limit 1 and 1000", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    expect((await c.get(`${base()}?limit=1`)).body.activityLogs).toHaveLength(1);
    expect((await c.get(`${base()}?limit=1000`)).body.activityLogs).toHaveLength(6);
  });

  it("answers 401 without, with a bad or a revoked token", async () => {
    const c = apiClient(server.gateway);
    for (const token of [undefined, `rh_api_${"x".repeat(43)}`, "garbage", w.userToken]) {
      const r = await c.get(base(), { token: token ?? null });
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ code: "unauthenticated" });
    }
    const t = await addApiToken(server, w.admin._id, w.projectId);
    expect((await c.get(base(), { token: t.plaintext })).status).toBe(200);
    await server.deps.store.directory.apiTokens.revoke(w.orgId, t.id, new Date());
    expect((await c.get(base(), { token: t.plaintext })).status).toBe(401);
  });

  it("answers 403 for another project's token or an unknown project, 404 for an unknown environment", async () => {
    const c = apiClient(server.gateway, other.apiToken);
    const r = await c.get(base());
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ code: "permission_denied" });
    expect((await c.get(`/v1/project/nope-${randomUUID()}/environment/production/activity-logs`)).status).toBe(403);
    const mine = apiClient(server.gateway, w.apiToken);
    const nf = await mine.get(`/v1/project/${w.projectName}/environment/nope/activity-logs`);
    expect(nf.status).toBe(404);
    expect(nf.body).toMatchObject({ code: "not_found", error: expect.stringContaining("nope") });
    // The other project's environment by name is not reachable through this project.
    expect((await mine.get(`/v1/project/${other.projectName}/environment/production/activity-logs`)).status).toBe(403);
  });

  it("answers 403 when the token's creator is no longer an admin of the project", async () => {
    const ex = await addUser(server, w, "editor");
    const t = await addApiToken(server, ex._id, w.projectId);
    const r = await apiClient(server.gateway, t.plaintext).get(base());
    expect(r.status).toBe(403);
  });

  it("streams NDJSON with Accept: application/x-ndjson (ignoring limit), errors as JSON", async () => {
    const res = await fetch(`${server.baseUrl}${base()}?limit=1&collection=orders`, {
      headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const lines = (await res.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((e) => Number(e.id))).toEqual([ids.a, ids.b, ids.c, ids.e]);
    expect(lines[0].details.nested).toEqual({ ok: true, list: [1, "x", null] });
    const desc = await fetch(`${server.baseUrl}${base()}?order=desc`, { headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" } });
    expect(
      (await desc.text())
        .trim()
        .split("\n")
        .map((l) => Number(JSON.parse(l).id)),
    ).toEqual([ids.f, ids.e, ids.d, ids.c, ids.b, ids.a]);
    const unauth = await fetch(`${server.baseUrl}${base()}`, { headers: { accept: "application/x-ndjson" } });
    expect(unauth.status).toBe(401);
    expect(await unauth.json()).toMatchObject({ code: "unauthenticated" });
  });
});

describe("admin logs", () => {
  // The entries this file wrote by hand (others are the making of its world and users, through the AdminService).
  const mine = <E extends { id: string }>(entries: E[]) => entries.filter((e) => Number(e.id) >= ids.adm1! && Number(e.id) <= ids.adm3!);
  const ours = (entries: { id: string }[]) => idsOf(mine(entries));

  it("lists the project's entries only (not org-level, not another project's)", async () => {
    const listed = (await all(adminBase(), {}, "adminLogs")).entries as { id: string; target: string }[];
    expect(listed.map((e) => e.target)).not.toContain("token/x"); // the organization's entry
    expect(listed.map((e) => e.target)).not.toContain("workflow/y"); // the other project's
    const entries = mine(listed);
    expect(idsOf(entries)).toEqual([ids.adm1, ids.adm2, ids.adm3]);
    expect(entries[1]).toEqual({
      id: String(ids.adm2),
      timestamp: rfc3339(t.adm2!),
      environment: "production",
      actor: { id: w.user._id, email: w.user.email },
      action: "workflow.published",
      target: `workflow/${w.workflowId}`,
      details: { version: 2 },
    });
    expect(entries[0]).not.toHaveProperty("environment");
  });

  it("filters by userId, userEmail, action and time; pages desc", async () => {
    expect(ours((await all(adminBase(), { userId: w.user._id }, "adminLogs")).entries)).toEqual([ids.adm2]);
    expect(ours((await all(adminBase(), { userEmail: w.admin.email, limit: 1 }, "adminLogs")).entries)).toEqual([ids.adm1, ids.adm3]);
    expect(ours((await all(adminBase(), { action: "api_token.created" }, "adminLogs")).entries)).toEqual([ids.adm3]);
    expect(ours((await all(adminBase(), { from: t.adm2!.toISOString(), to: t.adm3!.toISOString() }, "adminLogs")).entries)).toEqual([ids.adm2]);
    expect(ours((await all(adminBase(), { order: "desc", limit: 1 }, "adminLogs")).entries)).toEqual([ids.adm3, ids.adm2, ids.adm1]);
    const bad = await apiClient(server.gateway, w.apiToken).get(`${adminBase()}?collection=orders`);
    expect(bad.status).toBe(400);
    expect((await apiClient(server.gateway, other.apiToken).get(adminBase())).status).toBe(403);
  });
});

describe("time ranges", () => {
  it("gives a stream's entries times that rise with their numbers, however their writers interleave", async () => {
    const env = await addEnvironment(server, w, `times-${randomUUID().slice(0, 8)}`);
    const seqs = await Promise.all(Array.from({ length: 40 }, () => act(w, { environmentId: env })));
    const stream = activityStream(env);
    const times: number[] = [];
    for (const seq of seqs.sort((a, b) => a - b)) times.push((await timeOf("activity", stream, seq)).getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it("reads only the entries near a time range deep in a long stream", async () => {
    const name = `deep-${randomUUID().slice(0, 8)}`;
    const env = await addEnvironment(server, w, name);
    const stream = activityStream(env);
    const T = Date.now() - 86_400_000;
    const N = 3000;
    // One entry a second, in number order as in time order (as appends leave them).
    await db.insertActivityEntries(
      Array.from({ length: N }, (_, i) => ({
        _id: streamKey(stream, i + 1),
        seq: i + 1,
        timestamp: new Date(T + (i + 1) * 1000),
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
    await db.setCounter(stream, N);
    await server.deps.store.logs.raiseWatermark(stream, N);

    const recorded: CommandStartedEvent[] = [];
    const events = db.commandEvents();
    const record = (e: CommandStartedEvent) => void (e.commandName === "find" && recorded.push(e));
    events.on("commandStarted", record);
    const path = `/v1/project/${w.projectName}/environment/${name}/activity-logs`;
    const range = { from: new Date(T + 2000_000).toISOString(), to: new Date(T + 2600_000).toISOString() };
    const c = apiClient(server.gateway, w.apiToken);
    let asc: any;
    let desc: any;
    try {
      asc = await c.get(path + qs({ ...range, limit: 5 }));
      desc = await c.get(path + qs({ ...range, limit: 5, order: "desc" }));
    } finally {
      events.off("commandStarted", record);
    }
    expect(idsOf(asc.body.activityLogs)).toEqual([2000, 2001, 2002, 2003, 2004]);
    expect(asc.body.hasMore).toBe(true);
    expect(idsOf(desc.body.activityLogs)).toEqual([2599, 2598, 2597, 2596, 2595]);
    // Each query with the time range examined a few entries: not the 2,000 before it, nor the 600 in it.
    const timed = recorded.filter((e) => JSON.stringify(e.command.filter ?? {}).includes("timestamp"));
    expect(timed.length).toBeGreaterThanOrEqual(2);
    for (const e of timed) {
      const { lsid, $clusterTime, $db, $readPreference, ...body } = e.command as Record<string, unknown>;
      void [lsid, $clusterTime, $db, $readPreference];
      const plan = (await db.explain(body, undefined, "executionStats")) as { executionStats: { totalDocsExamined: number } };
      expect(plan.executionStats.totalDocsExamined, JSON.stringify(body)).toBeLessThanOrEqual(20);
    }
  });
});

/** An activity entry written straight at position `seq`, as a writer that took its number earlier would. */
const entryAt = (stream: string, seq: number, action: string) => ({
  _id: streamKey(stream, seq),
  seq,
  timestamp: new Date(),
  projectId: w.projectId,
  environmentId: w.environmentId,
  environment: "production",
  rendering: null,
  user: { id: "u", email: "e" },
  action,
  via: "api" as const,
  collection: null,
  recordId: null,
  runId: null,
  details: {},
});

describe("tail-safety: holes and tombstones", () => {
  it("waits for a hole that fills within the grace, and returns the entry in order", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const start = await c.get(base() + qs({ limit: 1000 }));
    const cursor = start.body.nextCursor;
    // A slow writer: takes a number, inserts it 80 ms later; a fast one writes after it.
    const stream = activityStream(w.environmentId);
    const slowSeq = await server.deps.store.counters.next(stream);
    const fast = await act(w, { action: "fast" });
    const slowInsert = new Promise<void>((r) => setTimeout(r, 80)).then(() => db.insertActivityEntries([entryAt(stream, slowSeq, "slow")]));
    const page = await c.get(base() + qs({ limit: 1000, cursor }));
    await slowInsert;
    expect(page.body.activityLogs.map((e: any) => e.action)).toEqual(["slow", "fast"]);
    expect(idsOf(page.body.activityLogs)).toEqual([slowSeq, fast]);
    await db.removeActivityEntries([streamKey(stream, slowSeq), streamKey(stream, fast)]);
    // (deleting entries is test cleanup only; it never happens in the service)
  });

  it("tombstones a hole left longer than the grace; the late writer collides and re-takes a number", async () => {
    const c = apiClient(server.gateway, w.apiToken);
    const start = await c.get(base() + qs({ limit: 1000 }));
    const stream = activityStream(w.environmentId);
    const lost = await server.deps.store.counters.next(stream); // a writer that stalls (or crashed)
    const after = await act(w, { action: "after-hole" });
    const t = Date.now();
    const page = await c.get(base() + qs({ limit: 1000, cursor: start.body.nextCursor }));
    expect(Date.now() - t).toBeGreaterThanOrEqual(150); // waited the grace
    expect(idsOf(page.body.activityLogs)).toEqual([after]);
    const tomb = await db.activityLogs.findOne({ _id: streamKey(stream, lost) });
    expect(tomb).toMatchObject({ _id: streamKey(stream, lost), seq: lost, tomb: true, environmentId: null });
    // The stalled writer's insert now collides …
    const late = await db.insertActivityEntries([entryAt(stream, lost, "late")]).then(
      () => null,
      (err) => err,
    );
    expect(isDuplicateKey(late)).toBe(true);
    // … and the writer's retry takes a new number, after the consumer's position.
    const retried = await act(w, { action: "late" });
    expect(retried).toBeGreaterThan(after);
    const next = await c.get(base() + qs({ limit: 1000, cursor: page.body.nextCursor }));
    expect(next.body.activityLogs.map((e: any) => e.action)).toEqual(["late"]);
    // Tombstones never appear, not even in the NDJSON export or desc.
    const all = await fetch(`${server.baseUrl}${base()}`, { headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" } });
    expect((await all.text()).includes(`"id":"${lost}"`)).toBe(false);
    const desc = await c.get(base() + qs({ order: "desc", limit: 1000 }));
    expect(idsOf(desc.body.activityLogs)).not.toContain(lost);
    // The watermark is shared in the database.
    const wm = await db.counters.findOne({ _id: watermarkId(stream) });
    expect(wm!.seq).toBeGreaterThanOrEqual(retried);
    await db.removeActivityEntries([streamKey(stream, after), streamKey(stream, retried)]);
  });
});
