// The log scenario on its own (scenarios/logs.ts; also part of `npm run bench`): paging (pages
// of 100, oldest first and newest first) and the NDJSON export of the public API against a raw
// driver scan of the same entries, and a tail of 20,000 entries written by 4 writers in 2
// processes.
//   node --import tsx bench/logs.ts [--quick]
// Env: BENCH_ENTRIES (100,000; 10,000 with --quick), BENCH_TAIL_ENTRIES (20,000), MONGODB_URI
// (default: the embedded mongo-java-server, memory backend, in a temp dir).
import { standalone } from "./lib/standalone.js";
import { logsScenario } from "./scenarios/logs.js";

await standalone("logs", async (ctx) => {
  const entries = Number(process.env.BENCH_ENTRIES ?? (ctx.quick ? 10_000 : 100_000));
  const tailEntries = Number(process.env.BENCH_TAIL_ENTRIES ?? 20_000);
  const r = await logsScenario(ctx, { entries, timeLimitMs: 300_000, tailEntries, tailTimeLimitMs: 300_000 });
  ctx.log(JSON.stringify(r));
});
process.exit(0);
