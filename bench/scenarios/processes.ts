// Every core: webhook accepts (REST, closed loop) of one `runhook start` with
// RUNHOOK_PROCESSES=1 and with N (the machine's cores), interleaved in the same run, so that
// the ratio says what the extra processes buy on this machine (the embedded database and the
// load generator share its cores).
import { availableParallelism } from "node:os";
import { Pool } from "undici";
import type { BenchContext } from "../lib/context.js";
import { benchWorld, openStore, spawnFor } from "../lib/context.js";
import { closedLoop, ratio, round, sleep, type LoadStats } from "../lib/load.js";
import { restTrigger } from "./webhook.js";

export interface ProcessesRound {
  processes: number;
  acceptedPerSec: number;
  p99Ms: number | null;
}

export interface ProcessesResult {
  concurrency: number;
  processes: number;
  rounds: ProcessesRound[];
  /** Median accepted/s with one process, and with `processes`. */
  oneProcessPerSec: number;
  manyProcessesPerSec: number;
  /** manyProcessesPerSec ÷ oneProcessPerSec. */
  speedup: number | null;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function measure(ctx: BenchContext, dbName: string, processes: number, concurrency: number, durationMs: number, tag: string): Promise<LoadStats> {
  const store = await openStore(ctx, `${dbName}_${tag}`);
  const w = await benchWorld(ctx, store);
  const server = await spawnFor(ctx, "processes", "start", `${dbName}_${tag}`, { RUNHOOK_EXECUTOR: "false", RUNHOOK_PROCESSES: String(processes) });
  try {
    await sleep(1500); // every process listening
    const pool = new Pool(server.baseUrl!, { connections: concurrency, pipelining: 1 });
    const post = restTrigger(pool, w, 202);
    try {
      return await closedLoop({ concurrency, durationMs, warmupPerWorker: 5, fn: (i) => post(`${tag}-${i}`) });
    } finally {
      await pool.close();
    }
  } finally {
    await server.stop();
  }
}

export async function processesScenario(ctx: BenchContext, opts: { concurrency: number; durationMs: number; rounds: number }): Promise<ProcessesResult> {
  const many = Math.max(2, availableParallelism());
  const dbName = `${ctx.runTag}_procs`;
  const rounds: ProcessesRound[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    // Alternating which goes first, so that neither always has the warmer machine.
    for (const n of r % 2 === 0 ? [1, many] : [many, 1]) {
      const s = await measure(ctx, dbName, n, opts.concurrency, opts.durationMs, `r${r}p${n}`);
      rounds.push({ processes: n, acceptedPerSec: round(s.okPerSec, 1), p99Ms: s.p99Ms });
      ctx.log(`  ${n} process${n > 1 ? "es" : ""}, c=${opts.concurrency}: ${round(s.okPerSec, 1)} accepted/s, p99 ${s.p99Ms} ms`);
    }
  }
  const one = median(rounds.filter((x) => x.processes === 1).map((x) => x.acceptedPerSec));
  const more = median(rounds.filter((x) => x.processes === many).map((x) => x.acceptedPerSec));
  return { concurrency: opts.concurrency, processes: many, rounds, oneProcessPerSec: one, manyProcessesPerSec: more, speedup: ratio(more, one) };
}
