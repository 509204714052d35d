// The per-token rate limit of the public API, one budget for every way in: the
// LogService, NoteService and RunService RPCs over Connect, gRPC-Web and native gRPC and the
// /v1 REST routes, all through this one interceptor (pipeline.ts). All of them count in
// the same store bucket, `api:<token kind>:<token id>`, so a token's calls share the
// same fixed-window counts whatever the protocol (a console session counts as the application token
// it was opened with: signing in again opens no new budget). A call must fit in three windows,
// a minute, an hour and a day (RUNHOOK_API_RATE_LIMIT, _HOURLY, _DAILY; for an organization API
// token RUNHOOK_ORG_API_RATE_LIMIT…, by default the same). Only tokens that authenticate have a bucket: a
// missing or guessed token is answered 401 first and writes nothing (failed authentications
// are limited per client address instead, auth-throttle.ts).
import { Code, ConnectError, createContextKey, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { LogService } from "../../gen/runhook/v1/log_pb.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import { authenticateAny, type AnyPrincipal } from "../domain/auth/tokens.js";
import type { ApiRateLimits } from "../config.js";
import { RATE_WINDOW_MS, type RateDecision, type RateWindow } from "../store/rate-limits.js";
import { isDatabaseFull } from "../store/index.js";
import type { Deps } from "../deps.js";
import { directoryOf } from "../services/context.js";
import type { ServerDeps } from "./server-deps.js";
import { DomainError, fail } from "../domain/errors.js";
import { codeOf, toConnectError } from "./errors.js";

/** The RPC services of the public API (the groups /v1 serves over REST). */
export const API_RATE_LIMITED_SERVICES: ReadonlySet<string> = new Set([LogService.typeName, NoteService.typeName, RunService.typeName]);

/** The caller's network address, set by each server by one rule (client-address.ts: the peer, or the client a trusted proxy forwards). */
export const clientAddressKey = createContextKey<string | undefined>(undefined, { description: "client address" });

/**
 * Headers every answer of a REST call carries, success or error (the in-process caller sets
 * it to the call's response headers; RPCs have none: their figures go in the answer's headers
 * or error metadata).
 */
export const answerHeadersKey = createContextKey<Headers | undefined>(undefined, { description: "headers of every answer of a REST call" });

/** A token's own part of a bucket's name: a console session's is the application token it stands for. */
function tokenBucket(principal: AnyPrincipal): string {
  return `${principal.kind}:${principal.token._id}`;
}

/** A call's rate-limit bucket, its windows and its metrics label. */
interface ApiBucket {
  bucket: string;
  windows: RateWindow[];
  label: string;
}

const MINUTE_S = RATE_WINDOW_MS / 1000;
const HOUR_S = 3600;
const DAY_S = 86_400;
const WINDOW_NAMES: Readonly<Record<number, string>> = { [MINUTE_S]: "minute", [HOUR_S]: "hour", [DAY_S]: "day" };

/** The windows of a token's public API limits: a minute, an hour and a day. */
export function apiRateWindows(limits: ApiRateLimits): RateWindow[] {
  return [
    { limit: limits.perMinute, seconds: MINUTE_S },
    { limit: limits.perHour, seconds: HOUR_S },
    { limit: limits.perDay, seconds: DAY_S },
  ];
}

/** The IETF draft RateLimit-Policy of these windows, e.g. `60;w=60, 1000;w=3600, 10000;w=86400`. */
export function ratePolicy(windows: readonly RateWindow[]): string {
  return windows.map((w) => `${w.limit};w=${w.seconds}`).join(", ");
}

/** The rate-limit bucket of a call, once its token authenticates (UNAUTHENTICATED otherwise, before any write). */
async function apiRateBucket(deps: Deps, authorization: string | null | undefined, values: ContextValues): Promise<ApiBucket> {
  const principal = await authenticateAny(directoryOf(deps, values), authorization);
  const bucket = `api:${tokenBucket(principal)}`;
  if (principal.kind === "org") return { bucket, windows: apiRateWindows(deps.config.orgApiRateLimit), label: "org-api" };
  return { bucket, windows: apiRateWindows(deps.config.apiRateLimit), label: "api" };
}

/**
 * The window a client has to heed: the one with the fewest requests left; of those, the one that
 * ends first, or when none are left the one that ends last (then X-RateLimit-Reset agrees with
 * Retry-After).
 */
function tightest(decisions: readonly RateDecision[]): RateDecision {
  const sooner = (d: RateDecision, t: RateDecision) => (d.remaining === 0 ? d.resetAt > t.resetAt : d.resetAt < t.resetAt);
  return decisions.reduce((t, d) => (d.remaining < t.remaining || (d.remaining === t.remaining && sooner(d, t)) ? d : t));
}

/**
 * X-RateLimit-* and the IETF draft RateLimit headers of the tightest window of a call's
 * decisions (one per window), and RateLimit-Policy listing every window.
 */
function rateLimitHeaders(decisions: readonly RateDecision[], now = Date.now()): Record<string, string> {
  const d = tightest(decisions);
  const resetIn = Math.max(0, d.resetAt - Math.floor(now / 1000));
  return {
    "x-ratelimit-limit": String(d.limit),
    "x-ratelimit-remaining": String(d.remaining),
    "x-ratelimit-reset": String(d.resetAt),
    "ratelimit-policy": ratePolicy(decisions.map((w) => ({ limit: w.limit, seconds: w.windowSeconds }))),
    ratelimit: `limit=${d.limit}, remaining=${d.remaining}, reset=${resetIn}`,
  };
}

/** Sets the rate-limit headers of a call's decisions (one per window) on an answer's headers. */
export function setRateLimitHeaders(h: Headers, decisions: readonly RateDecision[]): void {
  for (const [k, v] of Object.entries(rateLimitHeaders(decisions))) h.set(k, v);
}

interface ApiRateOutcome {
  /** X-RateLimit-* and the IETF draft RateLimit / RateLimit-Policy headers, for every answer. */
  headers: Record<string, string>;
  /** RESOURCE_EXHAUSTED with `retry-after` (seconds) when over the limit. */
  error?: DomainError;
}

/**
 * Counts one call against every window of `bucket` (`label` names it in the metrics) and decides
 * it: refused when over any. A full database cannot count it: the call goes on uncounted, without
 * the headers (so that reads still answer; a write is refused on its own).
 */
export async function hitRateLimits(deps: Deps, bucket: string, windows: readonly RateWindow[], label: string, now = Date.now()): Promise<ApiRateOutcome> {
  let decisions: RateDecision[];
  try {
    decisions = await deps.store.rateLimits.hitWindows(bucket, windows, now);
  } catch (err) {
    if (isDatabaseFull(err)) return { headers: {} };
    throw err;
  }
  const headers = rateLimitHeaders(decisions, now);
  const refusing = decisions.filter((d) => !d.allowed);
  if (refusing.length === 0) return { headers };
  deps.metrics.rateLimitRefusals.inc({ bucket: label });
  // The call fits again once every refusing window has ended: the last of them names the wait.
  const d = refusing.reduce((last, r) => (r.retryAfter > last.retryAfter ? r : last));
  const per = WINDOW_NAMES[d.windowSeconds] ?? `${d.windowSeconds} s`;
  return { headers, error: fail.throttled(d.retryAfter, `rate limit of ${d.limit} requests per ${per} exceeded; retry after ${d.retryAfter} s`) };
}

/** Counts one call against `bucket`'s one-minute window (`limit` a minute) and decides it. */
export function hitRateLimit(deps: Deps, bucket: string, limit: number, label: string, now = Date.now()): Promise<ApiRateOutcome> {
  return hitRateLimits(deps, bucket, [{ limit, seconds: MINUTE_S }], label, now);
}

/** The bucket of a call; a REST call's 401 shows the figures of its address's limit on failed authentications instead, as they will be once it counts. */
async function bucketOrRefusal(deps: ServerDeps, authorization: string | null, values: ContextValues): Promise<ApiBucket> {
  const answerHeaders = values.get(answerHeadersKey);
  try {
    return await apiRateBucket(deps, authorization, values);
  } catch (err) {
    if (answerHeaders && codeOf(err) === Code.Unauthenticated) {
      const d = deps.authFailures.check(values.get(clientAddressKey));
      setRateLimitHeaders(answerHeaders, [{ ...d, remaining: Math.max(0, d.remaining - 1) }]);
    }
    throw err;
  }
}

/**
 * The limit of LogService, NoteService and RunService calls (/v1 REST, Connect, gRPC-Web,
 * native gRPC): over it the call fails with RESOURCE_EXHAUSTED and `retry-after` metadata
 * before the implementation runs; every answer carries the rate-limit headers (as response
 * headers, or in the error's metadata; a REST answer as HTTP headers, whatever it is). Other
 * services (triggers, administration) are not counted here.
 */
export function apiRateLimitInterceptor(deps: ServerDeps): Interceptor {
  return (next) => async (req) => {
    if (!API_RATE_LIMITED_SERVICES.has(req.service.typeName)) return next(req);
    const answerHeaders = req.contextValues.get(answerHeadersKey);
    const bucket = await bucketOrRefusal(deps, req.header.get("authorization"), req.contextValues);
    const { headers, error } = await hitRateLimits(deps, bucket.bucket, bucket.windows, bucket.label);
    const annotate = (h: Headers) => {
      for (const [k, v] of Object.entries(headers)) h.set(k, v);
    };
    if (answerHeaders) annotate(answerHeaders);
    if (error) {
      const refused = toConnectError(error);
      annotate(refused.metadata);
      throw refused;
    }
    try {
      const res = await next(req);
      annotate(res.header);
      return res;
    } catch (err) {
      // A refusal goes out with the headers too (the error table makes it a ConnectError here);
      // anything else is left as it is for the error interceptor (a bug is logged there).
      const refused = err instanceof DomainError ? toConnectError(err) : err;
      if (refused instanceof ConnectError) annotate(refused.metadata);
      throw refused;
    }
  };
}

/** AdminService calls that carry no token (the operator's secret authenticates them; the failed-authentication limit guards it). */
const ADMIN_WITHOUT_TOKEN = new Set(["Bootstrap", "IssueSsoToken"]);

/**
 * The limit of AdminService calls: per token (RUNHOOK_ADMIN_RATE_LIMIT a minute) and per
 * organization (RUNHOOK_ADMIN_ORG_RATE_LIMIT), so that no caller, and no tenant with many
 * tokens, can change the directory in a loop (each change makes every process read the
 * directory afresh). Over either, RESOURCE_EXHAUSTED with `retry-after`, before the call runs.
 */
export function adminRateLimitInterceptor(deps: ServerDeps): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== AdminService.typeName || ADMIN_WITHOUT_TOKEN.has(req.method.name)) return next(req);
    const authorization = req.header.get("authorization");
    const principal = await authenticateAny(directoryOf(deps, req.contextValues), authorization);
    const { perToken, perOrganization } = deps.config.adminRateLimit;
    // The organization counts only the calls its token's own limit let through.
    const token = await hitRateLimit(deps, `admin:${tokenBucket(principal)}`, perToken, "admin");
    const decided = token.error ? token : await hitRateLimit(deps, `admin-org:${principal.user.organizationId}`, perOrganization, "admin-org");
    if (decided.error) {
      const refused = toConnectError(decided.error);
      for (const [k, v] of Object.entries(decided.headers)) refused.metadata.set(k, v);
      throw refused;
    }
    return next(req);
  };
}
