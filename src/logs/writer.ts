// Activity and admin log writers.
//
// Streams: every log is split into independent sequences — the activity log per
// environment (`a:<environmentId>`), the admin log per project (`m:<projectId>`; entries
// without a project go to `m:org:<organizationId>`, which no API lists). Each stream has
// its own counter document (`counters._id = stream`) and each entry is stored under the
// string `_id` `<stream>:<seq, 12 digits>` with the number also in `seq`. String `_id`
// equality is the one query shape FerretDB's SQLite backend pushes down, so readers can
// walk a stream by point lookups at O(page) cost (see reader.ts).
//
// Ordering protocol (what makes tailing exact across instances): an entry takes the next
// number of its stream's counter ($inc), then is inserted at that number. A reader that
// finds a hole (a number taken but not yet inserted) waits briefly and, if the hole is
// still there, fills it with a tombstone `{_id, seq, tomb: true}`. A writer whose insert
// then collides takes a new number and inserts again, so an entry can never land behind a
// position a reader has already passed.
import type { Collection } from "mongodb";
import type { Database } from "../db/mongo.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { ActivityLogDoc, AdminLogDoc } from "../db/types.js";

/** Digits of the zero-padded sequence number in an entry's `_id` (string order = number order). */
export const SEQ_DIGITS = 12;

/** The stream of an environment's activity log. */
export function activityStream(environmentId: string): string {
  return `a:${environmentId}`;
}

/** The stream of a project's admin log; organization-level entries (no project) have their own, never listed. */
export function adminStream(organizationId: string, projectId: string | null): string {
  return projectId ? `m:${projectId}` : `m:org:${organizationId}`;
}

/** The `_id` of the entry (or tombstone) at `seq` of `stream`. */
export function streamKey(stream: string, seq: number): string {
  return `${stream}:${String(seq).padStart(SEQ_DIGITS, "0")}`;
}

/** The `_id` of a stream's watermark document in `counters`. */
export function watermarkId(stream: string): string {
  return `${stream}:watermark`;
}

export async function nextSeq(db: Database, name: string): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      const doc = await db.counters.findOneAndUpdate({ _id: name }, { $inc: { seq: 1 } }, { upsert: true, returnDocument: "after" });
      return doc!.seq;
    } catch (err) {
      // Two first increments raced on creating the counter: the loser retries (now an update).
      if (!isDuplicateKey(err) || attempt > 3) throw err;
    }
  }
}

/**
 * The highest number this process took per stream. FerretDB (v1, SQLite) does not apply
 * `$inc` atomically under concurrency: the counter can hand out a number twice or move
 * back. Duplicates collide on insert and are retried; a number not above what this
 * process already took is skipped (it becomes a hole that readers fill), so one
 * process's entries — and so a run's successive entries — stay in causal order.
 */
const lastTaken = new WeakMap<Database, Map<string, number>>();

async function appendSequenced<T extends { _id: string; seq: number }>(db: Database, coll: Collection<T>, stream: string, entry: Omit<T, "_id" | "seq">): Promise<number> {
  let taken = lastTaken.get(db);
  if (!taken) lastTaken.set(db, (taken = new Map()));
  for (;;) {
    const seq = await nextSeq(db, stream);
    if (seq <= (taken.get(stream) ?? 0)) continue;
    taken.set(stream, seq);
    try {
      await coll.insertOne({ ...entry, _id: streamKey(stream, seq), seq } as never);
      return seq;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err; // a reader tombstoned this number (or it was handed out twice): take another
    }
  }
}

export type NewActivity = Omit<ActivityLogDoc, "_id" | "seq" | "timestamp" | "tomb"> & { timestamp?: Date };
export type NewAdminEntry = Omit<AdminLogDoc, "_id" | "seq" | "timestamp" | "tomb"> & { timestamp?: Date };

/** Appends to the environment's activity log; returns the entry's sequence number in that stream. */
export function writeActivity(db: Database, entry: NewActivity): Promise<number> {
  return appendSequenced(db, db.activityLogs, activityStream(entry.environmentId), { timestamp: new Date(), ...entry });
}

/** Appends to the project's admin log (or the organization's when `projectId` is null); returns the sequence number. */
export function writeAdmin(db: Database, entry: NewAdminEntry): Promise<number> {
  return appendSequenced(db, db.adminLogs, adminStream(entry.organizationId, entry.projectId), { timestamp: new Date(), ...entry });
}
