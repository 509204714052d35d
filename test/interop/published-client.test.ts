// Interop: a client generated from the PUBLISHED document (openapi/forest-public-api-1.38.0.json)
// works unchanged against runhook. openapi-typescript (pinned devDependency) generates the types
// into a temporary directory; test/interop/published/client.ts, a consumer written against them
// with openapi-fetch, must type-check with them (tsc, strict), then reads the three lists of a
// server with the demo world, its workflow run on every record and notes with replies
// (test/helpers/published-world.ts): each list whole, page by page by `createdAt.lt`, and
// filtered. Every filtered answer must be exactly the whole list's items that pass the filter,
// in the same order, and hold what the world was given.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUBLISHED_DOCUMENT, type PublishedWorld, seedPublishedWorld } from "../helpers/published-world.js";
import { ROOT, startServer, type TestServer } from "../helpers/server.js";

const exec = promisify(execFile);
const CLIENT_DIR = join(ROOT, "test/interop/published");
const CLIENT = join(CLIENT_DIR, "client.ts");
const PAGE_SIZE = 2;
/** A published time: RFC 3339, UTC, to the microsecond. */
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

// What the client's readings hold, as far as this test reads them (client.ts has the generated types).
interface Item {
  id: string | number;
  createdAt: string;
  action?: string;
  type?: string;
  resource?: string;
  initiator?: string;
  recordId?: string;
  recordIds?: string[];
  title?: string;
  archivedAt?: string;
  user?: { email: string; id: number };
  workflow?: { name: string; runId: string };
  newValue?: Record<string, unknown>;
  messages?: unknown[];
}
interface Whole {
  hasMore: boolean;
  parameters: Record<string, unknown>;
  data: Item[];
}
interface Pages {
  pages: number;
  items: Item[];
}
interface Readings {
  activity: { whole: Whole; paged: Pages; createNote: Pages; onRecord: Pages; byUser: Pages; triggeredSinceMinute: Whole };
  admin: { whole: Whole; paged: Pages; teamsAdded: Pages; initial: Pages };
  notes: { whole: Whole; paged: Pages; onRecord: Pages; archived: Pages };
  unknownProject: { status: number; code: string; message: string } | "answered";
}
interface ClientModule {
  readLists(
    t: { baseUrl: string; token: string; projectName: string; environmentName: string },
    o: { pageSize: number; recordId: string; userEmail: string; noteAuthor: string; since: string },
  ): Promise<Readings>;
}

const ids = (items: Item[]) => items.map((i) => i.id);

/** The whole list's items, newest first, each createdAt a published time and later than the next. */
function expectNewestFirst(items: Item[]) {
  for (const i of items) expect(i.createdAt).toMatch(TIME);
  for (let k = 1; k < items.length; k++)
    expect(items[k - 1]!.createdAt > items[k]!.createdAt, `${items[k - 1]!.createdAt} after ${items[k]!.createdAt}`).toBe(true);
}

/** The paged reading is the whole list, in as many pages as PAGE_SIZE makes. */
function expectPagedWhole(paged: Pages, whole: Whole) {
  expect(whole.hasMore).toBe(false);
  expect(ids(paged.items)).toEqual(ids(whole.data));
  expect(paged.pages).toBe(Math.max(1, Math.ceil(whole.data.length / PAGE_SIZE)));
}

/** A filtered reading is exactly the whole list's items that pass `keep`, and not empty. */
function expectFiltered(filtered: Pages, whole: Whole, keep: (i: Item) => boolean) {
  const expected = whole.data.filter(keep);
  expect(expected.length).toBeGreaterThan(0);
  expect(ids(filtered.items)).toEqual(ids(expected));
}

/** The minute a time is in, as the document's example writes it (`2024-06-04T09:21`). */
const minuteOf = (d: Date) => d.toISOString().slice(0, 16);

describe("a client generated from the published document, unchanged", () => {
  let dir: string;
  let server: TestServer;
  let world: PublishedWorld;
  let since: Date;
  let readings: Readings;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "runhook-published-client-"));
    server = await startServer();
    since = new Date();
    world = await seedPublishedWorld(server);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("is generated from the document, and the client type-checks against it", async () => {
    const types = join(dir, "forest-public-api.ts");
    await exec(process.execPath, [join(ROOT, "node_modules/openapi-typescript/bin/cli.js"), PUBLISHED_DOCUMENT, "--output", types], { cwd: ROOT });
    const tsconfig = join(dir, "tsconfig.json");
    writeFileSync(
      tsconfig,
      JSON.stringify({ extends: join(CLIENT_DIR, "tsconfig.json"), compilerOptions: { paths: { "forest-public-api": [types] } }, files: [CLIENT] }),
    );
    const tsc = await exec(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", tsconfig], { cwd: ROOT }).then(
      () => ({ ok: true, output: "" }),
      (err: { stdout?: string; stderr?: string }) => ({ ok: false, output: `${err.stdout ?? ""}${err.stderr ?? ""}` }),
    );
    expect(tsc.output).toBe("");
    expect(tsc.ok).toBe(true);
  }, 120_000);

  it("reads the three lists of the demo world", async () => {
    // By its path: the repository's typecheck has no generated types to follow it with.
    const client = (await import(pathToFileURL(CLIENT).href)) as ClientModule;
    readings = await client.readLists(
      { baseUrl: server.baseUrl, token: world.apiToken, projectName: world.projectName, environmentName: world.environmentName },
      { pageSize: PAGE_SIZE, recordId: world.recordIds[0]!, userEmail: world.runUser, noteAuthor: world.noteAuthor, since: minuteOf(since) },
    );
    expect(readings.unknownProject).not.toBe("answered");
    const refused = readings.unknownProject as Exclude<Readings["unknownProject"], "answered">;
    expect([403, 404]).toContain(refused.status);
    expect(refused.code).toMatch(/^[a-z_]+$/);
    expect(refused.message).not.toBe("");
  });

  it("activity logs: page by page as whole, newest first; filters by action, record and user; createdAt.gte to the minute", () => {
    const a = readings.activity;
    expectNewestFirst(a.whole.data);
    expectPagedWhole(a.paged, a.whole);
    expect(a.paged.pages).toBeGreaterThanOrEqual(5);
    expectFiltered(a.createNote, a.whole, (i) => i.action === "createNote");
    expect(a.createNote.items.length).toBeGreaterThanOrEqual(world.notes.length);
    expectFiltered(a.onRecord, a.whole, (i) => i.recordIds?.includes(world.recordIds[0]!) ?? false);
    expectFiltered(a.byUser, a.whole, (i) => i.user?.email === world.runUser);
    // Each run: triggered by its user, completed; the workflow named with the run.
    for (const action of ["triggerWorkflow", "completeWorkflow"]) {
      const entries = a.whole.data.filter((i) => i.action === action);
      expect(entries.map((i) => i.workflow?.runId).sort(), action).toEqual([...world.runIds].sort());
      expect(new Set(entries.map((i) => i.workflow?.name)), action).toEqual(new Set(["process-order"]));
    }
    const recent = a.triggeredSinceMinute;
    expect(recent.data.map((i) => i.workflow?.runId).sort()).toEqual([...world.runIds].sort());
    // The minute form the document allows comes back as the date-time the document types it as.
    expect(recent.parameters["createdAt.gte"]).toBe(`${minuteOf(since)}:00.000000Z`);
  });

  it("admin logs: page by page as whole, newest first; filters by resource, type and initiator", () => {
    const a = readings.admin;
    expectNewestFirst(a.whole.data);
    expectPagedWhole(a.paged, a.whole);
    expect(a.paged.pages).toBeGreaterThanOrEqual(5);
    expectFiltered(a.teamsAdded, a.whole, (i) => i.resource === "team" && i.type === "add");
    expect(a.teamsAdded.items.map((i) => i.newValue)).toContainEqual({ name: "operations" });
    expectFiltered(a.initial, a.whole, (i) => i.type === "initial" && i.initiator === "administrator");
  });

  it("notes: the world's notes with their replies, by id; page by page by author; filters by record and archivedAt", () => {
    const n = readings.notes;
    expect(n.whole.hasMore).toBe(false);
    const numbers = ids(n.whole.data) as number[];
    expect(numbers).toEqual([...numbers].sort((x, y) => y - x)); // the document's order: by id, newest first
    for (const made of world.notes) {
      const listed = n.whole.data.find((i) => i.id === made.id);
      expect(listed, `note ${made.id}`).toMatchObject({ title: made.title, recordId: made.recordId, user: { email: world.noteAuthor } });
      expect(listed!.messages).toHaveLength(1 + made.replies);
      expect(listed!.archivedAt !== undefined, `note ${made.id} archived`).toBe(made.archived);
    }
    const mine = [...world.notes].reverse();
    expect(ids(n.paged.items)).toEqual(mine.map((m) => m.id));
    expect(n.paged.pages).toBe(Math.ceil(world.notes.length / PAGE_SIZE));
    expect(ids(n.onRecord.items)).toEqual(mine.filter((m) => m.recordId === world.recordIds[0]).map((m) => m.id));
    expect(ids(n.archived.items)).toEqual(mine.filter((m) => m.archived).map((m) => m.id));
  });
});
