import { MongoClient } from "mongodb";
async function main() {
const c = new MongoClient(`mongodb://127.0.0.1:${process.argv[2]}/`, { directConnection: true });
const col = c.db("x").collection("y");
let t = Date.now();
for (let i = 0; i < 50; i++) await col.insertOne({ i });
console.log("seq 50 inserts ms/insert", (Date.now() - t) / 50);
for (const conc of [16, 64]) {
  t = Date.now(); let n = 0;
  await Promise.all(Array.from({ length: conc }, async () => { while (Date.now() - t < 2000) { await col.insertOne({ n: n++ }); } }));
  console.log(`c=${conc} inserts/s`, Math.round(n / ((Date.now() - t) / 1000)));
}
await c.close();
}
main();
