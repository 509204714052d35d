// Fixed-window rate limits counted in MongoDB, so every instance shares one exact count.
import type { Database } from "./connection.js";
import { groupedIncrement } from "./group-commit.js";

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix time (seconds) when the current window ends. */
  resetAt: number;
  /** Whole seconds until a caller is accepted again (0 when allowed). */
  retryAfter: number;
}

export const RATE_WINDOW_MS = 60_000;

export interface RateLimitStore {
  /** Counts one request against `bucket` (for example `webhook:<id>`) and decides it. */
  hit(bucket: string, limit: number, now?: number): Promise<RateDecision>;
}

export function rateLimitStore(d: Database): RateLimitStore {
  // One atomic upsert-and-increment per window document, shared by the calls that arrive
  // together (group-commit.ts): each gets its own count, as if it had incremented alone.
  const windowEndOf = (id: string) => Number(id.slice(id.lastIndexOf(":") + 1)) + RATE_WINDOW_MS;
  const increment = groupedIncrement(() => d.rateLimits, "count", { onInsert: (id) => ({ expiresAt: new Date(windowEndOf(id)) }) });
  return {
    async hit(bucket, limit, now = Date.now()) {
      const windowStart = now - (now % RATE_WINDOW_MS);
      const windowEnd = windowStart + RATE_WINDOW_MS;
      const count = (await increment(`${bucket}:${windowStart}`)).value;
      const allowed = count <= limit;
      return {
        allowed,
        limit,
        remaining: allowed ? limit - count : 0,
        resetAt: Math.ceil(windowEnd / 1000),
        // The window ends on a whole minute: waiting this long lands in a new window.
        retryAfter: allowed ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
      };
    },
  };
}
