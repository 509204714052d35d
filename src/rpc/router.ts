// What both Connect servers (the Fastify gateway and the native gRPC server) serve, and how:
// every service with the standard health and reflection services, the limit on failed
// authentications per client address, the public API's per-token rate limit on LogService,
// NoteService and RunService (shared with /v1 REST), the read limit, and the check that refuses
// request messages nested too deep, with INVALID_ARGUMENT.
import type { ConnectRouter, ConnectRouterOptions } from "@connectrpc/connect";
import { apiRateLimitInterceptor } from "./rate-limit.js";
import { authThrottleInterceptor } from "./auth-throttle.js";
import type { ServerDeps } from "./server-deps.js";
import { Health, registerHealth } from "./health.js";
import { registerReflection } from "./reflection.js";
import { registerServices, SERVICE_DESCS, type Services } from "../services/index.js";
import { guardMessageNesting, nestingReadOptions } from "./message-nesting.js";
import { observeInterceptor } from "./observe.js";
import { errorInterceptor } from "./errors.js";

export function connectServerOptions(deps: ServerDeps, services: Services): ConnectRouterOptions & { routes: (router: ConnectRouter) => void } {
  const readMaxBytes = deps.config.bodyLimitBytes;
  return {
    routes: (router) => {
      registerServices(router, services);
      // The standard health and reflection services, so grpcurl and `buf curl` work without our protos.
      registerHealth(router, deps.health);
      registerReflection(router, [...SERVICE_DESCS, Health]);
      guardMessageNesting(router, readMaxBytes);
    },
    // Observed first (every answer gets its request id and is counted); then errors go out as
    // toConnectError makes them (the database unreachable: UNAVAILABLE with retry-after; bugs:
    // INTERNAL, logged); then the limit before authentication (per client address), then the
    // per-token rate limit, like /v1 (they answer before anything else).
    interceptors: [
      observeInterceptor(deps),
      errorInterceptor((err, procedure) => deps.logger.error({ err, procedure }, "unhandled error in an RPC")),
      authThrottleInterceptor(deps.authFailures, () => deps.metrics.rateLimitRefusals.inc({ bucket: "auth" })),
      apiRateLimitInterceptor(deps),
    ],
    readMaxBytes,
    binaryOptions: nestingReadOptions,
    jsonOptions: nestingReadOptions,
  };
}
