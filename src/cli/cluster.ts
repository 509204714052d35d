// `runhook start` and `runhook worker` as RUNHOOK_PROCESSES processes (node:cluster), so that
// one machine's cores all serve: a Node process uses one. The primary process serves no
// request: it starts the embedded database (if no MONGODB_URI) that the processes join, serves
// /metrics summed over them, restarts one that dies, and stops them all on SIGINT/SIGTERM.
// The processes share the HTTP and gRPC ports (the primary hands out the connections).
// Only the first process of `start` runs executors and seeds the demo, so the executors are
// not multiplied by the processes; each process of `worker` runs executors (that is its job).
import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";
import { AggregatorRegistry } from "prom-client";
import type { Config } from "../config.js";
import { checkListenPorts, portsFor, serveMetrics, startEmbedded } from "../main.js";

/** The env var telling a process of the cluster its number (1…N). */
export const PROCESS_INDEX_ENV = "RUNHOOK_PROCESS_INDEX";

/** This process's number in a cluster (1…N), or undefined outside one. */
export function processIndex(): number | undefined {
  return cluster.isWorker ? Number(process.env[PROCESS_INDEX_ENV]) : undefined;
}

/** A process that dies is started again after this long (not in a tight loop if it dies at once). */
const RESTART_AFTER_MS = 1000;

/** Runs the primary of `n` processes of `command` until SIGINT/SIGTERM; the exit code. */
export async function runPrimary(command: "start" | "worker", n: number, config: Config, logger: Logger): Promise<number> {
  const ports = portsFor(config, command === "start" ? "server" : "worker");
  await checkListenPorts(ports);
  // The database the processes join (each one's launcher finds it by the data dir's state file).
  const embedded = config.mongodbUri ? undefined : await startEmbedded(config, logger, command === "start" ? "server" : "worker");
  const sum = ports.metrics && new AggregatorRegistry();
  const metrics =
    sum &&
    (await serveMetrics(ports, { metrics: () => sum.clusterMetrics(), contentType: sum.contentType }, logger, {
      msg: "metrics at /metrics, summed over the processes",
      fields: { processes: n },
    }));
  let stopping = false;
  const fork = (index: number): Worker => {
    const worker = cluster.fork({ [PROCESS_INDEX_ENV]: String(index) });
    worker.once("exit", (code, signal) => {
      if (stopping) return;
      logger.error({ process: index, code, signal }, "a runhook process died: starting it again");
      setTimeout(() => !stopping && fork(index), RESTART_AFTER_MS).unref();
    });
    return worker;
  };
  logger.info({ processes: n }, `starting ${n} runhook processes`);
  for (let i = 1; i <= n; i++) fork(i);
  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, "shutting down the processes");
      const running = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());
      let left = running.length;
      if (left === 0) resolve();
      for (const w of running) {
        w.once("exit", () => --left === 0 && resolve());
        w.process.kill("SIGTERM");
      }
    };
    process.once("SIGINT", () => stop("SIGINT"));
    process.once("SIGTERM", () => stop("SIGTERM"));
  });
  await metrics?.close();
  await embedded?.stop();
  return 0;
}
