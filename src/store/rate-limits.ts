// Fixed-window rate limits counted in MongoDB, so every instance shares one exact count; and
// counts that processes add up by themselves and share now and then (failed authentications).
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
  /**
   * Adds each bucket's `n` to its count in the window that starts at `windowStart` (one `$inc`
   * upsert per bucket with n > 0, all in one unordered bulk write; n = 0 only reads), then reads
   * the counts those buckets hold (one find): what every process added so far. The documents are
   * `hit`'s, so the same TTL index removes them once their window has ended.
   */
  share(windowStart: number, increments: ReadonlyMap<string, number>): Promise<Map<string, number>>;
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
    share: (windowStart, increments) => shareCounts(d, windowStart, increments),
  };
}

async function shareCounts(d: Database, windowStart: number, increments: ReadonlyMap<string, number>): Promise<Map<string, number>> {
  const idOf = (bucket: string) => `${bucket}:${windowStart}`;
  const expiresAt = new Date(windowStart + RATE_WINDOW_MS);
  const writes = [...increments]
    .filter(([, n]) => n > 0)
    .map(([bucket, n]) => ({ updateOne: { filter: { _id: idOf(bucket) }, update: { $inc: { count: n }, $setOnInsert: { expiresAt } }, upsert: true } }));
  if (writes.length > 0) await d.rateLimits.bulkWrite(writes, { ordered: false });
  const ids = [...increments.keys()].map(idOf);
  const docs = await d.rateLimits.find({ _id: { $in: ids } }, { projection: { count: 1 } }).toArray();
  const counts = new Map(docs.map((doc) => [doc._id, doc.count]));
  return new Map([...increments.keys()].map((bucket) => [bucket, counts.get(idOf(bucket)) ?? 0]));
}
