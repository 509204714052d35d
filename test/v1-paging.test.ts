// Paging an activity log that several instances wrote at once, three ways, each listing every
// entry exactly once: the published document's way (newest first, `createdAt.lt` of the last
// item as the only cursor), runhook's cursor (newest first), and runhook's tail (`order=asc`
// with the cursor, oldest first). The 5,000 entries are written within seconds by 4 writers,
// each a store of its own (as 4 instances have) with several appends in flight, so that many
// entries share a millisecond: their createdAt still differ (microseconds) and fall as the listing goes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../src/store/index.js";
import type { NewActivity } from "../src/store/logs.js";
import { createWorld, type World } from "../fixtures/world.js";
import { apiClient, qs } from "./helpers/api.js";
import { operation, violations } from "./helpers/published.js";
import { startServer, uriFor, type TestServer } from "./helpers/server.js";

const WRITERS = 4;
const ENTRIES = 5000;
/** Appends each writer keeps in flight (an instance answers several calls at once). */
const IN_FLIGHT = 8;
const PAGE = 100;

let server: TestServer;
let w: World;
const writers: Store[] = [];

/** The entry `i` of writer `k`: its record id says which. */
const entry = (k: number, i: number): NewActivity => ({
  projectId: w.projectId,
  environmentId: w.environmentId,
  environment: w.environmentName,
  rendering: w.renderingId,
  user: { id: w.user._id, email: w.user.email },
  action: "record.updated",
  via: "workflow",
  collection: w.collection,
  recordId: `w${k}-${i}`,
  runId: null,
  details: {},
});

/** Writer `k` appends its share of the entries, IN_FLIGHT at a time. */
async function write(store: Store, k: number): Promise<void> {
  const share = ENTRIES / WRITERS;
  let next = 0;
  const lane = async () => {
    while (next < share) await store.logs.appendActivity(entry(k, next++));
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
}

beforeAll(async () => {
  server = await startServer();
  w = await createWorld(server);
  for (let k = 0; k < WRITERS; k++) writers.push(await openStore(uriFor(server.dbName), { dbName: server.dbName }));
  await Promise.all(writers.map((store, k) => write(store, k)));
});

afterAll(async () => {
  await Promise.allSettled(writers.map((s) => s.close()));
  await server?.stop();
});

type Item = Record<string, any>;
const path = () => `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
const listActivityLogs = operation("listActivityLogs");

/** Every page of a listing: `next` gives the query of the page after `last` (undefined: the listing is over). */
async function pages(first: Record<string, string>, next: (page: Item) => Record<string, string> | undefined): Promise<Item[]> {
  const c = apiClient(server.gateway, w.apiToken);
  const items: Item[] = [];
  let query: Record<string, string> | undefined = first;
  for (let n = 0; query; n++) {
    if (n > ENTRIES / PAGE + 5) throw new Error("the listing does not end");
    const r = await c.get(path() + qs(query));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(violations(listActivityLogs.ok, r.body)).toEqual([]);
    items.push(...r.body.data);
    query = next(r.body);
  }
  return items;
}

/** The writers' entries, in the listing's order, as `w<k>-<i>`. */
const written = (items: Item[]) => items.map((i) => i.recordIds[0] as string);

function expectEveryEntryOnce(items: Item[]): void {
  expect(items).toHaveLength(ENTRIES);
  const all = Array.from({ length: WRITERS }, (_, k) => Array.from({ length: ENTRIES / WRITERS }, (_, i) => `w${k}-${i}`)).flat();
  expect(new Set(written(items))).toEqual(new Set(all));
}

/** The entries' numbers (ids), as listed. */
const ids = (items: Item[]) => items.map((i) => Number(i.id));

describe("5,000 entries written by 4 instances at once", () => {
  let newestFirst: Item[];

  it("paged the document's way (createdAt.lt of the last item, newest first): every entry once, createdAt unique and falling", async () => {
    const limit = String(PAGE);
    newestFirst = await pages({ limit }, (page) => (page.hasMore ? { limit, "createdAt.lt": page.data.at(-1).createdAt } : undefined));
    expectEveryEntryOnce(newestFirst);
    const times = newestFirst.map((i) => i.createdAt as string);
    // Fixed width (6 fractional digits, UTC): string order is time order.
    for (let i = 1; i < times.length; i++) expect(times[i]! < times[i - 1]!, `${times[i]} after ${times[i - 1]}`).toBe(true);
    // Many entries shared a millisecond: only their microseconds tell them apart.
    expect(new Set(times.map((t) => t.slice(0, 23))).size).toBeLessThan(ENTRIES);
    const seqs = ids(newestFirst);
    expect(seqs).toEqual([...seqs].sort((a, b) => b - a));
  });

  it("paged with runhook's cursor, newest first: the same listing", async () => {
    const limit = String(PAGE);
    const items = await pages({ limit }, (page) => (page.hasMore ? { limit, cursor: page.nextCursor } : undefined));
    expect(ids(items)).toEqual(ids(newestFirst));
    expect(items.map((i) => i.createdAt)).toEqual(newestFirst.map((i) => i.createdAt));
  });

  it("tailed with order=asc and the cursor, oldest first: every entry once, then caught up", async () => {
    const first = { limit: String(PAGE), order: "asc" };
    let tail = "";
    const items = await pages(first, (page) => {
      tail = page.nextCursor;
      return page.hasMore ? { ...first, cursor: page.nextCursor } : undefined;
    });
    expectEveryEntryOnce(items);
    expect(ids(items)).toEqual(ids(newestFirst).reverse());
    // Caught up: the last cursor answers nothing more, and where to poll next.
    const polled = await apiClient(server.gateway, w.apiToken).get(path() + qs({ ...first, cursor: tail }));
    expect(polled.body).toMatchObject({ hasMore: false, data: [], nextCursor: expect.any(String) });
  });
});
