// Reading the activity and admin logs: the reader side of the ordering protocol that makes
// tailing exact across any number of writing instances.
//
// A writer takes the next number of its stream (an atomic $inc), then inserts its entry at
// that number (src/store/logs.ts). Between the two, the number is a *hole*: taken, not yet
// visible. A position is *resolved* when an entry or a tombstone is stored there: nothing
// can ever be inserted there again. Walking forward, a missing number is
// - at most the stream's counter: a hole. The reader re-checks it for a short grace period
//   (measured from when this process first saw it missing), then inserts a tombstone there.
//   If the writer's insert was first, the tombstone collides and the entry stays; otherwise
//   the writer's insert collides and it takes a new number above the counter. Either way
//   the position is resolved, and a walk never passes an unresolved position. A position
//   whose entry is stored with its change (a run's, domain/runs/activity.ts) gets that entry
//   rather than a tombstone, whether its writer is slow or died;
// - above the counter: not taken yet — the end of the stream for now.
//
// The watermark of a stream is the highest number W such that every position ≤ W is
// resolved. It is stored per stream (only raised) and shared by every instance. A walk reads
// ranges: entries below the watermark, every stored position (entries and tombstones) above
// it, where the numbers missing from a range are the holes.
import { isDatabaseFull, isUnavailable, type Store } from "../../store/index.js";
import type { LogDocOf, LogKind, Position } from "../../store/logs.js";
import { sleep } from "../../lib/sleep.js";
import { DEFAULT_RETENTION } from "../../config.js";
import { fail } from "../errors.js";

/** How long a hole may stay open before a reader fills it with a tombstone. */
export const DEFAULT_HOLE_GRACE_MS = 200;
const RECHECK_MS = 25;
const MAX_TRACKED_HOLES = 10_000;

/** One resolved stretch of a forward walk ending at `seq`: the entry there, or null (tombstone, or a stretch without entries). */
export interface Resolved<T> {
  seq: number;
  doc: T | null;
}

export interface WalkOptions {
  /** Stop after this number (default: follow the counter as it grows). */
  until?: number;
  /** Positions read per range query (the caller's page size + 1). */
  batch?: number;
}

export interface LogReader {
  /** The watermark of a stream as last stored (cheap: one read). */
  stored(stream: string): Promise<number>;
  /** Advances a stream's watermark up to its counter as of now (may wait up to the grace for holes). */
  advance(kind: LogKind, stream: string): Promise<number>;
  /**
   * Walks a stream forward from after `after`, resolving every position in order (waiting
   * for or tombstoning holes), until the end of the stream (or `until`). Raises the stored
   * watermark to the last position the caller consumed.
   */
  forward<K extends LogKind>(kind: K, stream: string, after: number, opts?: WalkOptions): AsyncGenerator<Resolved<LogDocOf<K>>>;
  /**
   * Refuses (FAILED_PRECONDITION) an ascending cursor at `after` whose next entries retention
   * removed (see removedAfter): going on would skip them without a word.
   */
  checkCursor(kind: LogKind, stream: string, after: number): Promise<void>;
}

/** What one process's reader knows, shared by its walks. */
interface ReaderState {
  logs: Store["logs"];
  grace: number;
  /** Per stream: the highest watermark this process knows of. */
  known: Map<string, number>;
  inflight: Map<string, Promise<number>>;
  /** `${stream}#${seq}` → when this process first saw the (taken) number missing. */
  holeSeen: Map<string, number>;
}

export function createLogReader(store: Store, opts: { holeGraceMs?: number; retentionDays?: number } = {}): LogReader {
  const retentionDays = opts.retentionDays ?? DEFAULT_RETENTION.logDays;
  const reader: ReaderState = {
    logs: store.logs,
    grace: opts.holeGraceMs ?? DEFAULT_HOLE_GRACE_MS,
    known: new Map(),
    inflight: new Map(),
    holeSeen: new Map(),
  };
  return {
    stored: (stream) => stored(reader, stream),
    advance(kind, stream) {
      // One advance at a time per stream in this process; concurrent callers share it.
      let p = reader.inflight.get(stream);
      if (!p) {
        p = doAdvance(reader, kind, stream).finally(() => reader.inflight.delete(stream));
        reader.inflight.set(stream, p);
      }
      return p;
    },
    forward: ((kind: LogKind, stream: string, after: number, o?: WalkOptions) => forward(reader, kind, stream, after, o)) as LogReader["forward"],
    async checkCursor(kind, stream, after) {
      if (!(await removedAfter(reader, kind, stream, after))) return;
      throw fail.precondition(
        `the cursor points into ${kind} log entries already removed by retention (entries are kept ${retentionDays} days): start again without a cursor, or from a time (createdAt.gte; gRPC: from_time)`,
      );
    },
  };
}

/**
 * Retention removes entries (and tombstones) by age, oldest first, so a cursor can point
 * before what is kept. The position after it is then missing although it was resolved once —
 * at or below the watermark — or, above it, although `after` itself is gone too and a later
 * position is kept. A position that is merely not written yet (a hole) is neither: the walk
 * waits for it or tombstones it, as always. Point reads only, except when `after` is gone.
 */
async function removedAfter(reader: ReaderState, kind: LogKind, stream: string, after: number): Promise<boolean> {
  // A cursor at 0 (issued on an empty stream) reads from the oldest entry kept, as no cursor
  // does: nothing is skipped, and a hole at 1 under a written 2 must not read as removed.
  if (after === 0) return false;
  const { logs } = reader;
  const next = after + 1;
  if (await logs.at(kind, stream, next, ["_id"])) return false;
  if (next <= (await stored(reader, stream))) return true;
  if (await logs.at(kind, stream, after, ["_id"])) return false;
  const oldest = await logs.oldest(kind, stream);
  return oldest !== null && oldest > next;
}

async function stored(reader: ReaderState, stream: string): Promise<number> {
  const wm = Math.max(reader.known.get(stream) ?? 0, await reader.logs.watermark(stream));
  reader.known.set(stream, wm);
  return wm;
}

function noteHole(reader: ReaderState, stream: string, seq: number): void {
  const key = `${stream}#${seq}`;
  if (!reader.holeSeen.has(key) && reader.holeSeen.size < MAX_TRACKED_HOLES) reader.holeSeen.set(key, Date.now());
}

/**
 * Resolves the hole at `seq`: waits for its entry until the grace has passed, then tombstones it.
 * Returns what is there, or undefined when a full database refused the tombstone: the hole stays
 * until it accepts writes again, and the walk ends before it.
 */
async function fill(reader: ReaderState, kind: LogKind, stream: string, seq: number): Promise<Position | null | undefined> {
  const { logs, holeSeen } = reader;
  const key = `${stream}#${seq}`;
  const first = holeSeen.get(key) ?? Date.now();
  holeSeen.set(key, first);
  try {
    for (;;) {
      const left = first + reader.grace - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(RECHECK_MS, left));
      const d = await logs.at(kind, stream, seq);
      if (d) return d;
    }
    let tombstoned: boolean;
    try {
      // A change stored with its entry (a writer that is slow, or died before putting it): the entry goes there.
      const pending = await logs.pendingAt(kind, stream, seq);
      if (pending && (await logs.putPending(pending)) === "written") return logs.at(kind, stream, seq);
      tombstoned = await logs.tombstone(kind, stream, seq);
    } catch (err) {
      // A full database refuses the entry or the tombstone: the position stays open until it takes writes again.
      if (isDatabaseFull(err)) return undefined;
      throw err;
    }
    if (tombstoned) return null;
    return logs.at(kind, stream, seq); // the entry (or another reader's tombstone) is there
  } finally {
    holeSeen.delete(key);
  }
}

/** Raises the stored watermark to `pos` when the walk that resolved (after, pos] started at or below it. */
async function commit(reader: ReaderState, stream: string, after: number, pos: number): Promise<void> {
  const k = reader.known.get(stream) ?? 0;
  if (pos <= k || after > k) return;
  reader.known.set(stream, pos);
  try {
    await reader.logs.raiseWatermark(stream, pos);
  } catch (err) {
    // Full: the stored watermark stays lower (a later walk raises it); the walk's answer stands.
    if (!isDatabaseFull(err)) throw err;
  }
  if (reader.holeSeen.size > 0) {
    const prefix = `${stream}#`;
    for (const key of reader.holeSeen.keys()) if (key.startsWith(prefix) && Number(key.slice(prefix.length)) <= pos) reader.holeSeen.delete(key);
  }
}

async function* forward(reader: ReaderState, kind: LogKind, stream: string, after: number, o: WalkOptions = {}): AsyncGenerator<Resolved<Position>> {
  const [wm, top0] = await Promise.all([stored(reader, stream), o.until !== undefined ? Promise.resolve(o.until) : reader.logs.counter(stream)]);
  const bounded = o.until !== undefined;
  const batch = o.batch ?? 1000;
  let pos = after;
  let unreachable = false;
  try {
    // Below the watermark every position is resolved: read the entries in ranges.
    const floor = bounded ? Math.min(wm, top0) : wm;
    while (pos < floor) {
      const docs = await reader.logs.entries(kind, stream, { after: pos, upTo: floor }, 1, batch);
      for (const d of docs) {
        pos = d.seq;
        yield { seq: d.seq, doc: d };
      }
      if (docs.length < batch && pos < floor) {
        pos = floor;
        yield { seq: floor, doc: null };
      }
    }
    // Above it, a batch of positions at a time: one range read; the numbers missing from
    // it are holes, resolved in order (they wait out one grace together).
    let top = top0;
    for (;;) {
      if (pos >= top) {
        if (bounded) return;
        // The counter may have moved on since the walk began.
        top = Math.max(top, await reader.logs.counter(stream));
        if (pos >= top) return; // not taken yet: the end of the stream for now
      }
      const end = Math.min(top, pos + batch);
      const found = new Map((await reader.logs.positions(kind, stream, pos, end)).map((d) => [d.seq, d]));
      for (let n = pos + 1; n <= end; n++) if (!found.has(n)) noteHole(reader, stream, n);
      for (let n = pos + 1; n <= end; n++) {
        const doc = found.get(n) ?? (await fill(reader, kind, stream, n));
        if (doc === undefined) return; // unresolved: the end of the stream for now
        pos = n;
        yield { seq: n, doc: doc && !doc.tomb ? doc : null };
      }
    }
  } catch (err) {
    // Cut by a database outage: the progress is kept for a later walk rather than waiting
    // for the database a second time before the caller hears of it.
    if (isUnavailable(err)) unreachable = true;
    throw err;
  } finally {
    if (!unreachable) await commit(reader, stream, after, pos);
  }
}

async function doAdvance(reader: ReaderState, kind: LogKind, stream: string): Promise<number> {
  const [start, top] = await Promise.all([stored(reader, stream), reader.logs.counter(stream)]);
  let wm = start;
  for await (const step of forward(reader, kind, stream, start, { until: top })) wm = step.seq;
  return Math.max(reader.known.get(stream) ?? 0, wm);
}
