// Pick-up latency of executors on its own (scenarios/pickup.ts; also part of `npm run bench`):
// from a run's QUEUED insert to its startedAt, same instance (the run.queued event) and other
// instance (found by polling), and same instance while another organization has a backlog in 5 projects.
//   node --import tsx bench/pickup.ts [runs=200] [finishedRuns=0] [pollMs=100] [backlogRuns=5000]
// finishedRuns: store that many finished runs first, to show that pick-up does not depend on
// the size of the runs collection. Uses MONGODB_URI when set, otherwise the embedded
// mongo-java-server (memory backend) in a temp dir.
import { standalone } from "./lib/standalone.js";
import { pickupScenario } from "./scenarios/pickup.js";

const [runs = 200, finishedRuns = 0, pollMs = 100, backlogRuns = 5000] = process.argv
  .slice(2)
  .filter((a) => !a.startsWith("--"))
  .map(Number);

await standalone("pickup", async (ctx) => {
  ctx.log(
    `${runs} runs per case; ${finishedRuns} finished runs stored first; poll ${pollMs} ms; backlog of ${backlogRuns} runs in another organization's 5 projects`,
  );
  const r = await pickupScenario(ctx, { runs, finishedRuns, pollMs, backlogRuns });
  ctx.log(JSON.stringify(r));
});
process.exit(0);
