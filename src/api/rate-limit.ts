// The per-token rate limit of the public API, one budget for every way in: the /v1 REST
// routes (a Fastify hook, http/v1.ts) and the LogService, NoteService and RunService RPCs over Connect,
// gRPC-Web and native gRPC (a Connect interceptor on both servers). All of them count in
// the same store bucket, `api:<sha256 of the bearer token>` (`api-ip:<client address>`
// without a token), so a token's calls share one fixed-window count whatever the protocol.
import { ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import { LogService } from "../../gen/runhook/v1/log_pb.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { bearer, hashToken } from "../domain/auth/tokens.js";
import type { Deps } from "../deps.js";
import { fail } from "../errors.js";

/** The RPC services of the public API (the groups /v1 serves over REST). */
export const API_RATE_LIMITED_SERVICES: ReadonlySet<string> = new Set([LogService.typeName, NoteService.typeName, RunService.typeName]);

/** The caller's network address, set by each server (Fastify's `req.ip`, the HTTP/2 socket's peer). */
export const clientAddressKey = createContextKey<string | undefined>(undefined, { description: "client address" });

/** The rate-limit bucket of a call: its bearer token's hash, or its client address without one. */
export function apiRateBucket(authorization: string | null | undefined, clientAddress: string | undefined): string {
  const token = bearer(authorization);
  return token ? `api:${hashToken(token)}` : `api-ip:${clientAddress ?? "unknown"}`;
}

export interface ApiRateOutcome {
  /** X-RateLimit-* and the IETF draft RateLimit / RateLimit-Policy headers, for every answer. */
  headers: Record<string, string>;
  /** RESOURCE_EXHAUSTED with `retry-after` (seconds) when over the limit. */
  error?: ConnectError;
}

/** Counts one call against `bucket` (limit: RUNHOOK_API_RATE_LIMIT per minute) and decides it. */
export async function hitApiRateLimit(deps: Deps, bucket: string, now = Date.now()): Promise<ApiRateOutcome> {
  const d = await deps.store.rateLimits.hit(bucket, deps.config.apiRateLimitPerMinute, now);
  const resetIn = Math.max(0, d.resetAt - Math.floor(now / 1000));
  const headers = {
    "x-ratelimit-limit": String(d.limit),
    "x-ratelimit-remaining": String(d.remaining),
    "x-ratelimit-reset": String(d.resetAt),
    "ratelimit-policy": `${d.limit};w=60`,
    ratelimit: `limit=${d.limit}, remaining=${d.remaining}, reset=${resetIn}`,
  };
  if (d.allowed) return { headers };
  deps.metrics.rateLimitRefusals.inc({ bucket: "api" });
  return { headers, error: fail.throttled(d.retryAfter, `rate limit of ${d.limit} requests per minute exceeded; retry after ${d.retryAfter} s`) };
}

/**
 * The same limit for LogService, NoteService and RunService RPCs (Connect, gRPC-Web, native gRPC): over it
 * the call fails with RESOURCE_EXHAUSTED and `retry-after` metadata before the implementation
 * runs; every answer carries the rate-limit headers (as response headers, or in the error's
 * metadata). Other services (triggers, administration) are not counted here.
 */
export function apiRateLimitInterceptor(deps: Deps): Interceptor {
  return (next) => async (req) => {
    if (!API_RATE_LIMITED_SERVICES.has(req.service.typeName)) return next(req);
    const { headers, error } = await hitApiRateLimit(deps, apiRateBucket(req.header.get("authorization"), req.contextValues.get(clientAddressKey)));
    const annotate = (h: Headers) => {
      for (const [k, v] of Object.entries(headers)) h.set(k, v);
    };
    if (error) {
      annotate(error.metadata);
      throw error;
    }
    try {
      const res = await next(req);
      annotate(res.header);
      return res;
    } catch (err) {
      if (err instanceof ConnectError) annotate(err.metadata);
      throw err;
    }
  };
}
