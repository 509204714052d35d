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
 * Next slot this process will try, per `${bucket}:${windowStart}`. Every slot below it is
 * known to be taken (by this process or, as a failed insert showed, by another one), so the
 * hint only ever skips taken slots and a refusal still means all `limit` slots are taken.
 */
const slotHints = new Map<string, number>();

function decide(limit: number, used: number | null, now: number, windowEnd: number): RateDecision {
  const allowed = used !== null && used <= limit;
  return {
    allowed,
    limit,
    remaining: allowed ? limit - used : 0,
    resetAt: Math.ceil(windowEnd / 1000),
    // The window ends on a whole minute: waiting this long lands in a new window.
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
  };
}

/**
 * Counts one request against `bucket` (for example `webhook:<id>`), exactly across instances.
 * MongoDB: one atomic upsert-and-increment of the window's counter.
 * FerretDB, whose `$inc` is not atomic under concurrency: each accepted request takes one
 * numbered slot `${bucket}:${windowStart}:${n}` (n = 1..limit) by a unique insert.
 */
export async function hit(db: Database, bucket: string, limit: number, now = Date.now()): Promise<RateDecision> {
  const windowStart = now - (now % WINDOW_MS);
  const windowEnd = windowStart + WINDOW_MS;
  const expiresAt = new Date(windowEnd);
  const window = `${bucket}:${windowStart}`;
  if (!db.serializedUpdates) {
    for (let attempt = 0; ; attempt++) {
      try {
        const doc = await db.rateLimits.findOneAndUpdate({ _id: window }, { $inc: { count: 1 }, $setOnInsert: { expiresAt } }, { upsert: true, returnDocument: "after" });
        return decide(limit, doc!.count, now, windowEnd);
      } catch (err) {
        if (!isDuplicateKey(err) || attempt > 3) throw err; // two first requests raced on the upsert
      }
    }
  }
  if (slotHints.size > 10_000) for (const k of slotHints.keys()) if (Number(k.slice(k.lastIndexOf(":") + 1)) < windowStart) slotHints.delete(k);
  for (;;) {
    // Taken synchronously, so concurrent requests of this process try different slots.
    const n = slotHints.get(window) ?? 1;
    if (n > limit) return decide(limit, null, now, windowEnd);
    slotHints.set(window, n + 1);
    try {
      await db.rateLimits.insertOne({ _id: `${window}:${n}`, count: 1, expiresAt });
      return decide(limit, n, now, windowEnd);
    } catch (err) {
      if (isDuplicateKey(err)) continue; // another instance took slot n: try the next
      // Slot n is still free: let a later request take it.
      if (slotHints.get(window) === n + 1) slotHints.set(window, n);
      throw err;
    }
  }
}

/** Deletes finished windows; run periodically (no TTL indexes on FerretDB). */
export async function sweep(db: Database, now = Date.now()): Promise<void> {
  await db.rateLimits.deleteMany({ expiresAt: { $lt: new Date(now - WINDOW_MS) } });
}
