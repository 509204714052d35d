// The smoke run's check of the bench itself: that a limit met during a load phase fails it,
// naming the limit. A server (in this process, executors off) whose project may have only a few
// ongoing runs is loaded through the REST webhook and native gRPC; each load must end in
// LimitMet naming RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT, not in a figure.
import * as grpc from "@grpc/grpc-js";
import { Pool } from "undici";
import { createLogger } from "../../src/lib/logging.js";
import { startRunhook } from "../../src/main.js";
import { benchWorld, openStore, serverConfig, type BenchContext } from "../lib/context.js";
import { LimitMet } from "../lib/limits.js";
import { closedLoop, type Outcome } from "../lib/load.js";
import { grpcTrigger, restTrigger } from "./webhook.js";

const ONGOING_LIMIT = 3;
const EXPECTED = "RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT";

/** How a load that meets the limit ended: the limit it named. */
async function limitNamedBy(what: string, fn: (i: number) => Promise<Outcome>): Promise<string> {
  try {
    const s = await closedLoop({ concurrency: 4, durationMs: 1000, fn });
    throw new Error(
      `${what}: a load past the project's ${ONGOING_LIMIT} ongoing runs ended without LimitMet (${s.ok} accepted, other ${JSON.stringify(s.other)})`,
    );
  } catch (err) {
    if (!(err instanceof LimitMet)) throw err;
    if (!err.limit.startsWith(EXPECTED)) throw new Error(`${what}: LimitMet named "${err.limit}", not ${EXPECTED}: ${err.message}`);
    return err.limit;
  }
}

export async function limitsScenario(ctx: BenchContext): Promise<{ rest: string; grpc: string }> {
  const dbName = `${ctx.runTag}_limits`;
  const store = await openStore(ctx, dbName);
  const config = serverConfig(ctx, dbName, { RUNHOOK_EXECUTOR: "false", RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT: String(ONGOING_LIMIT) });
  const rh = await startRunhook(config, { mode: "server", logger: createLogger("silent") });
  const pool = new Pool(rh.baseUrl!, { connections: 4, pipelining: 1 });
  const client = new grpc.Client(rh.grpcAddr!, grpc.credentials.createInsecure());
  try {
    // A project each: the first load's runs stay QUEUED and would refuse the second's too.
    const post = restTrigger(pool, await benchWorld(ctx, store), 202);
    const rest = await limitNamedBy("REST webhook", (i) => post(`limit-rest-${i}`));
    const call = grpcTrigger(client, await benchWorld(ctx, store));
    const grpcLimit = await limitNamedBy("gRPC TriggerRun", (i) => call(`limit-grpc-${i}`));
    ctx.log(`  a met limit fails the load: REST → ${rest}; gRPC → ${grpcLimit}`);
    return { rest, grpc: grpcLimit };
  } finally {
    client.close();
    await pool.close();
    await rh.stop();
  }
}
