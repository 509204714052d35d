// Public API: notes — create / get / list / update / delete / reply in the published note shape,
// scoping, sanitizing, activity entries, the published filters, limits and body errors.
import { randomUUID } from "node:crypto";
import { storeFixtures, type StoreFixtures } from "../src/store/index.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoteService } from "../gen/runhook/v1/note_pb.js";
import { sleep } from "../src/lib/sleep.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { queueRun, waitForRun } from "./helpers/runs.js";
import { adminClient } from "./helpers/webhook.js";
import { addEnvironment, createWorld, type UserRef, type World } from "../fixtures/world.js";

let server: TestServer;
let db: StoreFixtures;
let w: World;
let other: World;
let stagingToken: string;
const notes = () => `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;
const api = () => apiClient(server.gateway, w.apiToken);

beforeAll(async () => {
  server = await startServer();
  db = storeFixtures(server.deps.store);
  w = await createWorld(server);
  other = await createWorld(server);
  await addEnvironment(server, w, "staging");
  stagingToken = w.apiToken;
});
afterAll(async () => {
  await server?.stop();
});

async function create(body: Record<string, unknown>) {
  const r = await api().post(notes(), { collection: w.collection, recordId: "r1", content: "<p>hello</p>", ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

/** A user as the published items show it: the user's number in its organization as the id. */
async function publishedUser(u: UserRef) {
  const doc = await db.users.findOne({ _id: u._id });
  expect(doc?.number).toBeTypeOf("number");
  return { object: "user", id: doc!.number!, username: doc!.name, email: u.email };
}

/** The stored id (UUID) of the note with this published id, which the activity log names. */
async function storedId(n: { id: number }): Promise<string> {
  const doc = await db.notes.findOne({ seq: n.id });
  expect(doc).not.toBeNull();
  return doc!._id;
}

const invalid = (msg: RegExp) => ({ code: "invalid_argument", message: expect.stringMatching(msg), error: expect.stringMatching(msg) });

describe("notes", () => {
  it("creates a note with its first message in the published note shape, authored by the token's admin, and logs it", async () => {
    const r = await api().post(notes(), { collection: "orders", recordId: "r1", title: "Check", content: "<p>Looks <b>odd</b></p>", ignored: 1 });
    expect(r.status).toBe(201);
    const n = r.body;
    const user = await publishedUser(w.admin);
    const time = expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    expect(n).toEqual({
      object: "note",
      id: expect.any(Number),
      title: "Check",
      recordId: "r1",
      createdAt: time,
      updatedAt: n.createdAt,
      user,
      environment: { object: "environment", name: w.environmentName },
      team: { object: "team", name: "(no team)" },
      collection: { object: "collection", name: "orders" },
      messages: [{ object: "note-message", content: "<p>Looks <b>odd</b></p>", createdAt: n.createdAt, user }],
    });
    // The id is the note's number (a positive integer, never reused).
    expect(Number.isSafeInteger(n.id) && n.id > 0).toBe(true);
    const got = await api().get(`${notes()}/${n.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(n);
    const log = await db.activityLogs.findOne({ environmentId: w.environmentId, action: "note.created", "details.noteId": await storedId(n) });
    expect(log).toMatchObject({
      projectId: w.projectId,
      environmentId: w.environmentId,
      via: "api",
      user: { id: w.admin._id, email: w.admin.email },
      collection: "orders",
      recordId: "r1",
    });
  });

  it("takes the collection as collectionName (the published field) or collection", async () => {
    const a = await create({ collection: undefined, collectionName: "orders", recordId: "cn" });
    expect(a.collection).toEqual({ object: "collection", name: "orders" });
    const b = await create({ recordId: "cn" });
    expect(b.collection).toEqual({ object: "collection", name: "orders" });
    expect(b.id).toBeGreaterThan(a.id);
    const unknown = await api().post(notes(), { collectionName: "nope", recordId: "r1", content: "x" });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual(invalid(/collection/));
  });

  it.each([
    ["<p>a</p><script>alert(1)</script>", "<p>a</p>"],
    ['<p onclick="evil()" onmouseover="x">b</p>', "<p>b</p>"],
    ['<a href="javascript:alert(1)">c</a>', '<a rel="noopener noreferrer nofollow">c</a>'],
    ['<a href="https://example.com/x" onclick="y">d</a>', '<a href="https://example.com/x" rel="noopener noreferrer nofollow">d</a>'],
    ['<img src=x onerror="alert(1)"><iframe src="https://x"></iframe>e', "e"],
    ['<a href="mailto:a@example.com">m</a>', '<a href="mailto:a@example.com" rel="noopener noreferrer nofollow">m</a>'],
  ])("sanitizes %s", async (content, expected) => {
    const n = await create({ content });
    expect(n.messages[0].content).toBe(expected);
  });

  it("rejects bad bodies with 400 and the error body", async () => {
    const cases: [unknown, RegExp][] = [
      [{ recordId: "r1", content: "x" }, /collection/],
      [{ collection: "orders", content: "x" }, /recordId/],
      [{ collection: "orders", recordId: "r1" }, /content/],
      [{ collection: "orders", recordId: "r1", content: "<script>x</script>" }, /content/],
      [{ collection: "nope", recordId: "r1", content: "x" }, /collection/],
      [{ collection: "orders", recordId: "r1", content: "x", title: "t".repeat(201) }, /title is longer than 200/],
      // Titles are plain text: no markup, no control characters (a terminal or a UI shows them as they are).
      [{ collection: "orders", recordId: "r1", content: "x", title: "<img src=x onerror=alert(1)>" }, /title must be plain text/],
      [{ collection: "orders", recordId: "r1", content: "x", title: "a\u001b]52;c;evil\u0007" }, /title must be plain text/],
      [{ collection: "orders", recordId: "r1", content: "x", title: "line\u2028break" }, /title must be plain text/],
      [{ collection: "orders", recordId: "r1", content: "x", title: "invoice \u202egpj.exe" }, /title must be plain text/],
      // recordId follows the webhook's record_id rule.
      [{ collection: "orders", recordId: "r".repeat(1025), content: "x" }, /recordId is longer than 1024/],
      [{ collection: "orders", recordId: "\ud800", content: "x" }, /recordId must be valid Unicode/],
      [{ collection: "orders", recordId: "r1", content: "x".repeat(64 * 1024 + 1) }, /content/],
      [{ collection: 5, recordId: "r1", content: "x" }, /collection/],
      [{ collectionName: 5, recordId: "r1", content: "x" }, /collectionName/],
      [[1, 2], /object/],
    ];
    for (const [body, msg] of cases) {
      const r = await api().post(notes(), body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body).toEqual(invalid(msg));
    }
    const bad = await api().call("POST", notes(), { rawBody: "{not json" });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: "invalid_argument", message: expect.any(String), error: expect.any(String) });
    // A title of exactly 200 characters ("a < b" is text, not a tag), a 1024-character record id and 64 KiB of content are fine.
    await create({ title: "a < b ".padEnd(200, "t"), recordId: "r".repeat(1024), content: "y".repeat(64 * 1024) });
  });

  it("answers 413 for a body over the limit", async () => {
    const r = await api().post(notes(), { collection: "orders", recordId: "r1", content: "z".repeat(300 * 1024) });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: "resource_exhausted", message: expect.stringContaining("larger"), error: expect.stringContaining("larger") });
  });

  it("updates title and archived (archivedAt set and cleared), answering the published note, logging note.updated", async () => {
    const n = await create({ title: "old" });
    const r1 = await api().patch(`${notes()}/${n.id}`, { title: "new", archived: true });
    expect(r1.status).toBe(200);
    expect(r1.body).toEqual({ ...n, title: "new", updatedAt: expect.any(String), archivedAt: expect.stringMatching(/\.\d{6}Z$/) });
    expect(Date.parse(r1.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(n.updatedAt));
    const r2 = await api().patch(`${notes()}/${n.id}`, { archived: false });
    expect(r2.body).toMatchObject({ object: "note", id: n.id, title: "new" });
    expect(r2.body).not.toHaveProperty("archivedAt");
    expect(await db.activityLogs.countDocuments({ environmentId: w.environmentId, action: "note.updated", "details.noteId": await storedId(n) })).toBe(2);
    expect((await api().patch(`${notes()}/${n.id}`, { archived: "yes" })).status).toBe(400);
    expect((await api().patch(`${notes()}/${n.id}`, { title: "t".repeat(501) })).status).toBe(400);
  });

  it("adds messages (sanitized, 201) answering the published note-message, and logs note.message.created", async () => {
    const n = await create({});
    const r = await api().post(`${notes()}/${n.id}/messages`, { content: '<p onclick="x">reply</p><script>1</script>' });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      object: "note-message",
      content: "<p>reply</p>",
      createdAt: expect.stringMatching(/\.\d{6}Z$/),
      user: await publishedUser(w.admin),
    });
    const got = await api().get(`${notes()}/${n.id}`);
    expect(got.body.messages.map((m: any) => m.content)).toEqual(["<p>hello</p>", "<p>reply</p>"]);
    expect(got.body.messages[1]).toEqual(r.body);
    expect(got.body.updatedAt).toBe(r.body.createdAt);
    const stored = await db.notes.findOne({ seq: n.id });
    expect(
      await db.activityLogs.findOne({ environmentId: w.environmentId, action: "note.message.created", "details.messageId": stored!.messages[1]!.id }),
    ).toMatchObject({ via: "api", recordId: "r1", details: { noteId: stored!._id } });
    expect((await api().post(`${notes()}/${n.id}/messages`, {})).status).toBe(400);
    expect((await api().post(`${notes()}/${n.id + 1_000_000}/messages`, { content: "x" })).status).toBe(404);
  });

  it("deletes (204, empty body); afterwards 404; logs note.deleted", async () => {
    const n = await create({});
    const uuid = await storedId(n);
    const res = await fetch(`${server.baseUrl}${notes()}/${n.id}`, { method: "DELETE", headers: { authorization: `Bearer ${w.apiToken}` } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await api().get(`${notes()}/${n.id}`)).status).toBe(404);
    expect((await api().del(`${notes()}/${n.id}`)).status).toBe(404);
    expect((await api().patch(`${notes()}/${n.id}`, { title: "x" })).status).toBe(404);
    expect((await api().post(`${notes()}/${n.id}/messages`, { content: "x" })).status).toBe(404);
    expect(await db.activityLogs.countDocuments({ environmentId: w.environmentId, action: "note.deleted", "details.noteId": uuid })).toBe(1);
    // The next note gets a new number: a deleted note's is never reused.
    expect((await create({})).id).toBeGreaterThan(n.id);
  });

  it("takes {noteId} as the note's number only: its UUID, a non-number or an unknown number is 404", async () => {
    const n = await create({});
    const uuid = await storedId(n);
    for (const id of [uuid, uuid.toUpperCase(), randomUUID(), "not-a-uuid", "0", "-1", "1.5", "1e3", `0${n.id}`, "9".repeat(16), "99999999999999"]) {
      const path = `${notes()}/${encodeURIComponent(id)}`;
      const got = await api().get(path);
      expect(got.status, id).toBe(404);
      expect(got.body).toMatchObject({ code: "not_found", message: expect.any(String) });
      expect((await api().patch(path, { title: "x" })).status, id).toBe(404);
      expect((await api().post(`${path}/messages`, { content: "x" })).status, id).toBe(404);
      expect((await api().del(path)).status, id).toBe(404);
    }
    // Still intact.
    expect((await api().get(`${notes()}/${n.id}`)).body).toEqual(n);
  });

  it("never shows a note of another environment or project", async () => {
    const n = await create({});
    const staging = `/v1/project/${w.projectName}/environment/staging/notes`;
    const c = apiClient(server.gateway, stagingToken);
    expect((await c.get(`${staging}/${n.id}`)).status).toBe(404);
    expect((await c.patch(`${staging}/${n.id}`, { title: "x" })).status).toBe(404);
    expect((await c.del(`${staging}/${n.id}`)).status).toBe(404);
    expect((await c.post(`${staging}/${n.id}/messages`, { content: "x" })).status).toBe(404);
    const stagingList = await c.get(staging);
    expect(stagingList.status).toBe(200);
    expect(stagingList.body.data).toEqual([]);
    expect((await c.get(staging + qs({ recordId: "r1", order: "asc" }))).body.data).toEqual([]);
    // Another project's token: 403; another project's note number in this project's path: 404.
    const o = apiClient(server.gateway, other.apiToken);
    expect((await o.get(`${notes()}/${n.id}`)).status).toBe(403);
    expect((await o.get(notes())).status).toBe(403);
    expect((await o.patch(`${notes()}/${n.id}`, { title: "x" })).status).toBe(403);
    expect((await o.del(`${notes()}/${n.id}`)).status).toBe(403);
    const otherNotes = `/v1/project/${other.projectName}/environment/production/notes`;
    const on = await o.post(otherNotes, { collection: "orders", recordId: "r1", content: "x" });
    expect(on.status).toBe(201);
    expect((await api().get(`${notes()}/${on.body.id}`)).status).toBe(404);
    expect((await api().patch(`${notes()}/${on.body.id}`, { title: "x" })).status).toBe(404);
    expect((await api().post(`${notes()}/${on.body.id}/messages`, { content: "x" })).status).toBe(404);
    expect((await api().del(`${notes()}/${on.body.id}`)).status).toBe(404);
    expect((await api().get(otherNotes)).status).toBe(403);
    const mine = await api().get(notes() + qs({ limit: 100 }));
    expect(mine.body.data.map((x: any) => x.id)).not.toContain(on.body.id);
    expect((await api().get(`/v1/project/${w.projectName}/environment/nope/notes`)).status).toBe(404);
    expect((await apiClient(server.gateway).get(notes())).status).toBe(401);
    // Still intact, both.
    expect((await api().get(`${notes()}/${n.id}`)).body.title).toBe(n.title);
    expect((await o.get(`${otherNotes}/${on.body.id}`)).body).toEqual(on.body);
  });

  it("is the same implementation over Connect/gRPC (via grpc in the activity log)", async () => {
    const client = createClient(NoteService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const res = await client.createNote(
      { scope: { projectName: w.projectName, environmentName: w.environmentName }, collection: "orders", recordId: "r2", content: "<p>via grpc</p>" },
      { headers: { authorization: `Bearer ${w.apiToken}` } },
    );
    expect(res.note?.user?.id).toBe(w.admin._id);
    expect(await db.activityLogs.findOne({ environmentId: w.environmentId, action: "note.created", "details.noteId": res.note!.id })).toMatchObject({
      via: "grpc",
    });
    // The note's number is the id /v1 gives it.
    expect((await api().get(`${notes()}/${res.note!.number}`)).body).toMatchObject({ object: "note", id: Number(res.note!.number), recordId: "r2" });
  });
});

/** Waits until the clock has moved on, so that the next write's millisecond time is later than the last one's. */
async function nextMillisecond(): Promise<void> {
  await sleep(3);
}

describe("notes list", () => {
  let fresh: World;
  let c: ReturnType<typeof apiClient>;
  let base: string;
  /** The notes, in the order written: n[0]…n[5] (see beforeAll), as last answered. */
  const n: any[] = [];
  let ids: number[];

  // Six notes: API notes by the admin (no team), one by a run (the run's user, team "ops"), on two
  // collections; two archived, one replied to last.
  beforeAll(async () => {
    fresh = await createWorld(server, { steps: [{ type: "add_note", title: "By run", content: "<p>run</p>" }] });
    await adminClient(server.baseUrl, fresh.ownerToken).createCollection({ environmentId: fresh.environmentId, name: "customers", primaryKey: ["id"] });
    c = apiClient(server.gateway, fresh.apiToken);
    base = `/v1/project/${fresh.projectName}/environment/production/notes`;
    const post = async (collectionName: string, recordId: string) => {
      await nextMillisecond();
      const r = await c.post(base, { collectionName, recordId, content: `<p>${recordId}</p>` });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      n.push(r.body);
    };
    const archive = async (k: number) => {
      await nextMillisecond();
      n[k] = (await c.patch(`${base}/${n[k].id}`, { archived: true })).body;
    };
    await post("orders", "r1");
    await post("orders", "r2");
    await archive(1);
    await post("orders", "r1");
    await archive(2);
    await post("customers", "r3");
    await nextMillisecond();
    const run = await waitForRun(server.deps.store, (await queueRun(server.deps.store, fresh, "r4"))._id);
    expect(run.state).toBe("SUCCEEDED");
    const runNote = await db.notes.findOne({ _id: run.steps[0]!.output!.noteId as string });
    n.push((await c.get(`${base}/${runNote!.seq}`)).body);
    await post("orders", "r1");
    await nextMillisecond();
    expect((await c.post(`${base}/${n[0].id}/messages`, { content: "later" })).status).toBe(201);
    n[0] = (await c.get(`${base}/${n[0].id}`)).body;
    ids = n.map((x) => x.id);
  });

  /** Every note's id a listing gives, following nextCursor; checks the envelope of each page. */
  async function listAll(params: Record<string, string | number | undefined>): Promise<number[]> {
    const out: number[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const r = await c.get(base + qs({ ...params, cursor }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(
        r.body.nextCursor === undefined ? ["data", "hasMore", "parameters"] : ["data", "hasMore", "nextCursor", "parameters"],
      );
      for (const item of r.body.data) expect(item).toEqual(n.find((x) => x.id === item.id));
      out.push(...r.body.data.map((x: any) => x.id));
      if (!r.body.hasMore) {
        if (params.order === "asc") expect(r.body.nextCursor).toBeTypeOf("string");
        else expect(r.body).not.toHaveProperty("nextCursor");
        return out;
      }
      cursor = r.body.nextCursor;
    }
    throw new Error("too many pages");
  }
  const newestFirst = (...k: number[]) => k.map((i) => ids[i]!).sort((a, b) => b - a);

  it("the run's note is its user's, in its rendering's team; the others have no team", async () => {
    expect(n[4]).toMatchObject({ title: "By run", recordId: "r4", user: await publishedUser(fresh.user), team: { object: "team", name: "ops" } });
    expect(n[0]).toMatchObject({ user: await publishedUser(fresh.admin), team: { object: "team", name: "(no team)" } });
    expect(n[1].archivedAt < n[2].archivedAt).toBe(true);
    expect(n[0].updatedAt > n[5].createdAt).toBe(true);
  });

  it("lists newest first (id descending) by default, pages by limit, and order=asc is the tail", async () => {
    const first = await c.get(base);
    expect(first.body).toEqual({
      hasMore: false,
      parameters: { projectName: fresh.projectName, environmentName: "production", limit: 10 },
      data: [...n].reverse(),
    });
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(await listAll({ limit: 2 })).toEqual([...ids].reverse());
    expect(await listAll({ limit: 4, order: "asc" })).toEqual(ids);
    expect(await listAll({ limit: 1, order: "desc" })).toEqual([...ids].reverse());
    const page = await c.get(base + qs({ limit: 2 }));
    expect(page.body).toMatchObject({ hasMore: true, parameters: { limit: 2 }, nextCursor: expect.any(String) });
  });

  it("filters by userEmail", async () => {
    expect(await listAll({ userEmail: fresh.user.email })).toEqual(newestFirst(4));
    expect(await listAll({ userEmail: fresh.admin.email, limit: 2 })).toEqual(newestFirst(0, 1, 2, 3, 5));
    expect(await listAll({ userEmail: w.admin.email })).toEqual([]);
  });

  it("filters by userId (the user's number)", async () => {
    const user = (await publishedUser(fresh.user)).id;
    const admin = (await publishedUser(fresh.admin)).id;
    expect(await listAll({ userId: user })).toEqual(newestFirst(4));
    expect(await listAll({ userId: admin })).toEqual(newestFirst(0, 1, 2, 3, 5));
    expect(await listAll({ userId: 999_999 })).toEqual([]);
    const r = await c.get(base + qs({ userId: user }));
    expect(r.body.parameters).toEqual({ projectName: fresh.projectName, environmentName: "production", limit: 10, userId: user });
  });

  it("filters by teamName, (no team) naming notes of none", async () => {
    expect(await listAll({ teamName: "ops" })).toEqual(newestFirst(4));
    expect(await listAll({ teamName: "(no team)" })).toEqual(newestFirst(0, 1, 2, 3, 5));
    expect(await listAll({ teamName: "nope" })).toEqual([]);
  });

  it("filters by collectionName", async () => {
    expect(await listAll({ collectionName: "customers" })).toEqual(newestFirst(3));
    expect(await listAll({ collectionName: "orders" })).toEqual(newestFirst(0, 1, 2, 4, 5));
    expect(await listAll({ collectionName: "nope" })).toEqual([]);
  });

  it("filters by recordId", async () => {
    expect(await listAll({ recordId: "r1", limit: 1 })).toEqual(newestFirst(0, 2, 5));
    expect(await listAll({ recordId: "r1", collectionName: "customers" })).toEqual([]);
  });

  it("filters by createdAt.eq|lt|lte|gt|gte", async () => {
    const t = n[2].createdAt;
    expect(await listAll({ "createdAt.eq": t })).toEqual(newestFirst(2));
    expect(await listAll({ "createdAt.gte": t })).toEqual(newestFirst(2, 3, 4, 5));
    expect(await listAll({ "createdAt.gt": t })).toEqual(newestFirst(3, 4, 5));
    expect(await listAll({ "createdAt.lt": t })).toEqual(newestFirst(0, 1));
    expect(await listAll({ "createdAt.lte": t, limit: 1 })).toEqual(newestFirst(0, 1, 2));
    expect(await listAll({ "createdAt.gte": n[1].createdAt, "createdAt.lt": n[4].createdAt })).toEqual(newestFirst(1, 2, 3));
    expect(await listAll({ "createdAt.gt": n[4].createdAt, "createdAt.lt": n[1].createdAt })).toEqual([]);
  });

  it("takes any date-time the document allows: a bound beyond the years runhook compares selects as far as it can", async () => {
    expect(await listAll({ "createdAt.gte": "0001-01-01T00:00" })).toEqual(newestFirst(0, 1, 2, 3, 4, 5));
    expect(await listAll({ "createdAt.lt": "9999-12-31T23:59:59.999999Z" })).toEqual(newestFirst(0, 1, 2, 3, 4, 5));
    expect(await listAll({ "archivedAt.lt": "2999-01-01T00:00" })).toEqual(newestFirst(1, 2));
    expect(await listAll({ "createdAt.gt": "9999-12-31T23:59" })).toEqual([]);
    expect(await listAll({ "updatedAt.lte": "0001-01-01T00:00:00+01:00" })).toEqual([]);
  });

  it("filters by updatedAt.*", async () => {
    // n[0] was replied to after every note was written; n[1] and n[2] changed when archived.
    expect(await listAll({ "updatedAt.gt": n[5].createdAt })).toEqual(newestFirst(0));
    expect(await listAll({ "updatedAt.eq": n[2].updatedAt })).toEqual(newestFirst(2));
    expect(await listAll({ "updatedAt.lt": n[2].createdAt })).toEqual(newestFirst(1));
  });

  it("filters by archivedAt.*: only archived notes have an archiving time", async () => {
    expect(await listAll({ "archivedAt.gte": n[1].archivedAt })).toEqual(newestFirst(1, 2));
    expect(await listAll({ "archivedAt.gt": n[1].archivedAt })).toEqual(newestFirst(2));
    expect(await listAll({ "archivedAt.lte": n[1].archivedAt })).toEqual(newestFirst(1));
    expect(await listAll({ "archivedAt.lt": "2100-01-01T00:00" })).toEqual(newestFirst(1, 2));
  });

  it("binds a cursor to its filters and refuses parameters the document does not have", async () => {
    const p1 = await c.get(base + qs({ limit: 1, recordId: "r1" }));
    expect(p1.body.nextCursor).toBeTypeOf("string");
    expect((await c.get(base + qs({ limit: 1, recordId: "r3", cursor: p1.body.nextCursor }))).status).toBe(400);
    const bad = [
      "limit=abc",
      "limit=0",
      "limit=101",
      "order=up",
      "createdAt.gte=notatime",
      "updatedAt.lt=2024-13-01T00:00",
      "userId=abc",
      "userId=0",
      "archived=true",
      "collection=orders",
      "from=2024-01-01T00:00:00Z",
      "status=x",
    ];
    for (const q of bad) {
      const r = await c.get(`${base}?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body, q).toMatchObject({ code: "invalid_argument", message: expect.any(String) });
    }
  });
});
