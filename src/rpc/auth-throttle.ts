// The limit before authentication: per client address, failed authentications (401s, a
// missing token included) are counted in fixed one-minute windows, and an address over the
// limit is answered 429 before anything else — before its token (or the bootstrap secret) is
// even looked at, so guessing stops whatever the guess. It covers every way in: the webhook
// and /v1 and every RPC over Connect, gRPC-Web and native gRPC, AdminService.Bootstrap
// included: one interceptor, in the pipeline of every call (pipeline.ts). The address is the
// client's by the rule both servers share (client-address.ts): behind a trusted proxy, the
// address it forwards, on native gRPC as on HTTP.
//
// One limit for the whole deployment, at little cost to the database: each process counts in
// memory (a check never waits for the database, and a guess never costs a write of its own),
// and shares its counts through MongoDB at most once a second per address bucket — one `$inc`
// upsert of the bucket's window document (the per-token limits' documents, store/rate-limits.ts,
// `auth:<bucket>:<window>`), then one read of the totals every process added. An address is
// judged by the last total read plus what this process counted since. So behind N processes an
// address gets the limit, plus what the others let through in the second before they read the
// total (about one failure each per second), not N × the limit. Sharing never makes a call wait
// and never fails one: a database error leaves the counts to the next second (the local count
// still holds meanwhile).
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

/** A bucket's count in the current window. */
interface Count {
  /** Failures this process counted. */
  local: number;
  /** Of those, not yet sent to the database. */
  unshared: number;
  /** Of those, being sent. */
  sending: number;
  /** The total every process had added, as last read (it includes what this process had sent). */
  shared: number;
}

/** How a throttle shares its counts (the store's verb, store/rate-limits.ts), and what it does with an error. */
export interface SharedCounts {
  share(windowStart: number, increments: ReadonlyMap<string, number>): Promise<Map<string, number>>;
  onError(err: unknown): void;
}

/** Each bucket is shared at most this often. */
const SHARE_EVERY_MS = 1000;
/** At most this many buckets in one round (one bulk write and one read); the others wait for the next. */
const SHARE_BATCH = 10_000;
/** The documents of these counts, among the other rate limits'. */
const SHARED_PREFIX = "auth:";

export class AuthFailureThrottle {
  private window = 0;
  private counts = new Map<string, Count>();
  /** Buckets with failures not yet shared, in the order they came. */
  private pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private sharing = false;
  private sharedAt = 0;
  private closed = false;

  /** Without `shared`, counts stay in this process (the unit tests). */
  constructor(
    readonly limit: number,
    private readonly shared?: SharedCounts,
  ) {}

  /** The address's bucket in the current window (a new window starts empty). */
  private bucketOf(address: string | undefined, now: number): string {
    const start = now - (now % WINDOW_MS);
    if (start !== this.window) {
      this.window = start;
      this.counts.clear();
      this.pending.clear();
    }
    const b = addressBucket(address);
    if (this.counts.has(b) || this.counts.size < MAX_ADDRESSES) return b;
    const network = coarseBucket(b);
    return this.counts.has(network) || this.counts.size < MAX_ADDRESSES + MAX_NETWORKS ? network : OVERFLOW;
  }

  /** A bucket's count as this process knows it: the last shared total and what it counted since, or its own count if more. */
  private countOf(bucket: string): number {
    const c = this.counts.get(bucket);
    return c ? Math.max(c.local, c.shared + c.unshared + c.sending) : 0;
  }

  /** The address's standing before a call: allowed while it has fewer failures than the limit this window. */
  check(address: string | undefined, now = Date.now()): RateDecision {
    const count = this.countOf(this.bucketOf(address, now));
    const windowEnd = this.window + WINDOW_MS;
    const allowed = count < this.limit;
    return {
      allowed,
      limit: this.limit,
      remaining: Math.max(0, this.limit - count),
      resetAt: Math.ceil(windowEnd / 1000),
      retryAfter: allowed ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
      windowSeconds: WINDOW_MS / 1000,
    };
  }

  /** Counts one failed authentication of the address (shared with the other processes within a second). */
  fail(address: string | undefined, now = Date.now()): void {
    const b = this.bucketOf(address, now);
    const c = this.counts.get(b) ?? { local: 0, unshared: 0, sending: 0, shared: 0 };
    this.counts.set(b, c);
    c.local++;
    c.unshared++;
    this.pending.add(b);
    this.schedule();
  }

  /** Stops sharing (the process is stopping). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The next round: at once if the last was a second ago or more, else when it is. */
  private schedule(): void {
    if (!this.shared || this.closed || this.timer || this.sharing || this.pending.size === 0) return;
    this.timer = setTimeout(() => void this.shareRound(), Math.max(0, this.sharedAt + SHARE_EVERY_MS - Date.now()));
    this.timer.unref();
  }

  /** Sends the pending counts and reads the totals back; never throws, never holds a call. */
  private async shareRound(): Promise<void> {
    this.timer = undefined;
    this.sharing = true;
    this.sharedAt = Date.now();
    const window = this.window;
    // Counts of a window that has ended limit nothing any more.
    if (this.sharedAt >= window + WINDOW_MS) this.pending.clear();
    const round: Array<[string, Count, number]> = [];
    for (const b of this.pending) {
      if (round.length >= SHARE_BATCH) break;
      this.pending.delete(b);
      const c = this.counts.get(b);
      if (!c) continue;
      round.push([b, c, c.unshared]);
      c.sending += c.unshared;
      c.unshared = 0;
    }
    if (round.length === 0) {
      this.sharing = false;
      return;
    }
    try {
      const totals = await this.shared!.share(window, new Map(round.map(([b, , n]) => [SHARED_PREFIX + b, n])));
      for (const [b, c, n] of round) {
        c.sending -= n;
        c.shared = Math.max(c.shared, totals.get(SHARED_PREFIX + b) ?? 0);
      }
    } catch (err) {
      // Sent or not, it is sent again next round (a count can only come out higher, never lower).
      for (const [b, c, n] of round) {
        c.sending -= n;
        c.unshared += n;
        if (this.window === window) this.pending.add(b);
      }
      try {
        this.shared!.onError(err);
      } catch {}
    } finally {
      this.sharing = false;
      this.schedule();
    }
  }
}

/** The 429 of an address over the limit. */
export function authThrottled(d: RateDecision): DomainError {
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
      if (answerHeaders && API_RATE_LIMITED_SERVICES.has(req.service.typeName)) setRateLimitHeaders(answerHeaders, [d]);
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
