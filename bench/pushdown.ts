// Which query shapes the embedded FerretDB (v1, SQLite) pushes down to SQLite, and what each
// costs on 20,000 documents: the evidence behind bench/README.md's findings.
//   node --import tsx bench/pushdown.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { join } from "node:path";
import { MongoClient } from "mongodb";
import { startEmbeddedDb } from "../src/db/embedded.js";
const dir = mkdtempSync(join(tmpdir(), "rh-explain-"));
const e = await startEmbeddedDb({ dataDir: dir, cacheDir: join(homedir(), ".cache/runhook"), progress: () => {} });
const c = new MongoClient(e.uri); await c.connect();
const db = c.db("x");
await db.collection("t").insertMany(Array.from({ length: 20000 }, (_, i) => ({ _id: i + 1, env: "a", k: `k${i}` })) as any);
await db.collection("t").createIndex({ env: 1, _id: 1 });
const ex = async (name: string, filter: any, extra: any = {}) => {
  const r = await db.command({ explain: { find: "t", filter, ...extra }, verbosity: "queryPlanner" });
  const t = performance.now(); const n = (await db.collection("t").find(filter, extra.sort ? { sort: extra.sort, limit: extra.limit } : {}).toArray()).length;
  console.log(name, JSON.stringify({ plan: r.queryPlanner?.Plan, f: r.filterPushdown, s: r.sortPushdown, l: r.limitPushdown }), n, "docs", Math.round(performance.now() - t), "ms");
};
await ex("_id eq", { _id: 500 });
await ex("_id range", { _id: { $gt: 500, $lte: 1500 } });
await ex("_id $in", { _id: { $in: Array.from({ length: 1000 }, (_, i) => 501 + i) } });
await ex("env + _id range sort limit", { env: "a", _id: { $gt: 500 } }, { sort: { _id: 1 }, limit: 1000 });
await ex("_id range sort limit", { _id: { $gt: 500 } }, { sort: { _id: 1 }, limit: 1000 });
await ex("k eq", { k: "k77" });
// String _ids (runhook's UUIDs, rate-limit slots) rather than numbers (log sequence numbers).
await db.collection("s").insertMany(Array.from({ length: 20000 }, (_, i) => ({ _id: `id${String(i + 1).padStart(6, "0")}`, env: "a" })) as any);
for (const [name, filter] of [["string _id eq", { _id: "id000500" }], ["string _id range", { _id: { $gte: "id000500", $lt: "id001500" } }]] as const) {
  const r = await db.command({ explain: { find: "s", filter }, verbosity: "queryPlanner" });
  const t = performance.now(); const n = (await db.collection("s").find(filter as any).toArray()).length;
  console.log(name, JSON.stringify({ plan: r.queryPlanner?.Plan, f: r.filterPushdown }), n, "docs", Math.round(performance.now() - t), "ms");
}
await c.close(); await e.stop(); rmSync(dir, { recursive: true, force: true });
