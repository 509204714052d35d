// What every service implementation is built from.
import { EventEmitter } from "node:events";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import type { Store } from "./store/index.js";
import type { HealthStatus } from "./rpc/health.js";
import type { Metrics } from "./lib/metrics.js";
import type { DatabaseMonitor } from "./store/monitor.js";
import type { AuthFailureThrottle } from "./rpc/auth-throttle.js";

export interface Deps {
  /** The database, through its verbs (its collection handles, `store.db`, are for tests). */
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
  /** Failed authentications per client address, in this process (the limit before authentication). */
  authFailures: AuthFailureThrottle;
}
