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
 * Counts one request against `bucket` (for example `webhook:<id>`). Each accepted request
 * claims one numbered slot `${bucket}:${windowStart}:${n}` (n = 1..limit) by inserting it:
 * the unique _id makes the count exact across instances even on servers whose `$inc` is
 * not atomic under concurrency (FerretDB loses concurrent increments). A request is refused
 * only when every slot of the window is taken. The window ends on a whole minute, so the
 * Retry-After a rejected caller gets is exact: waiting that long lands in a new window.
 */
export async function hit(db: Database, bucket: string, limit: number, now = Date.now()): Promise<RateDecision> {
  const windowStart = now - (now % WINDOW_MS);
  const windowEnd = windowStart + WINDOW_MS;
  const prefix = `${bucket}:${windowStart}:`;
  const expiresAt = new Date(windowEnd);
  const decision = (slot: number | null): RateDecision => ({
    allowed: slot !== null,
    limit,
    remaining: slot === null ? 0 : Math.max(0, limit - slot),
    resetAt: Math.ceil(windowEnd / 1000),
    retryAfter: slot !== null ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
  });
  // Slots taken so far (a lower bound under concurrency; the inserts settle it exactly).
  let n = (await db.rateLimits.countDocuments({ _id: { $gte: prefix, $lt: `${bucket}:${windowStart};` } })) + 1;
  for (; n <= limit; n++) {
    try {
      await db.rateLimits.insertOne({ _id: prefix + n, count: 1, expiresAt });
      return decision(n);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err; // slot taken by a concurrent request: try the next
    }
  }
  return decision(null);
}

/** Deletes finished windows; run periodically (no TTL indexes on FerretDB). */
export async function sweep(db: Database, now = Date.now()): Promise<void> {
  await db.rateLimits.deleteMany({ expiresAt: { $lt: new Date(now - WINDOW_MS) } });
}
