// The one pipeline of every call to a service, whatever the way in: Connect, gRPC-Web and
// native gRPC (the routers of both servers), and the webhook and /v1 REST routes (the
// in-process caller). Outermost first: observed (the request id echoed; RPCs also get their
// access-log line and count, REST calls get theirs from the gateway, per HTTP request); then
// errors go out as toConnectError makes them (the database unreachable: UNAVAILABLE with
// retry-after; bugs: INTERNAL, logged); then the limit before authentication (per client
// address), then the per-token rate limit of the public API (they answer before anything else).
import type { Interceptor } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import { errorInterceptor } from "../errors.js";
import { viaKey } from "../services/context.js";
import { authThrottleInterceptor } from "./auth-throttle.js";
import { httpRouteKey } from "./in-process.js";
import { observeInterceptor } from "./observe.js";
import { apiRateLimitInterceptor } from "./rate-limit.js";

export function pipelineInterceptors(deps: Deps): Interceptor[] {
  return [
    observeInterceptor(deps),
    errorInterceptor((err, procedure, values) => {
      const via = values.get(viaKey);
      // The webhook's bugs keep their own message: operators search for it.
      if (via === "grpc") deps.logger.error({ err, procedure }, "unhandled error in an RPC");
      else deps.logger.error({ err, route: values.get(httpRouteKey) }, via === "webhook" ? "webhook trigger failed" : "unhandled error");
    }),
    authThrottleInterceptor(deps.authFailures, () => deps.metrics.rateLimitRefusals.inc({ bucket: "auth" })),
    apiRateLimitInterceptor(deps),
  ];
}
