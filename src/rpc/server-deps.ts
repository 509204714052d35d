// What both servers (the Fastify gateway and the native gRPC server) are built from: the
// services' Deps, and the per-process state only the servers hold.
import type { Deps } from "../deps.js";
import type { HealthStatus } from "./health.js";
import type { AuthFailureThrottle } from "./auth-throttle.js";

export interface ServerDeps extends Deps {
  /** Serving status reported by grpc.health.v1 on both servers. */
  health: HealthStatus;
  /** Failed authentications per client address (the limit before authentication): counted in this process, shared through the database. */
  authFailures: AuthFailureThrottle;
}
