// Fixed-window rate limits counted in MongoDB, so every instance shares one exact count.
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";

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
  return {
    async hit(bucket, limit, now = Date.now()) {
      const windowStart = now - (now % RATE_WINDOW_MS);
      const windowEnd = windowStart + RATE_WINDOW_MS;
      const _id = `${bucket}:${windowStart}`;
      // One atomic upsert-and-increment; two first requests of a window can race on the
      // upsert's insert, and the loser simply increments the document the winner made.
      let count: number;
      for (let attempt = 0; ; attempt++) {
        try {
          // "before" + 1, for the reason given in counters.ts.
          const before = await d.rateLimits.findOneAndUpdate(
            { _id },
            { $inc: { count: 1 }, $setOnInsert: { expiresAt: new Date(windowEnd) } },
            { upsert: true, returnDocument: "before" },
          );
          count = (before?.count ?? 0) + 1;
          break;
        } catch (err) {
          if (!isDuplicateKey(err) || attempt >= 3) throw err;
        }
      }
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
