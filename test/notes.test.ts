// Public API: notes — create / get / list / update / delete / reply, scoping, sanitizing,
// activity entries, limits and body errors.
import { randomUUID } from "node:crypto";
import { storeFixtures, type StoreFixtures } from "../src/store/index.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NoteService } from "../gen/runhook/v1/note_pb.js";
import { apiClient, qs } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { addEnvironment, createWorld, type World } from "../fixtures/world.js";

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

describe("notes", () => {
  it("creates a note with its first message, authored by the token's admin, and logs it", async () => {
    const r = await api().post(notes(), { collection: "orders", recordId: "r1", title: "Check", content: "<p>Looks <b>odd</b></p>", ignored: 1 });
    expect(r.status).toBe(201);
    const n = r.body;
    expect(n).toMatchObject({ collection: "orders", recordId: "r1", title: "Check", user: { id: w.admin._id, email: w.admin.email } });
    expect(n.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(n.messages).toHaveLength(1);
    expect(n.messages[0]).toMatchObject({ content: "<p>Looks <b>odd</b></p>", user: { id: w.admin._id } });
    expect(n.createdAt).toMatch(/Z$/);
    expect(n).not.toHaveProperty("archivedAt");
    const got = await api().get(`${notes()}/${n.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(n);
    const log = await db.activityLogs.findOne({ environmentId: w.environmentId, action: "note.created", "details.noteId": n.id });
    expect(log).toMatchObject({
      projectId: w.projectId,
      environmentId: w.environmentId,
      via: "api",
      user: { id: w.admin._id, email: w.admin.email },
      collection: "orders",
      recordId: "r1",
    });
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
      [[1, 2], /object/],
    ];
    for (const [body, msg] of cases) {
      const r = await api().post(notes(), body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body).toEqual({ code: "invalid_argument", error: expect.stringMatching(msg) });
    }
    const bad = await api().call("POST", notes(), { rawBody: "{not json" });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: "invalid_argument", error: expect.any(String) });
    // A title of exactly 200 characters ("a < b" is text, not a tag), a 1024-character record id and 64 KiB of content are fine.
    await create({ title: "a < b ".padEnd(200, "t"), recordId: "r".repeat(1024), content: "y".repeat(64 * 1024) });
  });

  it("answers 413 for a body over the limit", async () => {
    const r = await api().post(notes(), { collection: "orders", recordId: "r1", content: "z".repeat(300 * 1024) });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ code: "resource_exhausted", error: expect.stringContaining("larger") });
  });

  it("updates title and archived (archivedAt set and cleared), logging note.updated", async () => {
    const n = await create({ title: "old" });
    const r1 = await api().patch(`${notes()}/${n.id}`, { title: "new", archived: true });
    expect(r1.status).toBe(200);
    expect(r1.body).toMatchObject({ id: n.id, title: "new", archivedAt: expect.stringMatching(/Z$/) });
    expect(Date.parse(r1.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(n.updatedAt));
    const r2 = await api().patch(`${notes()}/${n.id}`, { archived: false });
    expect(r2.body.title).toBe("new");
    expect(r2.body).not.toHaveProperty("archivedAt");
    expect(await db.activityLogs.countDocuments({ environmentId: w.environmentId, action: "note.updated", "details.noteId": n.id })).toBe(2);
    expect((await api().patch(`${notes()}/${n.id}`, { archived: "yes" })).status).toBe(400);
    expect((await api().patch(`${notes()}/${n.id}`, { title: "t".repeat(501) })).status).toBe(400);
  });

  it("adds messages (sanitized, 201) and logs note.message.created", async () => {
    const n = await create({});
    const r = await api().post(`${notes()}/${n.id}/messages`, { content: '<p onclick="x">reply</p><script>1</script>' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      id: expect.any(String),
      content: "<p>reply</p>",
      user: { id: w.admin._id, email: w.admin.email },
      createdAt: expect.any(String),
    });
    const got = await api().get(`${notes()}/${n.id}`);
    expect(got.body.messages.map((m: any) => m.content)).toEqual(["<p>hello</p>", "<p>reply</p>"]);
    expect(await db.activityLogs.findOne({ environmentId: w.environmentId, action: "note.message.created", "details.messageId": r.body.id })).toMatchObject({
      via: "api",
      recordId: "r1",
    });
    expect((await api().post(`${notes()}/${n.id}/messages`, {})).status).toBe(400);
    expect((await api().post(`${notes()}/${randomUUID()}/messages`, { content: "x" })).status).toBe(404);
  });

  it("deletes (204, empty body); afterwards 404; logs note.deleted", async () => {
    const n = await create({});
    const res = await fetch(`${server.baseUrl}${notes()}/${n.id}`, { method: "DELETE", headers: { authorization: `Bearer ${w.apiToken}` } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await api().get(`${notes()}/${n.id}`)).status).toBe(404);
    expect((await api().del(`${notes()}/${n.id}`)).status).toBe(404);
    expect((await api().patch(`${notes()}/${n.id}`, { title: "x" })).status).toBe(404);
    expect(await db.activityLogs.countDocuments({ environmentId: w.environmentId, action: "note.deleted", "details.noteId": n.id })).toBe(1);
  });

  it("never shows a note of another environment or project", async () => {
    const n = await create({});
    const staging = `/v1/project/${w.projectName}/environment/staging/notes`;
    const c = apiClient(server.gateway, stagingToken);
    expect((await c.get(`${staging}/${n.id}`)).status).toBe(404);
    expect((await c.patch(`${staging}/${n.id}`, { title: "x" })).status).toBe(404);
    expect((await c.del(`${staging}/${n.id}`)).status).toBe(404);
    expect((await c.post(`${staging}/${n.id}/messages`, { content: "x" })).status).toBe(404);
    expect((await c.get(staging)).body.notes).toEqual([]);
    // Another project's token: 403; another project's note id in this project's path: 404.
    const o = apiClient(server.gateway, other.apiToken);
    expect((await o.get(`${notes()}/${n.id}`)).status).toBe(403);
    const on = await o.post(`/v1/project/${other.projectName}/environment/production/notes`, { collection: "orders", recordId: "r1", content: "x" });
    expect(on.status).toBe(201);
    expect((await api().get(`${notes()}/${on.body.id}`)).status).toBe(404);
    expect((await api().get(`${notes()}/not-a-uuid`)).status).toBe(404);
    expect((await api().get(`/v1/project/${w.projectName}/environment/nope/notes`)).status).toBe(404);
    expect((await apiClient(server.gateway).get(notes())).status).toBe(401);
    // Still intact.
    expect((await api().get(`${notes()}/${n.id}`)).body.title).toBe(n.title);
  });

  it("lists with filters, paging and from/to", async () => {
    const fresh = await createWorld(server);
    const c = apiClient(server.gateway, fresh.apiToken);
    const base = `/v1/project/${fresh.projectName}/environment/production/notes`;
    const made: any[] = [];
    for (const [recordId, archived] of [
      ["r1", false],
      ["r2", true],
      ["r1", true],
      ["r3", false],
      ["r1", false],
    ] as const) {
      const r = await c.post(base, { collection: "orders", recordId, content: `<p>${recordId}</p>` });
      made.push(r.body);
      if (archived) await c.patch(`${base}/${r.body.id}`, { archived: true });
    }
    const listAll = async (params: Record<string, string | number | undefined>) => {
      const out: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const r = await c.get(base + qs({ ...params, cursor }));
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        out.push(...r.body.notes.map((n: any) => n.id));
        if (!r.body.hasMore) {
          if ((params.order ?? "asc") === "asc") expect(r.body.nextCursor).toBeTypeOf("string");
          else expect(r.body).not.toHaveProperty("nextCursor");
          return out;
        }
        cursor = r.body.nextCursor;
      }
    };
    const ids = made.map((n) => n.id);
    expect(await listAll({ limit: 2 })).toEqual(ids);
    expect(await listAll({ limit: 2, order: "desc" })).toEqual([...ids].reverse());
    expect(await listAll({ recordId: "r1", limit: 1 })).toEqual([ids[0], ids[2], ids[4]]);
    expect(await listAll({ archived: "true" })).toEqual([ids[1], ids[2]]);
    expect(await listAll({ archived: "false", collection: "orders" })).toEqual([ids[0], ids[3], ids[4]]);
    expect(await listAll({ userId: fresh.admin._id })).toEqual(ids);
    expect(await listAll({ userId: fresh.user._id })).toEqual([]);
    expect(await listAll({ collection: "customers" })).toEqual([]);
    expect(await listAll({ from: made[2].createdAt })).toEqual(ids.slice(2));
    expect(await listAll({ to: made[2].createdAt })).toEqual(ids.slice(0, 2));
    const p1 = await c.get(base + qs({ limit: 2, recordId: "r1" }));
    expect((await c.get(base + qs({ limit: 2, recordId: "r3", cursor: p1.body.nextCursor }))).status).toBe(400);
    for (const bad of ["archived=maybe", "limit=abc", "order=up", "from=notatime", "status=x"]) {
      const r = await c.get(`${base}?${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.body.code).toBe("invalid_argument");
    }
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
  });
});
