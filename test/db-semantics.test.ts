// The database semantics the store's design relies on, checked over the wire with the real
// driver: single-document atomicity under concurrency, unique indexes, and the few server
// features the store declares. A server that lacks them (one that loses concurrent $inc
// updates or lets every conditional claim win) must fail here, before it fails subtly in
// production.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, storeFixtures, type Store, type StoreFixtures } from "../src/store/index.js";
import { testDbName, uriFor } from "./helpers/server.js";

type Counter = { _id: string; seq: number };
type Job = { _id: string; state: string; owner?: string; createdAt?: Date; lease?: { owner: string } };

const PIN_ADVICE = "keep the mongodb driver pinned (package.json) until the test server reports a wire version the new driver accepts";
/** The driver's minimum and maximum wire versions, read from its source (not imported: only the store imports the driver). */
const DRIVER_WIRE = (() => {
  const file = join(dirname(createRequire(import.meta.url).resolve("mongodb")), "cmap/wire_protocol/constants.js");
  const text = readFileSync(file, "utf8");
  const num = (name: string) => Number(new RegExp(`${name} = (\\d+);`).exec(text)?.[1] ?? NaN);
  return { min: num("MIN_SUPPORTED_WIRE_VERSION"), max: num("MAX_SUPPORTED_WIRE_VERSION"), file };
})();

const dbName = testDbName();
let store: Store;
let d: StoreFixtures;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const codeOf = (err: unknown) => (err as { code?: unknown }).code;
const jobs = (name: string) => d.scratch<Job>(name);

beforeAll(async () => {
  store = await openStore(uriFor(dbName)).catch((err: Error) => {
    // The driver refuses a server whose wire version is below its minimum before any test runs.
    throw /wire version/i.test(err.message) ? new Error(`${err.message} — ${PIN_ADVICE}`) : err;
  });
  // Open the whole pool first, so the concurrent cases below really overlap on the server
  // instead of queueing behind connection set-up.
  d = storeFixtures(store);
  await Promise.all(range(50).map(() => store.ping()));
});

afterAll(async () => {
  await d?.dropDatabase();
  await store?.close();
});

describe("single-document atomicity under concurrency", () => {
  it("a conditional claim of one document has exactly one winner", async () => {
    const c = jobs("claims");
    const docs = range(5).map((i) => ({ _id: `job-${i}`, state: "QUEUED" }));
    await c.insertMany(docs);
    // 5 documents × 20 claimers, all at once.
    const results = await Promise.all(
      docs.flatMap((doc) =>
        range(20).map((n) =>
          c.findOneAndUpdate({ _id: doc._id, state: "QUEUED" }, { $set: { state: "RUNNING", owner: `w${n}` } }, { returnDocument: "after" }),
        ),
      ),
    );
    for (const doc of docs) {
      const winners = results.filter((r) => r?._id === doc._id);
      expect(winners, doc._id).toHaveLength(1);
      const stored = await c.findOne({ _id: doc._id });
      expect(stored).toMatchObject({ state: "RUNNING", owner: winners[0]!.owner });
    }
  });

  it("a read sees a document whole, never half of a concurrent update", async () => {
    // Every update sets all fields to one value; a reply encoded while an update lands must
    // still hold one value throughout (find, getMore, and findOneAndUpdate's answer).
    type Wide = { _id: string; n: number; fields: number[] } & Record<string, unknown>;
    const c = d.scratch<Wide>("whole");
    const FIELDS = 40;
    const wide = (n: number) => Object.fromEntries(range(FIELDS).map((f) => [`f${f}`, n]));
    await c.insertMany(range(4).map((i) => ({ _id: `d${i}`, n: 0, fields: range(FIELDS).map(() => 0), ...wide(0) })));
    const torn: string[] = [];
    const check = (doc: Wide | null, via: string) => {
      if (!doc) return;
      const values = new Set([doc.n, ...doc.fields, ...range(FIELDS).map((f) => doc[`f${f}`])]);
      if (values.size > 1) torn.push(`${via} read ${doc._id} with values ${[...values].join(",")}`);
    };
    let writing = true;
    const writers = range(4).map(async (w) => {
      for (let n = 1; writing; n++) {
        const v = n * 10 + w;
        const after = await c.findOneAndUpdate(
          { _id: `d${n % 4}` },
          { $set: { n: v, fields: range(FIELDS).map(() => v), ...wide(v) } },
          { returnDocument: "after" },
        );
        check(after, "findOneAndUpdate");
      }
    });
    const readers = range(4).map(async () => {
      for (let i = 0; i < 150; i++) for (const doc of await c.find({}, { batchSize: 2, sort: { _id: 1 } }).toArray()) check(doc, "find");
    });
    await Promise.all(readers);
    writing = false;
    await Promise.all(writers);
    expect(torn.slice(0, 5)).toEqual([]);
  });

  it("$inc loses no update", async () => {
    const c = d.scratch<Counter>("inc");
    await c.insertOne({ _id: "n", seq: 0 });
    await Promise.all(range(50).map(() => c.updateOne({ _id: "n" }, { $inc: { seq: 1 } })));
    expect((await c.findOne({ _id: "n" }))?.seq).toBe(50);
  });

  it("a counter (store.counters.next: upserted $inc, the value before + 1) hands out distinct, gap-free numbers", async () => {
    // "before" + 1, not the "after" document: mongo-java-server writes an "after" document to
    // the wire once its lock is released, so a concurrent increment can show through it.
    const counters = store.counters;
    const first = await Promise.all(range(50).map(() => counters.next("seq")));
    expect(first.sort((a, b) => a - b)).toEqual(range(50).map((i) => i + 1));
    const more = await Promise.all(range(200).map(() => counters.next("seq")));
    expect(more.sort((a, b) => a - b)).toEqual(range(200).map((i) => i + 51));
    expect(await counters.current("seq")).toBe(250);
  });

  it("a unique index admits one of many concurrent inserts of one key; the rest fail with 11000", async () => {
    const c = d.scratch<{ activeKey: string; n: number }>("unique");
    await c.createIndex({ activeKey: 1 }, { unique: true });
    const results = await Promise.allSettled(range(50).map((n) => c.insertOne({ activeKey: "wf|rec", n })));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const codes = results.flatMap((r) => (r.status === "rejected" ? [codeOf(r.reason)] : []));
    expect(codes).toEqual(range(49).map(() => 11000));
    expect(await c.countDocuments({ activeKey: "wf|rec" })).toBe(1);
  });

  it("an unordered insertMany inserts every document a unique index admits, and names each refused one by its index", async () => {
    // What grouped inserts rely on (src/store/group-commit.ts): one refusal fails only its own document.
    const c = d.scratch<{ _id: string; activeKey: string }>("unique-many");
    await c.createIndex({ activeKey: 1 }, { unique: true });
    await c.insertOne({ _id: "old", activeKey: "taken" });
    const docs = [
      { _id: "a", activeKey: "k1" },
      { _id: "b", activeKey: "taken" }, // refused by an existing document
      { _id: "c", activeKey: "k2" },
      { _id: "d", activeKey: "k1" }, // refused by one earlier in the same insert
      { _id: "e", activeKey: "k3" },
    ];
    const err = (await c.insertMany(docs, { ordered: false }).then(
      () => null,
      (e: unknown) => e,
    )) as { writeErrors?: { index: number; code: number }[] } | null;
    expect((err?.writeErrors ?? []).map((e) => [e.index, e.code]).sort()).toEqual([
      [1, 11000],
      [3, 11000],
    ]);
    expect((await c.find({}, { sort: { _id: 1 } }).toArray()).map((x) => x._id)).toEqual(["a", "c", "e", "old"]);
  });

  it("sorted claims by concurrent claimers take distinct documents, oldest first", async () => {
    const c = jobs("queue");
    await c.createIndex({ state: 1, createdAt: 1 });
    const t0 = Date.parse("2025-01-01T00:00:00Z");
    // Inserted in scrambled order, so natural order cannot pass for the sort.
    const docs = range(30).map((i) => ({ _id: `q${i}`, state: "QUEUED", createdAt: new Date(t0 + ((i * 7) % 30) * 1000) }));
    await c.insertMany(docs);
    const claimed = await Promise.all(
      range(20).map((n) => c.findOneAndUpdate({ state: "QUEUED" }, { $set: { state: "RUNNING", owner: `w${n}` } }, { sort: { createdAt: 1 } })),
    );
    const ids = claimed.map((r) => r?._id);
    expect(new Set(ids).size).toBe(20);
    const oldest = [...docs].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime()).slice(0, 20);
    expect([...ids].sort()).toEqual(oldest.map((doc) => doc._id).sort());
    expect(await c.countDocuments({ state: "QUEUED" })).toBe(10);
  });

  it("findOneAndDelete hands each document to exactly one caller", async () => {
    const c = jobs("deletes");
    await c.createIndex({ state: 1 });
    await c.insertMany(range(10).map((i) => ({ _id: `del${i}`, state: "DONE" })));
    const got = await Promise.all(range(30).map(() => c.findOneAndDelete({ state: "DONE" })));
    const ids = got.flatMap((doc) => (doc ? [doc._id] : []));
    expect(ids.sort()).toEqual(
      range(10)
        .map((i) => `del${i}`)
        .sort(),
    );
    expect(await c.estimatedDocumentCount()).toBe(0);
  });
});

describe("update operators the store uses", () => {
  it("$max only raises, also when concurrent", async () => {
    const c = d.scratch<Counter>("max");
    await c.insertOne({ _id: "w", seq: 5 });
    await c.updateOne({ _id: "w" }, { $max: { seq: 3 } });
    expect((await c.findOne({ _id: "w" }))?.seq).toBe(5);
    const values = range(50).map((i) => (i * 17) % 50); // 0..49, scrambled
    await Promise.all(values.map((v) => c.updateOne({ _id: "w" }, { $max: { seq: v } })));
    expect((await c.findOne({ _id: "w" }))?.seq).toBe(49);
  });

  it("a condition on a nested field (lease.owner) matches only the owner", async () => {
    const c = jobs("leases");
    await c.insertOne({ _id: "run", state: "RUNNING", lease: { owner: "w3" } });
    const results = await Promise.all(range(10).map((n) => c.updateOne({ _id: "run", "lease.owner": `w${n}` }, { $set: { state: `renewed-by-w${n}` } })));
    expect(results.map((r) => r.modifiedCount)).toEqual(range(10).map((n) => (n === 3 ? 1 : 0)));
    expect((await c.findOne({ _id: "run" }))?.state).toBe("renewed-by-w3");
  });

  it("$push guarded by {'messages.199': {$exists: false}} stops at 200 under concurrency", async () => {
    const c = d.scratch<{ _id: string; messages: number[] }>("capped");
    await c.insertOne({ _id: "t", messages: [] });
    const results = await Promise.all(range(250).map((i) => c.updateOne({ _id: "t", "messages.199": { $exists: false } }, { $push: { messages: i } })));
    expect(results.reduce((sum, r) => sum + r.modifiedCount, 0)).toBe(200);
    expect((await c.findOne({ _id: "t" }))?.messages).toHaveLength(200);
  });
});

describe("indexed queries: what an index serves is what MongoDB answers", () => {
  // Entries of two environments, numbered, timed, with a state that is sometimes null or
  // missing, a nested user and an array of tags: the shapes runhook's indexes have, and the
  // corners MongoDB defines (null matches missing, a range stays within its type, an array
  // is indexed by element).
  type Entry = { _id: string; env: string; seq: number; ts: Date; state?: string | null; user?: { id: string }; tags?: string[]; mixed?: unknown };
  const T0 = Date.parse("2025-01-01T00:00:00Z");
  const entries: Entry[] = range(300).map((i) => {
    const e: Entry = { _id: `e${String(i).padStart(4, "0")}`, env: i % 3 === 0 ? "a" : "b", seq: i, ts: new Date(T0 + ((i * 37) % 300) * 1000) };
    if (i % 5 === 1) e.state = null;
    else if (i % 5 !== 2) e.state = ["QUEUED", "RUNNING", "SUCCEEDED"][i % 3];
    if (i % 4 !== 0) e.user = { id: `u${i % 6}` };
    if (i % 7 === 0) e.tags = [`t${i % 3}`, `t${(i + 1) % 3}`];
    e.mixed = [i, `s${i}`, new Date(T0 + i), null][i % 4];
    return e;
  });
  const entriesColl = () => d.scratch<Entry>("indexed-entries");
  const ids = (docs: { _id: string }[]) => docs.map((x) => x._id);
  const bySeq = (dir: 1 | -1) => (x: Entry, y: Entry) => dir * (x.seq - y.seq);
  const expected = (pred: (e: Entry) => boolean, order: (x: Entry, y: Entry) => number, skip = 0, limit = entries.length) =>
    ids(
      [...entries]
        .filter(pred)
        .sort(order)
        .slice(skip, skip + limit),
    );

  /** Every stage of an explain's winning plan (MongoDB 7+ nests it under queryPlan). */
  const stages = (explained: Record<string, unknown>): string[] => {
    const out: string[] = [];
    const walk = (node: unknown) => {
      if (!node || typeof node !== "object") return;
      const n = node as Record<string, unknown>;
      if (typeof n.stage === "string") out.push(n.stage);
      for (const key of ["inputStage", "queryPlan"]) walk(n[key]);
      for (const child of (n.inputStages as unknown[]) ?? []) walk(child);
    };
    walk((explained.queryPlanner as { winningPlan?: unknown })?.winningPlan);
    return out;
  };

  beforeAll(async () => {
    const c = entriesColl();
    await c.createIndex({ env: 1, seq: 1 });
    await c.createIndex({ state: 1, ts: 1 });
    await c.createIndex({ "user.id": 1, seq: 1 });
    await c.createIndex({ tags: 1 });
    await c.createIndex({ mixed: 1 });
    // Half before the indexes exist would test the build; both halves after test upkeep.
    await c.insertMany(entries.slice(0, 150).map((e) => ({ ...e })));
    await c.insertMany(entries.slice(150).map((e) => ({ ...e })));
  });

  it("equality on a prefix and a range on the next field, in both directions, with skip and limit", async () => {
    const c = entriesColl();
    const inRange = (e: Entry) => e.env === "b" && e.seq > 20 && e.seq <= 250;
    expect(ids(await c.find({ env: "b", seq: { $gt: 20, $lte: 250 } }, { sort: { seq: 1 } }).toArray())).toEqual(expected(inRange, bySeq(1)));
    expect(ids(await c.find({ env: "b", seq: { $gt: 20, $lte: 250 } }, { sort: { seq: -1 }, skip: 3, limit: 10 }).toArray())).toEqual(
      expected(inRange, bySeq(-1), 3, 10),
    );
    expect(ids(await c.find({ env: { $in: ["a", "b"] }, seq: { $lt: 30 } }, { sort: { seq: -1 } }).toArray())).toEqual(expected((e) => e.seq < 30, bySeq(-1)));
    expect(ids(await c.find({ $and: [{ env: "a" }, { seq: { $gte: 290 } }] }, { sort: { seq: 1 } }).toArray())).toEqual(
      expected((e) => e.env === "a" && e.seq >= 290, bySeq(1)),
    );
  });

  it("null matches a null and a missing field; a range matches only values of its own type", async () => {
    const c = entriesColl();
    const byId = { sort: { _id: 1 } } as const;
    expect(ids(await c.find({ state: null }, byId).toArray())).toEqual(
      expected(
        (e) => e.state == null,
        (x, y) => x._id.localeCompare(y._id),
      ),
    );
    const before = new Date(T0 + 100_000);
    expect(ids(await c.find({ state: "RUNNING", ts: { $lt: before } }, { sort: { ts: 1, _id: 1 } }).toArray())).toEqual(
      expected(
        (e) => e.state === "RUNNING" && e.ts < before,
        (x, y) => x.ts.getTime() - y.ts.getTime() || x._id.localeCompare(y._id),
      ),
    );
    expect(ids(await c.find({ mixed: { $gte: 100 } }, byId).toArray())).toEqual(
      expected(
        (e) => typeof e.mixed === "number" && e.mixed >= 100,
        (x, y) => x._id.localeCompare(y._id),
      ),
    );
    expect(ids(await c.find({ mixed: { $lt: "s2" } }, byId).toArray())).toEqual(
      expected(
        (e) => typeof e.mixed === "string" && e.mixed < "s2",
        (x, y) => x._id.localeCompare(y._id),
      ),
    );
    expect(await c.countDocuments({ mixed: { $gt: new Date(T0 + 250) } })).toBe(
      entries.filter((e) => e.mixed instanceof Date && e.mixed.getTime() > T0 + 250).length,
    );
  });

  it("nested fields and arrays: each element of an array is a key", async () => {
    const c = entriesColl();
    expect(ids(await c.find({ "user.id": "u3" }, { sort: { seq: -1 }, limit: 5 }).toArray())).toEqual(expected((e) => e.user?.id === "u3", bySeq(-1), 0, 5));
    expect(ids(await c.find({ tags: "t1" }, { sort: { _id: 1 } }).toArray())).toEqual(
      expected(
        (e) => Boolean(e.tags?.includes("t1")),
        (x, y) => x._id.localeCompare(y._id),
      ),
    );
    expect(ids(await c.find({ tags: { $in: ["t0", "t2"] } }, { sort: { _id: -1 } }).toArray())).toEqual(
      expected(
        (e) => Boolean(e.tags?.some((t) => t === "t0" || t === "t2")),
        (x, y) => y._id.localeCompare(x._id),
      ),
    );
  });

  it("each of those is an index scan, and a sorted page reads only what it returns", async () => {
    const c = entriesColl();
    const queries = [
      c
        .find({ env: "b", seq: { $gt: 20 } })
        .sort({ seq: -1 })
        .limit(10),
      c.find({ state: null }),
      c.find({ state: "RUNNING", ts: { $lt: new Date(T0 + 100_000) } }).sort({ ts: 1 }),
      c.find({ "user.id": "u3" }).sort({ seq: -1 }).limit(5),
      c.find({ tags: "t1" }),
      c
        .find({ _id: { $gt: "e0100", $lt: "e0200" } })
        .sort({ _id: 1 })
        .limit(20),
    ];
    for (const q of queries) {
      const explained = (await q.explain("executionStats")) as Record<string, unknown>;
      expect(stages(explained)).toContain("IXSCAN");
      expect(stages(explained)).not.toContain("COLLSCAN");
    }
    const page = (await c
      .find({ env: "b", seq: { $gt: 20 } })
      .sort({ seq: -1 })
      .limit(10)
      .explain("executionStats")) as {
      executionStats: { totalDocsExamined: number; nReturned: number };
    };
    expect([page.executionStats.nReturned, page.executionStats.totalDocsExamined]).toEqual([10, 10]);
  });
});

describe("server compatibility", () => {
  it(`reports a wire version the pinned driver accepts (driver needs ${DRIVER_WIRE.min}..${DRIVER_WIRE.max})`, async () => {
    expect(Number.isInteger(DRIVER_WIRE.min), `no MIN_SUPPORTED_WIRE_VERSION in ${DRIVER_WIRE.file}; ${PIN_ADVICE}`).toBe(true);
    // mongo-java-server has no `hello`, only the legacy isMaster.
    const reply = (await d.serverCommand({ hello: 1 }).catch(() => d.serverCommand({ isMaster: 1 }))) as { maxWireVersion?: number; minWireVersion?: number };
    const { maxWireVersion = 0, minWireVersion = 0 } = reply;
    expect(maxWireVersion, `server maxWireVersion ${maxWireVersion} < driver minimum ${DRIVER_WIRE.min}: ${PIN_ADVICE}`).toBeGreaterThanOrEqual(
      DRIVER_WIRE.min,
    );
    expect(minWireVersion, `server minWireVersion ${minWireVersion} > driver maximum ${DRIVER_WIRE.max}`).toBeLessThanOrEqual(DRIVER_WIRE.max);
  });

  it("declaring a TTL index is harmless (it may be accepted and never applied)", async () => {
    const c = d.scratch<{ _id: string; expiresAt: Date }>("ttl");
    await expect(c.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 })).resolves.toBe("expiresAt_1");
    // Declaring it again at the next start-up must not fail either.
    await expect(c.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 })).resolves.toBe("expiresAt_1");
    await c.insertOne({ _id: "live", expiresAt: new Date(Date.now() + 3_600_000) });
    expect(await c.findOne({ _id: "live" })).not.toBeNull();
    // Whether expired documents disappear is not relied on: the store sweeps them itself.
    await c.deleteMany({ expiresAt: { $lt: new Date() } });
    expect(await c.estimatedDocumentCount()).toBe(1);
  });
});
