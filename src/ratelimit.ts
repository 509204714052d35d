// Fixed-window rate limits counted in MongoDB, so every instance shares one exact count.
import type { Database } from "./db/mongo.js";
import { isDuplicateKey } from "./db/mongo.js";

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix time (seconds) when the current window ends. */
  resetAt: number;
  /** Whole seconds until a caller is accepted again (0 when allowed). */
  retryAfter: number;
}

const WINDOW_MS = 60_000;

/**
 * Counts one request against `bucket` (for example `webhook:<id>`). One atomic
 * upsert-and-increment per request; the window ends on a whole minute, so the
 * Retry-After a rejected caller gets is exact: waiting that long lands in a new window.
 */
export async function hit(db: Database, bucket: string, limit: number, now = Date.now()): Promise<RateDecision> {
  const windowStart = now - (now % WINDOW_MS);
  const windowEnd = windowStart + WINDOW_MS;
  const _id = `${bucket}:${windowStart}`;
  let count: number;
  for (let attempt = 0; ; attempt++) {
    try {
      const doc = await db.rateLimits.findOneAndUpdate(
        { _id },
        { $inc: { count: 1 }, $setOnInsert: { expiresAt: new Date(windowEnd) } },
        { upsert: true, returnDocument: "after" },
      );
      count = doc!.count;
      break;
    } catch (err) {
      // Two first requests of a window raced on the upsert: the loser simply retries.
      if (!isDuplicateKey(err) || attempt > 3) throw err;
    }
  }
  const allowed = count <= limit;
  return {
    allowed,
    limit,
    remaining: Math.max(0, limit - count),
    resetAt: Math.ceil(windowEnd / 1000),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
  };
}

/** Deletes finished windows; run periodically (no TTL indexes on FerretDB). */
export async function sweep(db: Database, now = Date.now()): Promise<void> {
  await db.rateLimits.deleteMany({ expiresAt: { $lt: new Date(now - WINDOW_MS) } });
}
