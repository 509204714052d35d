// What the services, the rules and the worker are built from (the servers add theirs: rpc/server-deps.ts).
import type { EventEmitter } from "node:events";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import type { Store } from "./store/index.js";
import type { Metrics } from "./lib/metrics.js";
import type { DatabaseMonitor } from "./store/monitor.js";

export interface Deps {
  /** The database, through its verbs (its collection handles, `store.db`, are for tests). */
  store: Store;
  config: Config;
  logger: Logger;
  /** In-process signals: `run.queued` (runId) wakes this instance's executors at once. */
  events: EventEmitter;
  /** Prometheus metrics of this instance (served on METRICS_PORT when set). */
  metrics: Metrics;
  /** Whether the database answers (a ping a second): /readyz, the health status, executors. */
  dbMonitor: DatabaseMonitor;
}
