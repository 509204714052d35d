// Reading the activity and admin logs: the reader side of the ordering protocol in
// writer.ts, which makes tailing exact.
//
// The watermark of a log is the highest sequence number S such that every number ≤ S is
// present (an entry or a tombstone). Ascending pages only return entries ≤ S, so an
// entry can never appear behind a position a consumer has already passed.
//
// Advancing it: read the counter (the highest number taken), scan `_id`s forward from
// the stored watermark; a missing number is a hole (taken, not inserted yet). The reader
// re-checks it for a short grace period (measured from when this process first saw it)
// and then inserts a tombstone `{_id, tomb: true}` there: if the writer's insert was
// first, the tombstone collides and the entry stays; otherwise the writer's insert
// collides and it takes a new number above the counter. Either way the number is filled
// and the watermark moves past it. The stored watermark only grows ($max), so every
// instance shares it.
import type { Collection, Filter } from "mongodb";
import type { Database } from "../db/mongo.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { ActivityLogDoc, AdminLogDoc } from "../db/types.js";
import { ACTIVITY_COUNTER, ADMIN_COUNTER } from "./writer.js";

export type LogKind = "activity" | "admin";

/** How long a hole may stay open before a reader fills it with a tombstone. */
export const DEFAULT_HOLE_GRACE_MS = 200;
const SCAN_BATCH = 20_000;
const RECHECK_MS = 25;
const MAX_TRACKED_HOLES = 10_000;

interface LogSpec<T extends { _id: number }> {
  coll: Collection<T>;
  counter: string;
  watermarkId: string;
  tombstone(seq: number, now: Date): T;
}

function specs(db: Database): { activity: LogSpec<ActivityLogDoc>; admin: LogSpec<AdminLogDoc> } {
  return {
    activity: {
      coll: db.activityLogs,
      counter: ACTIVITY_COUNTER,
      watermarkId: `${ACTIVITY_COUNTER}:watermark`,
      // Null scope fields: a tombstone matches no project's or environment's query.
      tombstone: (seq, now) =>
        ({
          _id: seq, tomb: true, timestamp: now, projectId: null, environmentId: null, environment: "", rendering: null,
          user: { id: "", email: "" }, action: "", via: "api", collection: null, recordId: null, runId: null, details: {},
        }) as unknown as ActivityLogDoc,
    },
    admin: {
      coll: db.adminLogs,
      counter: ADMIN_COUNTER,
      watermarkId: `${ADMIN_COUNTER}:watermark`,
      tombstone: (seq, now) =>
        ({
          _id: seq, tomb: true, timestamp: now, organizationId: null, projectId: null, environment: null,
          actor: { id: "", email: "" }, action: "", target: "", details: {},
        }) as unknown as AdminLogDoc,
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface LogReader {
  /** The watermark as last stored (cheap: one read). */
  stored(kind: LogKind): Promise<number>;
  /** Advances the watermark as far as the log allows now (may wait up to the grace for holes). */
  advance(kind: LogKind): Promise<number>;
  collection<K extends LogKind>(kind: K): K extends "activity" ? Collection<ActivityLogDoc> : Collection<AdminLogDoc>;
}

export function createLogReader(db: Database, opts: { holeGraceMs?: number } = {}): LogReader {
  const grace = opts.holeGraceMs ?? DEFAULT_HOLE_GRACE_MS;
  const s = specs(db);
  const known: Record<LogKind, number> = { activity: 0, admin: 0 };
  const inflight: Partial<Record<LogKind, Promise<number>>> = {};
  /** `${kind}:${seq}` → when this process first saw the number missing. */
  const holeSeen = new Map<string, number>();

  async function stored(kind: LogKind): Promise<number> {
    const doc = await db.counters.findOne({ _id: s[kind].watermarkId });
    known[kind] = Math.max(known[kind], doc?.seq ?? 0);
    return known[kind];
  }

  function noteHoles(kind: LogKind, from: number, to: number, now: number): void {
    for (let n = from; n <= to && holeSeen.size < MAX_TRACKED_HOLES; n++) {
      const key = `${kind}:${n}`;
      if (!holeSeen.has(key)) holeSeen.set(key, now);
    }
  }

  /** Waits for the entry at `seq` until the grace has passed, then tombstones the number. */
  async function fill(kind: LogKind, seq: number): Promise<void> {
    const spec = s[kind] as unknown as LogSpec<{ _id: number }>;
    const key = `${kind}:${seq}`;
    const first = holeSeen.get(key) ?? Date.now();
    holeSeen.set(key, first);
    for (;;) {
      const left = first + grace - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(RECHECK_MS, left));
      if (await spec.coll.findOne({ _id: seq }, { projection: { _id: 1 } })) {
        holeSeen.delete(key);
        return;
      }
    }
    try {
      await spec.coll.insertOne(spec.tombstone(seq, new Date()));
    } catch (err) {
      if (!isDuplicateKey(err)) throw err; // the entry (or another reader's tombstone) is there
    }
    holeSeen.delete(key);
  }

  async function doAdvance(kind: LogKind): Promise<number> {
    const spec = s[kind] as unknown as LogSpec<{ _id: number }>;
    const [wmStart, top] = await Promise.all([stored(kind), db.counters.findOne({ _id: spec.counter }).then((d) => d?.seq ?? 0)]);
    let wm = wmStart;
    // Fast path for a long stretch (first read after a bulk load, a reader far behind):
    // nothing missing between the watermark and the counter — one count instead of a scan.
    if (top - wm > SCAN_BATCH && (await spec.coll.countDocuments({ _id: { $gt: wm, $lte: top } } as Filter<{ _id: number }>)) === top - wm) wm = top;
    while (wm < top) {
      const ids = await spec.coll
        .find({ _id: { $gt: wm, $lte: top } } as Filter<{ _id: number }>, { projection: { _id: 1 } })
        .sort({ _id: 1 })
        .limit(SCAN_BATCH)
        .toArray();
      let next = wm + 1;
      let i = 0;
      for (; i < ids.length && ids[i]!._id === next; i++) next++;
      wm = next - 1;
      if (i === ids.length && ids.length === SCAN_BATCH) continue; // contiguous batch: scan on
      if (wm >= top) break;
      // Holes from wm+1: every number missing up to the next present one (or the counter).
      const nextPresent = i < ids.length ? ids[i]!._id - 1 : ids.length === SCAN_BATCH ? wm + 1 : top;
      noteHoles(kind, wm + 1, nextPresent, Date.now());
      await fill(kind, wm + 1);
      wm += 1;
    }
    if (wm > wmStart) {
      try {
        await db.counters.updateOne({ _id: spec.watermarkId }, { $max: { seq: wm } }, { upsert: true });
      } catch (err) {
        // Two instances created the document at once: the other's upsert won; raise it.
        if (!isDuplicateKey(err)) throw err;
        await db.counters.updateOne({ _id: spec.watermarkId }, { $max: { seq: wm } });
      }
    }
    known[kind] = Math.max(known[kind], wm);
    for (const key of holeSeen.keys()) {
      const [k, n] = key.split(":");
      if (k === kind && Number(n) <= wm) holeSeen.delete(key);
    }
    return known[kind];
  }

  return {
    stored,
    advance(kind) {
      // One advance at a time per log in this process; concurrent callers share it.
      let p = inflight[kind];
      if (!p) {
        p = doAdvance(kind).finally(() => {
          inflight[kind] = undefined;
        });
        inflight[kind] = p;
      }
      return p;
    },
    collection: ((kind: LogKind) => s[kind].coll) as LogReader["collection"],
  };
}
