// /v1 is the published API (openapi/forest-public-api-1.38.0.json). On a world whose logs hold
// an entry of every action runhook writes, each operation of the document is called without
// parameters, with each query parameter alone (every value its schema gives) and with every
// pair of them; each 200 answer must conform to the document's 200 schema (items included,
// closed objects and enums honoured), echo the request's parameters typed as the document
// types them, list newest first, and hold exactly the items its parameters select, as the
// document describes them. Values the document refuses answer its 4XX schema.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createActionWorld, type ActionWorld } from "./helpers/action-world.js";
import { apiClient, qs } from "./helpers/api.js";
import { OPERATIONS, violations, type PublishedOperation, type PublishedParam } from "./helpers/published.js";
import { startServer, type TestServer } from "./helpers/server.js";

type Item = Record<string, any>;
type Query = Record<string, string>;

let server: TestServer;
let world: ActionWorld;
/** Every item of each operation (its whole listing, one page of the document's largest limit). */
const everything = new Map<string, Item[]>();

const get = (path: string) => apiClient(server.gateway, world.w.apiToken).get(path);

function pathParams(op: PublishedOperation): Record<string, string> {
  const values: Record<string, string> = { projectName: world.w.projectName, environmentName: world.w.environmentName };
  return Object.fromEntries(op.params.filter((p) => p.in === "path").map((p) => [p.name, values[p.name]!]));
}

const urlOf = (op: PublishedOperation, query: Query = {}) =>
  op.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(pathParams(op)[name]!)) + qs(query);

beforeAll(async () => {
  server = await startServer();
  world = await createActionWorld(server);
  for (const op of OPERATIONS) {
    const max = String(op.query.find((p) => p.name === "limit")!.schema.maximum);
    const r = await get(urlOf(op, { limit: max }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.hasMore).toBe(false);
    everything.set(op.operationId, r.body.data);
  }
});

afterAll(async () => {
  await server?.stop();
});

// ---------------------------------------------------------------- what the parameters mean

/** The item's value each query parameter of the document compares with, as its description says. */
const FIELDS: Record<string, (item: Item) => unknown> = {
  userEmail: (i) => i.user?.email,
  userId: (i) => i.user?.id,
  teamName: (i) => i.team?.name,
  collectionName: (i) => i.collection?.name,
  recordId: (i) => i.recordId ?? i.recordIds?.[0],
  action: (i) => i.action,
  type: (i) => i.type,
  initiator: (i) => i.initiator,
  resource: (i) => i.resource,
};

const TIME_PARAM = /^(createdAt|updatedAt|archivedAt)\.(eq|lt|lte|gt|gte)$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?Z?$/;

/** A time as this test writes and reads them (UTC: the answers' RFC 3339, or the document's `YYYY-MM-DDTHH:MM`), in microseconds. */
function micros(v: string): number {
  const m = DATE_TIME.exec(v);
  if (!m) throw new Error(`not a UTC date-time: ${v}`);
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map((x) => Number(x ?? 0)) as number[];
  return Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) * 1000 + Number((m[7] ?? "").padEnd(6, "0"));
}

/** `YYYY-MM-DDTHH:MM`, `minutes` from the minute of `v`. */
function minuteForm(v: string, minutes = 0): string {
  return new Date(Math.floor(micros(v) / 60e6) * 60e3 + minutes * 60e3).toISOString().slice(0, 16);
}

const COMPARE: Record<string, (a: number, b: number) => boolean> = {
  eq: (a, b) => a === b,
  lt: (a, b) => a < b,
  lte: (a, b) => a <= b,
  gt: (a, b) => a > b,
  gte: (a, b) => a >= b,
};

/** Whether the parameter `name` = `value` selects `item`. */
function selects(item: Item, name: string, value: string): boolean {
  if (name === "limit") return true;
  const time = TIME_PARAM.exec(name);
  if (time) return typeof item[time[1]!] === "string" && COMPARE[time[2]!]!(micros(item[time[1]!]), micros(value));
  if (name === "recordId" && Array.isArray(item.recordIds)) return item.recordIds.includes(value);
  const read = FIELDS[name];
  if (!read) throw new Error(`this test has no reading of the published parameter ${name}`);
  const v = read(item);
  return typeof v === "number" ? v === Number(value) : v === value;
}

/** The page the document promises: the items the query selects, newest first (as listed), cut at its limit. */
function promised(op: PublishedOperation, query: Query): { data: Item[]; hasMore: boolean } {
  const selected = everything.get(op.operationId)!.filter((item) => Object.entries(query).every(([k, v]) => selects(item, k, v)));
  const limit = Number(query.limit ?? op.query.find((p) => p.name === "limit")!.schema.default);
  return { data: selected.slice(0, limit), hasMore: selected.length > limit };
}

// ---------------------------------------------------------------- the values tried

const distinct = <T>(xs: T[]) => [...new Set(xs)];
const middle = <T>(xs: T[]) => xs[Math.floor(xs.length / 2)];

/** The valid values of a query parameter: its schema's (enums, bounds), the world's (names, numbers, times) and one nothing has. */
function valuesOf(op: PublishedOperation, p: PublishedParam): string[] {
  const s = p.schema;
  const items = everything.get(op.operationId)!;
  if (Array.isArray(s.enum)) return s.enum;
  if (p.name === "limit") return [s.exclusiveMinimum ? s.minimum + 1 : s.minimum, s.default, s.maximum].map(String);
  const time = TIME_PARAM.exec(p.name);
  if (time) {
    const at = middle(items.map((i) => i[time[1]!]).filter((t): t is string => typeof t === "string"));
    if (!at) throw new Error(`no item of ${op.operationId} has ${time[1]}`);
    return [at, minuteForm(at)];
  }
  const real = distinct(items.map((i) => FIELDS[p.name]?.(i)).filter((v) => v !== undefined && v !== "" && !(typeof v === "number" && v < 1))).slice(0, 3);
  if (real.length === 0) throw new Error(`no item of ${op.operationId} gives a value of ${p.name}`);
  const none = s.type === "integer" ? "999999" : s.format === "email" ? "nobody@example.test" : `no-such-${p.name}`;
  return [...real.map(String), none];
}

/** A value of the parameter `name` that selects `item` (undefined: the item has nothing to select it by). */
function valueSelecting(name: string, item: Item, k: number): string | undefined {
  if (name === "limit") return ["2", "10", "100"][k % 3];
  const time = TIME_PARAM.exec(name);
  if (time) {
    const at = item[time[1]!] as string | undefined;
    if (!at) return undefined;
    const op = time[2]!;
    if (op === "lt") return minuteForm(at, 1);
    if (op === "gt") return minuteForm(at, -1);
    return at;
  }
  const v = FIELDS[name]!(item);
  return v === undefined ? undefined : String(v);
}

// ---------------------------------------------------------------- checking one answer

/** What is wrong with the answer to `query` (empty: it conforms). `source`: an item it must select. */
async function problemsOf(op: PublishedOperation, query: Query, source?: Item): Promise<string[]> {
  const where = `${op.operationId}${qs(query)}`;
  const r = await get(urlOf(op, query));
  if (r.status !== 200) return [`${where}: ${r.status} ${JSON.stringify(r.body)}`];
  const problems = violations(op.ok, r.body).map((v) => `${where}: ${v}`);
  if (!r.headers.get("content-type")?.startsWith("application/json")) problems.push(`${where}: content-type ${r.headers.get("content-type")}`);
  if (!echoes(op, query, r.body.parameters)) problems.push(`${where}: parameters ${JSON.stringify(r.body.parameters)}`);
  problems.push(...orderProblems(op, r.body.data ?? []).map((p) => `${where}: ${p}`));
  const page = promised(op, query);
  if (JSON.stringify(r.body.data) !== JSON.stringify(page.data) || r.body.hasMore !== page.hasMore) {
    const ids = (xs: Item[]) => xs.map((i) => i.id).join(",");
    problems.push(`${where}: data [${ids(r.body.data ?? [])}] hasMore ${r.body.hasMore}, the parameters select [${ids(page.data)}] hasMore ${page.hasMore}`);
  }
  if (source && !promised(op, { ...query, limit: "100" }).data.includes(source))
    problems.push(`${where}: (test) the values chosen do not select item ${source.id}`);
  return problems;
}

/**
 * Whether `parameters` gives back the request's: the path's, `limit` (its default when not
 * given), and each query parameter typed as the document types it (integers as numbers, a
 * date-time as the same instant, in RFC 3339 as its schema's format says: the schema checks that).
 */
function echoes(op: PublishedOperation, query: Query, parameters: Record<string, unknown> | undefined): boolean {
  const limit = op.query.find((p) => p.name === "limit")!.schema.default as number;
  const expected: Record<string, unknown> = { ...pathParams(op), limit, ...query };
  const given = parameters ?? {};
  if (Object.keys(given).sort().join() !== Object.keys(expected).sort().join()) return false;
  return Object.entries(expected).every(([name, sent]) => {
    const schema = op.params.find((p) => p.name === name)!.schema;
    if (schema.type === "integer") return given[name] === Number(sent);
    if (schema.format === "date-time") return typeof given[name] === "string" && micros(given[name] as string) === micros(sent as string);
    return given[name] === sent;
  });
}

/** Newest first: createdAt decreasing (strictly for log entries, each of a stream's times being its own), ids with it. */
function orderProblems(op: PublishedOperation, data: Item[]): string[] {
  const strict = op.operationId !== "listNotes";
  const out: string[] = [];
  for (let i = 1; i < data.length; i++) {
    const [a, b] = [data[i - 1]!, data[i]!];
    const [ta, tb] = [micros(a.createdAt), micros(b.createdAt)];
    if (tb > ta || (strict && tb === ta)) out.push(`item ${b.id} (${b.createdAt}) after item ${a.id} (${a.createdAt})`);
    if (Number(b.id) >= Number(a.id)) out.push(`item ${b.id} after item ${a.id}`);
  }
  return out;
}

/** Runs the checks `concurrency` at a time; every problem found. */
async function allProblems(checks: (() => Promise<string[]>)[], concurrency = 6): Promise<string[]> {
  const out: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < checks.length) out.push(...(await checks[next++]!()));
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return out;
}

// ---------------------------------------------------------------- the tests

describe.each(OPERATIONS.map((op) => [op.operationId, op] as const))("%s", (_, op) => {
  it("lists the world's entries in the document's shapes, newest first", () => {
    const items = everything.get(op.operationId)!;
    expect(items.length).toBeGreaterThanOrEqual(op.operationId === "listNotes" ? 4 : 15);
    expect(items.flatMap((i) => violations(op.item, i))).toEqual([]);
    expect(orderProblems(op, items)).toEqual([]);
  });

  it("answers without parameters", async () => {
    expect(await problemsOf(op, {})).toEqual([]);
  });

  it("answers each query parameter alone, for every value its schema gives", async () => {
    const checks = op.query.flatMap((p) => valuesOf(op, p).map((v) => () => problemsOf(op, { [p.name]: v })));
    expect(checks.length).toBeGreaterThan(op.query.length);
    expect(await allProblems(checks)).toEqual([]);
  });

  it("answers every pair of query parameters, with values that select a real item (of their schemas where no item has both)", async () => {
    const items = everything.get(op.operationId)!;
    const pairs = op.query.flatMap((p, i) => op.query.slice(i + 1).map((q) => [p, q] as const));
    const checks = pairs.map(([p, q], k) => {
      const candidates = items.filter((i) => valueSelecting(p.name, i, k) !== undefined && valueSelecting(q.name, i, k) !== undefined);
      const item = candidates[k % Math.max(candidates.length, 1)];
      if (item) return () => problemsOf(op, { [p.name]: valueSelecting(p.name, item, k)!, [q.name]: valueSelecting(q.name, item, k)! }, item);
      const [vp, vq] = [valuesOf(op, p), valuesOf(op, q)];
      return () => problemsOf(op, { [p.name]: vp[k % vp.length]!, [q.name]: vq[(k + 1) % vq.length]! });
    });
    expect(await allProblems(checks)).toEqual([]);
  });

  it("answers every pair of enum values (their readings combine runhook's actions)", async () => {
    const enums = op.query.filter((p) => Array.isArray(p.schema.enum));
    const pairs = enums.flatMap((p, i) => enums.slice(i + 1).map((q) => [p, q] as const));
    const checks = pairs.flatMap(([p, q]) =>
      (p.schema.enum as string[]).flatMap((vp) => (q.schema.enum as string[]).map((vq) => () => problemsOf(op, { [p.name]: vp, [q.name]: vq }))),
    );
    expect(await allProblems(checks)).toEqual([]);
  });
});

// ---------------------------------------------------------------- refusals, and the other shapes

/** Values a query parameter's schema refuses (an empty value is runhook's "not given", so none is tried). */
function refusedValuesOf(p: PublishedParam): string[] {
  const s = p.schema;
  if (Array.isArray(s.enum)) return ["bogus", String(s.enum[0]).toUpperCase()];
  if (s.format === "date-time") return ["yesterday", "2024-13-01T00:00", "2024-06-04", "2024-06-04T25:00:00Z"];
  if (s.format === "email") return ["not-an-email"];
  if (s.type === "integer") return ["abc", "2.5", String(s.minimum - 1), ...(s.maximum === undefined ? [] : [String(s.maximum + 1)])];
  return [];
}

describe.each(OPERATIONS.map((op) => [op.operationId, op] as const))("%s refuses", (_, op) => {
  /** What is wrong with the refusal of `query` (raw query string) by `status`. */
  async function refusalProblems(query: string, status: number, naming?: string, token = world.w.apiToken, path = urlOf(op)): Promise<string[]> {
    const r = await apiClient(server.gateway, token).get(`${path}${query ? `?${query}` : ""}`);
    const where = `${op.operationId}?${query}`;
    if (r.status !== status) return [`${where}: ${r.status} ${JSON.stringify(r.body)}, expected ${status}`];
    const problems = violations(op.clientError, r.body).map((v) => `${where}: ${v}`);
    if (naming && !String(r.body.message).includes(naming)) problems.push(`${where}: the message does not name ${naming}: ${r.body.message}`);
    return problems;
  }

  it("values its schemas refuse, unknown and repeated parameters: 400, in its 4XX schema", async () => {
    const checks = [
      ...op.query.flatMap((p) => refusedValuesOf(p).map((v) => () => refusalProblems(new URLSearchParams({ [p.name]: v }).toString(), 400, p.name))),
      // runhook's former parameters and a made-up one are no parameters of the document.
      ...["from=2024-06-04T09:21:00Z", "collection=orders", "archived=true", "createdAt.ne=2024-06-04T09:21:00Z", "bogus=1"].map(
        (q) => () => refusalProblems(q, 400, q.split("=")[0]),
      ),
      () => refusalProblems("limit=2&limit=3", 400, "limit"),
    ];
    expect(checks.length).toBeGreaterThan(op.query.length);
    expect(await allProblems(checks)).toEqual([]);
  });

  it("a missing or bad token (401), another project (403), an unknown environment (404): in its 4XX schema", async () => {
    const other = urlOf(op).replace(encodeURIComponent(world.w.projectName), "no-such-project");
    const problems = [
      ...(await refusalProblems("", 401, undefined, "")),
      ...(await refusalProblems("", 401, undefined, `rh_api_${"x".repeat(43)}`)),
      ...(await refusalProblems("", 403, undefined, world.w.apiToken, other)),
    ];
    if (op.path.includes("{environmentName}")) {
      const unknown = urlOf(op).replace(`/environment/${world.w.environmentName}/`, "/environment/no-such-environment/");
      problems.push(...(await refusalProblems("", 404, "no-such-environment", world.w.apiToken, unknown)));
    }
    expect(problems).toEqual([]);
  });
});

/** The lists runhook exports as NDJSON: the logs. */
const EXPORTED = ["listActivityLogs", "listAdminLogs"];

describe("runhook's additions keep the document's shapes", () => {
  it.each(OPERATIONS.map((op) => [op.operationId, op] as const))("%s: cursor and order are not echoed", async (_, op) => {
    const first = await get(urlOf(op, { limit: "2" }));
    expect(first.body.nextCursor).toBeTypeOf("string");
    const query = { limit: "2", order: "desc", cursor: first.body.nextCursor as string };
    expect(await problemsOf(op, { limit: "2" })).toEqual([]);
    const next = await get(urlOf(op, query));
    expect(next.status).toBe(200);
    expect(violations(op.ok, next.body)).toEqual([]);
    expect(next.body.parameters).toEqual({ ...pathParams(op), limit: 2 });
    expect(next.body.data).toEqual(everything.get(op.operationId)!.slice(2, 4));
  });

  it.each(OPERATIONS.filter((op) => EXPORTED.includes(op.operationId)).map((op) => [op.operationId, op] as const))(
    "%s: the NDJSON export is the listing, one item a line",
    async (_, op) => {
      const res = await fetch(`${server.baseUrl}${urlOf(op)}`, { headers: { authorization: `Bearer ${world.w.apiToken}`, accept: "application/x-ndjson" } });
      expect(res.status).toBe(200);
      const lines = (await res.text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines.flatMap((item) => violations(op.item, item))).toEqual([]);
      expect(lines).toEqual(everything.get(op.operationId));
    },
  );

  it("the note writes answer the document's note and note-message items", async () => {
    const op = OPERATIONS.find((o) => o.operationId === "listNotes")!;
    const { answers, notes } = world;
    const written = [...answers.notes, ...answers.patched];
    expect(written.flatMap((n) => violations(op.item, n))).toEqual([]);
    expect(violations(op.item.properties.messages.items, answers.message)).toEqual([]);
    const base = urlOf(op);
    for (const id of notes.kept) {
      const r = await get(`${base}/${id}`);
      expect(r.status).toBe(200);
      expect(violations(op.item, r.body)).toEqual([]);
      expect(r.body).toEqual(everything.get(op.operationId)!.find((n) => n.id === id));
    }
    const gone = await get(`${base}/${notes.deleted}`);
    expect(gone.status).toBe(404);
    expect(violations(op.clientError, gone.body)).toEqual([]);
  });
});

describe("the checks see an answer that breaks the document", () => {
  it.each(OPERATIONS.map((op) => [op.operationId, op] as const))("%s", (_, op) => {
    const item = everything.get(op.operationId)![0]!;
    const answer = (data: Item[], parameters: Record<string, unknown> = { ...pathParams(op), limit: 10 }) => ({ hasMore: false, parameters, data });
    expect(violations(op.ok, answer([item]))).toEqual([]);
    const { createdAt: _createdAt, ...incomplete } = item;
    for (const broken of [
      answer([{ ...item, extra: true }]),
      answer([{ ...item, object: "bogus" }]),
      answer([incomplete]),
      answer([{ ...item, createdAt: "2024-06-04T09:21" }]),
      answer([{ ...item, user: { ...item.user, id: String(item.user.id) } }]),
      answer([item], { ...pathParams(op), limit: 1 }),
      answer([item], { ...pathParams(op), limit: 10, cursor: "x" }),
    ])
      expect(violations(op.ok, broken)).not.toEqual([]);
    expect(violations(op.clientError, { error: "no code" })).not.toEqual([]);
  });
});
