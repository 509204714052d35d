// What every service implementation is built from.
import { EventEmitter } from "node:events";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import type { Database, Store } from "./store/index.js";
import type { HealthStatus } from "./api/health.js";
import type { Metrics } from "./metrics.js";
import type { DatabaseMonitor } from "./db-monitor.js";

export interface Deps {
  /** Collection handles: administration and tests. Everything else uses `store`'s verbs. */
  db: Database;
  store: Store;
  config: Config;
  logger: Logger;
  /** In-process signals: `run.queued` (runId) wakes this instance's executors at once. */
  events: EventEmitter;
  /** Serving status reported by grpc.health.v1 on both servers. */
  health: HealthStatus;
  /** Prometheus metrics of this instance (served on METRICS_PORT when set). */
  metrics: Metrics;
  /** Whether the database answers (a ping a second): /readyz, the health status, executors. */
  dbMonitor: DatabaseMonitor;
}
