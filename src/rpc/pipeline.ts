// The one pipeline of every call to a service, whatever the way in: Connect, gRPC-Web and
// native gRPC (the routers of both servers), and the webhook and /v1 REST routes (the
// in-process caller). Outermost first: observed (the request id echoed; RPCs also get their
// access-log line and count, REST calls get theirs from the gateway, per HTTP request); then
// errors go out as toConnectError makes them (the database unreachable or full: UNAVAILABLE
// with retry-after; bugs: INTERNAL, logged); then the limit before authentication (per client
// address), then the per-token rate limit of the public API (they answer before anything else).
import type { Interceptor } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import { errorInterceptor } from "./errors.js";
import type { ServerDeps } from "./server-deps.js";
import { viaKey, type Via } from "../services/context.js";
import { authThrottleInterceptor } from "./auth-throttle.js";
import { httpRouteKey } from "./in-process.js";
import { observeInterceptor } from "./observe.js";
import { sessionOnlyAsCookieInterceptor } from "./session-cookie.js";
import { adminRateLimitInterceptor, apiRateLimitInterceptor } from "./rate-limit.js";

/** The log line of a bug (its caller is told INTERNAL), by entry point: the webhook's keep their own message, operators search for it. */
export function logBug(logger: Deps["logger"], err: unknown, at: { via: Via; procedure?: string; route?: string }): void {
  if (at.via === "grpc") logger.error({ err, procedure: at.procedure }, "unhandled error in an RPC");
  else logger.error({ err, route: at.route }, at.via === "webhook" ? "webhook trigger failed" : "unhandled error");
}

export function pipelineInterceptors(deps: ServerDeps): Interceptor[] {
  return [
    observeInterceptor(deps),
    errorInterceptor((err, procedure, values) => logBug(deps.logger, err, { via: values.get(viaKey), procedure, route: values.get(httpRouteKey) })),
    authThrottleInterceptor(deps.authFailures, () => deps.metrics.rateLimitRefusals.inc({ bucket: "auth" })),
    sessionOnlyAsCookieInterceptor(),
    apiRateLimitInterceptor(deps),
    adminRateLimitInterceptor(deps),
  ];
}
