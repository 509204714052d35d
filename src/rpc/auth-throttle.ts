// The limit before authentication: per client address, failed authentications (401s, a
// missing token included) are counted in fixed one-minute windows, and an address over the
// limit is answered 429 before anything else — before its token (or the bootstrap secret) is
// even looked at, so guessing stops whatever the guess. It covers every way in: the webhook
// and /v1 and every RPC over Connect, gRPC-Web and native gRPC, AdminService.Bootstrap
// included: one interceptor, in the pipeline of every call (pipeline.ts).
//
// Counted in memory, per process, on purpose: a guess never costs the database anything (a
// flood of failures from many addresses would otherwise be a flood of writes on the shared
// MongoDB). The price: behind N instances an address may fail up to N × the limit a minute.
import { isIPv4, isIPv6 } from "node:net";
import { Code, type Interceptor } from "@connectrpc/connect";
import { fail, type DomainError } from "../domain/errors.js";
import { codeOf } from "./errors.js";
import type { RateDecision } from "../store/rate-limits.js";
import { answerHeadersKey, API_RATE_LIMITED_SERVICES, clientAddressKey, setRateLimitHeaders } from "./rate-limit.js";

const WINDOW_MS = 60_000;
/**
 * Beyond this many failing addresses in one window, a new one is counted with its network
 * (coarseBucket), so memory stays bounded and an attacker who fills the table blocks new
 * clients of its own networks only, not every new client of the service.
 */
const MAX_ADDRESSES = 100_000;
/** Beyond this many networks too (out of reach: IPv4 has 65,536 /16s), the rest share one bucket. */
const MAX_NETWORKS = 100_000;
const OVERFLOW = "overflow";

/**
 * The bucket of an address: IPv4 as is (also when IPv4-mapped), IPv6 by its /64 prefix (one
 * host usually holds a whole /64, so single IPv6 addresses would make the limit moot).
 */
export function addressBucket(address: string | undefined): string {
  if (!address) return "unknown";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIPv4(address) || !isIPv6(address)) return address;
  const [head, tail = ""] = address.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = address.includes("::") ? [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t] : h;
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}

/** The network of an address bucket, once the table is full: IPv4 by /16, IPv6 by /32 (a provider's allocation). */
export function coarseBucket(bucket: string): string {
  const v4 = /^(\d+)\.(\d+)\.\d+\.\d+$/.exec(bucket);
  if (v4) return `${v4[1]}.${v4[2]}.0.0/16`;
  const v6 = /^([0-9a-f]+):([0-9a-f]+):[0-9a-f]+:[0-9a-f]+::\/64$/.exec(bucket);
  if (v6) return `${v6[1]}:${v6[2]}::/32`;
  return OVERFLOW;
}

export class AuthFailureThrottle {
  private window = 0;
  private failures = new Map<string, number>();

  constructor(readonly limit: number) {}

  /** The address's bucket in the current window (a new window starts empty). */
  private bucketOf(address: string | undefined, now: number): string {
    const start = now - (now % WINDOW_MS);
    if (start !== this.window) {
      this.window = start;
      this.failures.clear();
    }
    const b = addressBucket(address);
    if (this.failures.has(b) || this.failures.size < MAX_ADDRESSES) return b;
    const network = coarseBucket(b);
    return this.failures.has(network) || this.failures.size < MAX_ADDRESSES + MAX_NETWORKS ? network : OVERFLOW;
  }

  /** The address's standing before a call: allowed while it has fewer failures than the limit this window. */
  check(address: string | undefined, now = Date.now()): RateDecision {
    const count = this.failures.get(this.bucketOf(address, now)) ?? 0;
    const windowEnd = this.window + WINDOW_MS;
    const allowed = count < this.limit;
    return {
      allowed,
      limit: this.limit,
      remaining: Math.max(0, this.limit - count),
      resetAt: Math.ceil(windowEnd / 1000),
      retryAfter: allowed ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
    };
  }

  /** Counts one failed authentication of the address. */
  fail(address: string | undefined, now = Date.now()): void {
    const b = this.bucketOf(address, now);
    this.failures.set(b, (this.failures.get(b) ?? 0) + 1);
  }
}

/** The 429 of an address over the limit. */
function authThrottled(d: RateDecision): DomainError {
  return fail.throttled(d.retryAfter, `too many failed authentications from this address; retry after ${d.retryAfter} s`);
}

/** Every RPC on both servers: refused while its address is over the limit; a 401 counts one failure. */
export function authThrottleInterceptor(throttle: AuthFailureThrottle, onRefusal: () => void): Interceptor {
  return (next) => async (req) => {
    // Health and reflection take no token: never refused here.
    if (!req.service.typeName.startsWith("runhook.")) return next(req);
    const address = req.contextValues.get(clientAddressKey);
    const d = throttle.check(address);
    if (!d.allowed) {
      onRefusal();
      // Every /v1 answer carries rate-limit figures: here, those of this limit.
      const answerHeaders = req.contextValues.get(answerHeadersKey);
      if (answerHeaders && API_RATE_LIMITED_SERVICES.has(req.service.typeName)) setRateLimitHeaders(answerHeaders, d);
      throw authThrottled(d);
    }
    try {
      return await next(req);
    } catch (err) {
      if (codeOf(err) === Code.Unauthenticated) throttle.fail(address);
      throw err;
    }
  };
}
