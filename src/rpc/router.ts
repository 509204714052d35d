// What both Connect servers (the Fastify gateway and the native gRPC server) serve, and how:
// every service with the standard health and reflection services, the limit on failed
// authentications per client address, the public API's per-token rate limit on LogService,
// NoteService and RunService (shared with /v1 REST), the read limit, and the check that refuses
// request messages nested too deep, with INVALID_ARGUMENT.
import type { ConnectRouter, ConnectRouterOptions } from "@connectrpc/connect";
import type { ServerDeps } from "./server-deps.js";
import { Health, registerHealth } from "./health.js";
import { registerReflection } from "./reflection.js";
import { registerServices, SERVICE_DESCS, type Services } from "../services/index.js";
import { guardMessageNesting, nestingReadOptions } from "./message-nesting.js";
import { pipelineInterceptors } from "./pipeline.js";

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
    // The same interceptors as the webhook and /v1 (pipeline.ts).
    interceptors: pipelineInterceptors(deps),
    readMaxBytes,
    binaryOptions: nestingReadOptions,
    jsonOptions: nestingReadOptions,
  };
}
