// atomicUpdate is atomic on the test database, whichever it is (FerretDB loses concurrent
// plain updates; MongoDB does not).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Collection } from "mongodb";
import { connect, ensureIndexes, type Database } from "../src/db/mongo.js";
import { atomicUpdate } from "../src/db/atomic.js";
import { testDbName, uriFor } from "./helpers/server.js";

interface Doc { _id: string; n: number; state: string; owner?: number; createdAt?: number }
let dbs: Database[] = [];
let colls: Collection<Doc>[] = [];

beforeAll(async () => {
  const name = testDbName();
  // Several clients, as several server processes would have.
  dbs = await Promise.all([0, 1, 2].map(() => connect(uriFor(name))));
  await ensureIndexes(dbs[0]!);
  colls = dbs.map((d) => d.db.collection<Doc>("atomic_probe"));
});
afterAll(async () => {
  await Promise.all(dbs.map((d) => d.close()));
});

describe("atomicUpdate", () => {
  it("loses no increment under 30 concurrent writers", async () => {
    await colls[0]!.insertOne({ _id: "counter", n: 0, state: "x" });
    await Promise.all(Array.from({ length: 30 }, (_, i) => atomicUpdate(dbs[i % 3]!, colls[i % 3]!, { _id: "counter" }, { $inc: { n: 1 } })));
    expect((await colls[0]!.findOne({ _id: "counter" }))!.n).toBe(30);
  });

  it("lets exactly one of 10 concurrent claimers win a conditional update", async () => {
    await colls[0]!.insertOne({ _id: "job", n: 0, state: "QUEUED" });
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => atomicUpdate(dbs[i % 3]!, colls[i % 3]!, { _id: "job", state: "QUEUED" }, { $set: { state: "RUNNING", owner: i } })),
    );
    const winners = results.filter((r) => r !== null);
    expect(winners).toHaveLength(1);
    expect((await colls[0]!.findOne({ _id: "job" }))!.owner).toBe(winners[0]!.owner);
  });

  it("claims each of 20 queued documents exactly once with a filter and sort", async () => {
    await colls[0]!.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `q${i}`, n: 0, state: "Q", createdAt: i })));
    const claimed: string[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async (_, w) => {
        for (;;) {
          const doc = await atomicUpdate(dbs[w % 3]!, colls[w % 3]!, { state: "Q" }, { $set: { state: "R", owner: w } }, { sort: { createdAt: 1 } });
          if (!doc) return;
          claimed.push(doc._id);
        }
      }),
    );
    expect(claimed.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `q${i}`).sort());
  });
});
