// Prometheus metrics (prom-client), one registry per runhook instance, served on their own
// port (METRICS_PORT) so that they never share the public gateway.
import { createServer, type Server } from "node:http";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** How long a queue sample is reused: the gauges are read cheaply, not per scrape burst. */
const QUEUE_SAMPLE_MS = 5_000;
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const RUN_BUCKETS = [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];

export interface QueueSample {
  depth: number;
  /** Seconds since the oldest QUEUED run was created (0 when none is queued). */
  oldestAgeSeconds: number;
}

export type Metrics = ReturnType<typeof createMetrics>;

export function createMetrics(sampleQueue: () => Promise<QueueSample>) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let sample: { at: number; value: Promise<QueueSample> } | undefined;
  const queue = () => {
    if (!sample || Date.now() - sample.at > QUEUE_SAMPLE_MS)
      sample = { at: Date.now(), value: sampleQueue().catch(() => ({ depth: NaN, oldestAgeSeconds: NaN })) };
    return sample.value;
  };
  const registers = [registry];
  return {
    registry,
    httpDuration: new Histogram({
      name: "runhook_http_request_duration_seconds",
      help: "HTTP requests of the gateway by route template and status",
      labelNames: ["method", "route", "status"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    webhookAnswers: new Counter({
      name: "runhook_webhook_answers_total",
      help: "Webhook calls by answer status (202, 400, 401, 403, 404, 409, 413, 429, 503…)",
      labelNames: ["status"],
      registers,
    }),
    rpcCalls: new Counter({
      name: "runhook_rpc_calls_total",
      help: "RPCs (native gRPC and Connect) by service, method and code",
      labelNames: ["protocol", "service", "method", "code"],
      registers,
    }),
    runsCreated: new Counter({ name: "runhook_runs_created_total", help: "Runs stored QUEUED", registers }),
    runsFinished: new Counter({ name: "runhook_runs_finished_total", help: "Runs finished, by final state", labelNames: ["state"], registers }),
    pickupSeconds: new Histogram({
      name: "runhook_run_pickup_seconds",
      help: "From a run's creation to its first claim by an executor",
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    runSeconds: new Histogram({
      name: "runhook_run_duration_seconds",
      help: "From a run's creation to its end, by final state",
      labelNames: ["state"],
      buckets: RUN_BUCKETS,
      registers,
    }),
    leaseTakeovers: new Counter({
      name: "runhook_lease_takeovers_total",
      help: "RUNNING runs claimed again after their executor's lease expired (or it let them go)",
      registers,
    }),
    dbErrors: new Counter({ name: "runhook_db_errors_total", help: "Database commands that failed, by command", labelNames: ["command"], registers }),
    rateLimitRefusals: new Counter({
      name: "runhook_rate_limit_refusals_total",
      help: "Requests refused by a rate limit, by bucket kind",
      labelNames: ["bucket"],
      registers,
    }),
    queueDepth: new Gauge({
      name: "runhook_queue_depth",
      help: "QUEUED runs (sampled at most every 5 s)",
      registers,
      async collect() {
        this.set((await queue()).depth);
      },
    }),
    queueOldestAge: new Gauge({
      name: "runhook_queue_oldest_age_seconds",
      help: "Age of the oldest QUEUED run (sampled at most every 5 s)",
      registers,
      async collect() {
        this.set((await queue()).oldestAgeSeconds);
      },
    }),
  };
}

/** What a run tells the metrics when it is claimed or finished (structural: lib imports nothing of runhook). */
interface RunTimes {
  state: string;
  createdAt: Date;
  startedAt?: Date | null;
  finishedAt?: Date | null;
}

/** What the run state machine tells the metrics (domain/runs/state.ts RunHooks). */
export function runMetrics(m: Metrics) {
  return {
    claimed(run: RunTimes) {
      if (run.startedAt) m.pickupSeconds.observe(Math.max(0, run.startedAt.getTime() - run.createdAt.getTime()) / 1000);
    },
    takenOver() {
      m.leaseTakeovers.inc();
    },
    finished(run: RunTimes) {
      m.runsFinished.inc({ state: run.state });
      if (run.finishedAt) m.runSeconds.observe({ state: run.state }, Math.max(0, run.finishedAt.getTime() - run.createdAt.getTime()) / 1000);
    },
  };
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** GET /metrics in the Prometheus text format; everything else is 404. */
export async function startMetricsServer(registry: { metrics(): Promise<string>; contentType: string }, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(`metrics unavailable ${String(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
