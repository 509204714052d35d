// Reading the activity and admin logs: the reader side of the ordering protocol in
// writer.ts, which makes tailing exact.
//
// Every log stream (an environment's activity log, a project's admin log) is numbered
// 1, 2, 3, … and entry n is stored under the string `_id` streamKey(stream, n). A reader
// walks a stream by `_id` point lookups, a window of them in flight at a time, where
// those hit an index (MongoDB; FerretDB only with an extra SQLite index, see
// indexedPointReads): a page, a watermark step or a hole check costs O(entries touched).
// On plain FerretDB every query scans the collection, so the walk reads one `_id` range
// per page instead (one scan per page or watermark step, not one per number).
//
// A position of a stream is *resolved* when an entry or a tombstone is there: nothing can
// ever be inserted there again. Walking forward, a missing number is
// - below the stored watermark: resolved long ago and since deleted (tests only): skipped;
// - at most the counter (the highest number taken): a hole, taken but not inserted yet.
//   The reader re-checks it for a short grace period (measured from when this process
//   first saw it missing) and then inserts a tombstone `{_id, seq, tomb: true}` there: if
//   the writer's insert was first, the tombstone collides and the entry stays; otherwise
//   the writer's insert collides and it takes a new number above the counter. Either way
//   the position is resolved, and a walk never passes an unresolved position;
// - above the counter: not taken yet — the end of the stream for now.
//
// The watermark of a stream is the highest number S such that every position ≤ S is
// resolved. It is stored per stream (`counters._id = "<stream>:watermark"`, only raised)
// and shared by every instance. Ascending pages never return an entry behind an
// unresolved position, so a consumer polling `next_cursor` can never have an entry land
// behind its position.
import type { Collection, Document } from "mongodb";
import type { Database } from "../db/mongo.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { ActivityLogDoc, AdminLogDoc } from "../db/types.js";
import { streamKey, watermarkId } from "./writer.js";

export type LogKind = "activity" | "admin";
export type LogDoc = { _id: string; seq: number; tomb?: true };
type DocOf<K extends LogKind> = K extends "activity" ? ActivityLogDoc : AdminLogDoc;

/** How long a hole may stay open before a reader fills it with a tombstone. */
export const DEFAULT_HOLE_GRACE_MS = 200;
/** Point lookups in flight per walk. */
export const LOOKUP_WINDOW = 32;
const RECHECK_MS = 25;
const MAX_TRACKED_HOLES = 10_000;
/** MongoDB: when advancing far, one indexed count per stretch of this many numbers instead of a lookup per number. */
const COUNT_CHUNK = 4096;

/** One resolved position of a forward walk: the entry, or null for a tombstone (or a deleted entry). */
export interface Resolved<T> {
  seq: number;
  doc: T | null;
}

export interface WalkOptions {
  /** Stop after this number (default: follow the counter as it grows). */
  until?: number;
  projection?: Document;
  /** Without indexed lookups: entries fetched per range query (the caller's page size + 1). */
  batch?: number;
}

export interface LogReader {
  /** True when `_id` point lookups hit an index (see indexedPointReads): unfiltered pages walk the stream. */
  readonly pointReads: boolean;
  /** The watermark of a stream as last stored (cheap: one read). */
  stored(kind: LogKind, stream: string): Promise<number>;
  /** The highest number taken in a stream so far (its counter). */
  counter(stream: string): Promise<number>;
  /** Advances a stream's watermark up to its counter as of now (may wait up to the grace for holes). */
  advance(kind: LogKind, stream: string): Promise<number>;
  /**
   * Walks a stream forward from after `after`: every position in order, each resolved
   * first (waiting for / tombstoning holes), until the end of the stream (or `until`).
   * Raises the stored watermark to the last position the caller consumed.
   */
  forward<K extends LogKind>(kind: K, stream: string, after: number, opts?: WalkOptions): AsyncGenerator<Resolved<DocOf<K>>>;
  /** The entries of a stream below `before`, newest first (tombstones skipped); `before` must be ≤ watermark + 1. */
  backward<K extends LogKind>(kind: K, stream: string, before: number): AsyncGenerator<DocOf<K>>;
  collection<K extends LogKind>(kind: K): Collection<DocOf<K>>;
}

function tombstone(kind: LogKind, stream: string, seq: number, now: Date): LogDoc {
  // Null scope fields: a tombstone matches no project's or environment's query.
  const _id = streamKey(stream, seq);
  return kind === "activity"
    ? ({
        _id, seq, tomb: true, timestamp: now, projectId: null, environmentId: null, environment: "", rendering: null,
        user: { id: "", email: "" }, action: "", via: "api", collection: null, recordId: null, runId: null, details: {},
      } as unknown as ActivityLogDoc)
    : ({
        _id, seq, tomb: true, timestamp: now, organizationId: null, projectId: null, environment: null,
        actor: { id: "", email: "" }, action: "", target: "", details: {},
      } as unknown as AdminLogDoc);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Whether `_id` point lookups hit an index. Always on MongoDB. FerretDB v1.24 (SQLite)
 * pushes `{_id: <string>}` down as `WHERE _ferretdb_sjson->'$._id' = ?`, but its own `_id`
 * index is on `_ferretdb_sjson->"_id"`, an expression SQLite does not match: each lookup
 * is a table scan, as costly as decoding the collection. There the reader uses one range
 * query per step instead, unless RUNHOOK_FERRETDB_ID_INDEX=1 says an index on the query's
 * expression exists (created in the SQLite file next to FerretDB's).
 */
export function indexedPointReads(db: Database): boolean {
  return !db.serializedUpdates || process.env.RUNHOOK_FERRETDB_ID_INDEX === "1";
}

export function createLogReader(db: Database, opts: { holeGraceMs?: number; pointReads?: boolean } = {}): LogReader {
  const grace = opts.holeGraceMs ?? DEFAULT_HOLE_GRACE_MS;
  const pointReads = opts.pointReads ?? indexedPointReads(db);
  const colls = { activity: db.activityLogs, admin: db.adminLogs } as unknown as Record<LogKind, Collection<LogDoc>>;
  /** Per stream: the highest watermark this process knows of. */
  const known = new Map<string, number>();
  const inflight = new Map<string, Promise<number>>();
  /** `${stream}#${seq}` → when this process first saw the (taken) number missing. */
  const holeSeen = new Map<string, number>();

  async function stored(_kind: LogKind, stream: string): Promise<number> {
    const doc = await db.counters.findOne({ _id: watermarkId(stream) });
    const wm = Math.max(known.get(stream) ?? 0, doc?.seq ?? 0);
    known.set(stream, wm);
    return wm;
  }

  async function counter(stream: string): Promise<number> {
    return (await db.counters.findOne({ _id: stream }))?.seq ?? 0;
  }

  function lookup(kind: LogKind, stream: string, seq: number, projection?: Document): Promise<LogDoc | null> {
    return colls[kind].findOne({ _id: streamKey(stream, seq) }, projection ? { projection } : {});
  }

  function noteHole(stream: string, seq: number): void {
    const key = `${stream}#${seq}`;
    if (!holeSeen.has(key) && holeSeen.size < MAX_TRACKED_HOLES) holeSeen.set(key, Date.now());
  }

  /** Resolves the hole at `seq`: waits for its entry until the grace has passed, then tombstones it. Returns what is there. */
  async function fill(kind: LogKind, stream: string, seq: number, projection?: Document): Promise<LogDoc | null> {
    const key = `${stream}#${seq}`;
    const first = holeSeen.get(key) ?? Date.now();
    holeSeen.set(key, first);
    try {
      for (;;) {
        const left = first + grace - Date.now();
        if (left <= 0) break;
        await sleep(Math.min(RECHECK_MS, left));
        const d = await lookup(kind, stream, seq, projection);
        if (d) return d;
      }
      try {
        await colls[kind].insertOne(tombstone(kind, stream, seq, new Date()));
        return null;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        return lookup(kind, stream, seq, projection); // the entry (or another reader's tombstone) is there
      }
    } finally {
      holeSeen.delete(key);
    }
  }

  /** Raises the stored watermark to `pos` when the walk that resolved (after, pos] started at or below it. */
  async function commit(stream: string, after: number, pos: number): Promise<void> {
    const k = known.get(stream) ?? 0;
    if (pos <= k || after > k) return;
    known.set(stream, pos);
    const id = watermarkId(stream);
    try {
      await db.counters.updateOne({ _id: id }, { $max: { seq: pos } }, { upsert: true });
    } catch (err) {
      // Two instances created the document at once: the other's upsert won; raise it.
      if (!isDuplicateKey(err)) throw err;
      await db.counters.updateOne({ _id: id }, { $max: { seq: pos } });
    }
    if (holeSeen.size > 0) {
      const prefix = `${stream}#`;
      for (const key of holeSeen.keys()) if (key.startsWith(prefix) && Number(key.slice(prefix.length)) <= pos) holeSeen.delete(key);
    }
  }

  /**
   * The forward walk without indexed lookups (plain FerretDB): one range query per batch
   * (`_id` after the position up to the counter, sorted, limited) — a scan of the
   * collection, once per page instead of once per number; the numbers missing between
   * the entries it returns are the holes, resolved as in the lookup walk.
   */
  async function* forwardByRange(kind: LogKind, stream: string, after: number, o: WalkOptions): AsyncGenerator<Resolved<LogDoc>> {
    // The counter as of the start: each batch is a scan, so the walk does not chase writes
    // made meanwhile (a caught-up consumer polls again).
    const [wm, top] = await Promise.all([stored(kind, stream), o.until !== undefined ? Promise.resolve(o.until) : counter(stream)]);
    const batch = o.batch ?? 1000;
    let pos = after;
    try {
      for (;;) {
        if (pos >= top) return;
        const range = { $gt: streamKey(stream, pos), $lte: streamKey(stream, top) };
        const docs = await colls[kind].find({ _id: range }, o.projection ? { projection: o.projection } : {}).sort({ _id: 1 }).limit(batch).toArray();
        const coveredTo = docs.length === batch ? docs[docs.length - 1]!.seq : top;
        const present = new Set(docs.map((d) => d.seq));
        for (let n = Math.max(pos, wm) + 1; n <= coveredTo; n++) if (!present.has(n)) noteHole(stream, n);
        let i = 0;
        for (let n = pos + 1; n <= coveredTo; n++) {
          let doc: LogDoc | null = i < docs.length && docs[i]!.seq === n ? docs[i++]! : null;
          if (!doc && n > wm) doc = await fill(kind, stream, n, o.projection);
          pos = n;
          yield { seq: n, doc: doc && !doc.tomb ? doc : null };
        }
      }
    } finally {
      await commit(stream, after, pos);
    }
  }

  async function* forward(kind: LogKind, stream: string, after: number, o: WalkOptions = {}): AsyncGenerator<Resolved<LogDoc>> {
    if (!pointReads) {
      yield* forwardByRange(kind, stream, after, o);
      return;
    }
    const [wm, top0] = await Promise.all([stored(kind, stream), o.until !== undefined ? Promise.resolve(o.until) : counter(stream)]);
    let top = top0;
    /** The highest number found present: an entry there means every number below it was taken. */
    let maxSeen = after;
    const bounded = o.until !== undefined;
    const queue: { seq: number; p: Promise<LogDoc | null> }[] = [];
    let next = after + 1;
    let pos = after;
    const issue = (seq: number) => {
      const p = lookup(kind, stream, seq, o.projection).then((d) => {
        if (d) maxSeen = Math.max(maxSeen, seq);
        else if (seq > wm && seq <= Math.max(top, maxSeen)) noteHole(stream, seq);
        return d;
      });
      p.catch(() => undefined); // awaited in order below; a walk given up early must not leave an unhandled rejection
      queue.push({ seq, p });
    };
    try {
      for (;;) {
        // Bounded walks stop at `until`; open ones peek one past the counter and what was found
        // (FerretDB's counter can move back below entries already written).
        const bound = bounded ? top : Math.max(top, maxSeen) + 1;
        while (queue.length < LOOKUP_WINDOW && next <= bound) issue(next++);
        if (queue.length === 0) return;
        const { seq, p } = queue.shift()!;
        let doc = await p;
        if (!doc && seq > wm) {
          if (seq > Math.max(top, maxSeen) && !bounded) top = Math.max(top, await counter(stream));
          if (seq > Math.max(top, maxSeen)) return; // not taken yet: the end of the stream for now
          doc = await fill(kind, stream, seq, o.projection);
        }
        pos = seq;
        yield { seq, doc: doc && !doc.tomb ? doc : null };
      }
    } finally {
      await commit(stream, after, pos);
    }
  }

  async function* backward(kind: LogKind, stream: string, before: number): AsyncGenerator<LogDoc> {
    const queue: Promise<LogDoc | null>[] = [];
    let next = before - 1;
    for (;;) {
      while (queue.length < LOOKUP_WINDOW && next >= 1) {
        const p = lookup(kind, stream, next--);
        p.catch(() => undefined);
        queue.push(p);
      }
      if (queue.length === 0) return;
      const doc = await queue.shift()!;
      if (doc && !doc.tomb) yield doc;
    }
  }

  /**
   * Without indexed point lookups (plain FerretDB): one range query over the stream's keys
   * from the watermark to the counter (a scan of the collection, once per step rather than
   * per number); holes found are filled as usual.
   */
  async function advanceByScan(kind: LogKind, stream: string, start: number, top: number): Promise<number> {
    if (top <= start) return Math.max(known.get(stream) ?? 0, start);
    const seqs = (await colls[kind].find({ _id: { $gt: streamKey(stream, start), $lte: streamKey(stream, top) } }, { projection: { _id: 0, seq: 1 } }).toArray())
      .map((d) => d.seq)
      .sort((a, b) => a - b);
    let wm = start;
    for (let i = 0; ; ) {
      while (i < seqs.length && seqs[i]! <= wm + 1) wm = Math.max(wm, seqs[i++]!);
      if (wm >= top) break;
      // Holes from wm+1 up to the next present number (or the counter): resolve them, a window at a time.
      const until = i < seqs.length ? seqs[i]! - 1 : top;
      for (let n = wm + 1; n <= until; n++) noteHole(stream, n);
      while (wm < until) {
        const n = Math.min(until - wm, LOOKUP_WINDOW);
        await Promise.all(Array.from({ length: n }, (_, k) => fill(kind, stream, wm + 1 + k, { _id: 1 })));
        wm += n;
      }
      await commit(stream, start, wm); // (start, wm] is resolved now
    }
    await commit(stream, start, wm);
    return Math.max(known.get(stream) ?? 0, wm);
  }

  async function doAdvance(kind: LogKind, stream: string): Promise<number> {
    const [start, top] = await Promise.all([stored(kind, stream), counter(stream)]);
    if (!pointReads) return advanceByScan(kind, stream, start, top);
    const coll = colls[kind];
    let wm = start;
    while (wm < top) {
      const end = Math.min(top, wm + COUNT_CHUNK);
      // MongoDB: a stretch with nothing missing costs one indexed count instead of a lookup per number.
      if (!pointReads && end - wm >= 64 && (await coll.countDocuments({ _id: { $gt: streamKey(stream, wm), $lte: streamKey(stream, end) } })) === end - wm) {
        await commit(stream, wm, end);
        wm = end;
        continue;
      }
      for await (const r of forward(kind, stream, wm, { until: end, projection: { _id: 1, tomb: 1 } })) wm = r.seq;
      if (wm < end) break; // cannot happen: a bounded walk resolves every position up to `until`
    }
    return Math.max(known.get(stream) ?? 0, wm);
  }

  return {
    pointReads,
    stored,
    counter,
    advance(kind, stream) {
      // One advance at a time per stream in this process; concurrent callers share it.
      let p = inflight.get(stream);
      if (!p) {
        p = doAdvance(kind, stream).finally(() => inflight.delete(stream));
        inflight.set(stream, p);
      }
      return p;
    },
    forward: forward as LogReader["forward"],
    backward: backward as LogReader["backward"],
    collection: ((kind: LogKind) => colls[kind]) as unknown as LogReader["collection"],
  };
}
