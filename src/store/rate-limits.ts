// Fixed-window rate limits counted in MongoDB, so every instance shares one exact count; and
// counts that processes add up by themselves and share now and then (failed authentications).
import type { Database } from "./connection.js";
import { batched, ok } from "../lib/batch.js";
import { groupedIncrement, STORE_BATCHING, type Taken } from "./group-commit.js";

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix time (seconds) when the current window ends. */
  resetAt: number;
  /** Whole seconds until a caller is accepted again (0 when allowed). */
  retryAfter: number;
  /** The window's length in seconds (60: a minute). */
  windowSeconds: number;
}

/** A fixed window of a limit: at most `limit` requests per `seconds`, windows aligned on the Unix epoch (a day is a UTC day). */
export interface RateWindow {
  limit: number;
  seconds: number;
}

export const RATE_WINDOW_MS = 60_000;

export interface RateLimitStore {
  /** Counts one request against `bucket` (for example `webhook:<id>`) in its one-minute window and decides it. */
  hit(bucket: string, limit: number, now?: number): Promise<RateDecision>;
  /**
   * Counts one request against each window of `bucket` and decides it in each (one decision per
   * window, in their order): the request is accepted when every window allows it. A refused
   * request stays counted in the windows that refused it only.
   */
  hitWindows(bucket: string, windows: readonly RateWindow[], now?: number): Promise<RateDecision[]>;
  /**
   * Adds each bucket's `n` to its count in the window that starts at `windowStart` (one `$inc`
   * upsert per bucket with n > 0, all in one unordered bulk write; n = 0 only reads), then reads
   * the counts those buckets hold (one find): what every process added so far. The documents are
   * `hit`'s, so the same TTL index removes them once their window has ended.
   */
  share(windowStart: number, increments: ReadonlyMap<string, number>): Promise<Map<string, number>>;
}

/** A window's document: a minute's keeps its older name, `<bucket>:<start ms>`; a longer one names its length. */
function windowId(bucket: string, windowMs: number, windowStart: number): string {
  return windowMs === RATE_WINDOW_MS ? `${bucket}:${windowStart}` : `${bucket}:${windowMs / 1000}s:${windowStart}`;
}

export function rateLimitStore(d: Database): RateLimitStore {
  // One atomic upsert-and-increment per window document, shared by the calls that arrive
  // together (group-commit.ts): each gets its own count, as if it had incremented alone. One
  // group per window length, so that a call's windows are counted at the same time rather than
  // one round after another.
  const increments = new Map<number, (id: string) => Promise<Taken>>();
  const incrementOf = (windowMs: number) => {
    let increment = increments.get(windowMs);
    if (!increment) {
      const windowEndOf = (id: string) => Number(id.slice(id.lastIndexOf(":") + 1)) + windowMs;
      increment = groupedIncrement(() => d.rateLimits, "count", { onInsert: (id) => ({ expiresAt: new Date(windowEndOf(id)) }) });
      increments.set(windowMs, increment);
    }
    return increment;
  };
  // The give-backs of the refusals that arrive together, in one unordered bulk write.
  const giveBack = batched<string[], void>(async (calls) => {
    const taken = new Map<string, number>();
    for (const id of calls.flat()) taken.set(id, (taken.get(id) ?? 0) + 1);
    await d.rateLimits.bulkWrite(
      [...taken].map(([id, n]) => ({ updateOne: { filter: { _id: id }, update: { $inc: { count: -n } } } })),
      { ordered: false },
    );
    return calls.map(() => ok(undefined));
  }, STORE_BATCHING);
  const hitWindows: RateLimitStore["hitWindows"] = async (bucket, windows, now = Date.now()) => {
    const counted = await Promise.all(
      windows.map(async (w) => {
        const windowMs = w.seconds * 1000;
        const windowStart = now - (now % windowMs);
        const id = windowId(bucket, windowMs, windowStart);
        return { w, id, windowEnd: windowStart + windowMs, count: (await incrementOf(windowMs)(id)).value };
      }),
    );
    const refused = counted.some((c) => c.count > c.w.limit);
    // A request refused by one window gives back what it took from the others, a write on the
    // refused path only: counting every window at once keeps the accepted path at one round trip
    // (checking first would add one to every call), and a client that keeps calling past its
    // minute does not spend its hour or day. A concurrent call of the same token finds the
    // window that refused this one still full (a window's count never goes down); only one made
    // as that window ends may find another window one higher than it is about to be.
    const givenBack = refused ? counted.filter((c) => c.count <= c.w.limit).map((c) => c.id) : [];
    if (givenBack.length > 0) await giveBack(givenBack);
    return counted.map(({ w, windowEnd, count }) => {
      const allowed = count <= w.limit;
      const held = refused && allowed ? count - 1 : count;
      return {
        allowed,
        limit: w.limit,
        remaining: Math.max(0, w.limit - held),
        resetAt: Math.ceil(windowEnd / 1000),
        // A window ends on a whole minute, hour or day: waiting this long lands in a new one.
        retryAfter: allowed ? 0 : Math.max(1, Math.ceil((windowEnd - now) / 1000)),
        windowSeconds: w.seconds,
      };
    });
  };
  return {
    async hit(bucket, limit, now = Date.now()) {
      const [decision] = await hitWindows(bucket, [{ limit, seconds: RATE_WINDOW_MS / 1000 }], now);
      return decision!;
    },
    hitWindows,
    share: (windowStart, increments) => shareCounts(d, windowStart, increments),
  };
}

async function shareCounts(d: Database, windowStart: number, increments: ReadonlyMap<string, number>): Promise<Map<string, number>> {
  const idOf = (bucket: string) => windowId(bucket, RATE_WINDOW_MS, windowStart);
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
