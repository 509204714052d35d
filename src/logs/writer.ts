// Activity and admin log writers.
//
// Ordering protocol (what makes tailing exact across instances): every entry's _id is
// a sequence number taken from one counter document ($inc), then inserted. A reader that
// finds a hole (a number taken but not yet inserted) waits briefly and, if the hole is
// still there, fills it with a tombstone `{_id, tomb: true}`. A writer whose insert then
// collides takes a new number and inserts again, so an entry can never land behind a
// position a reader has already passed.
import type { Collection } from "mongodb";
import type { Database } from "../db/mongo.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { ActivityLogDoc, AdminLogDoc } from "../db/types.js";

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
 * The highest number this process took per counter. FerretDB (v1, SQLite) does not apply
 * `$inc` atomically under concurrency: the counter can hand out a number twice or move
 * back. Duplicates collide on insert and are retried; a number not above what this
 * process already took is skipped (it becomes a hole that readers fill), so one
 * process's entries — and so a run's successive entries — stay in causal order.
 */
const lastTaken = new WeakMap<Database, Map<string, number>>();

async function appendSequenced<T extends { _id: number }>(db: Database, coll: Collection<T>, counter: string, entry: Omit<T, "_id">): Promise<number> {
  let taken = lastTaken.get(db);
  if (!taken) lastTaken.set(db, (taken = new Map()));
  for (;;) {
    const _id = await nextSeq(db, counter);
    if (_id <= (taken.get(counter) ?? 0)) continue;
    taken.set(counter, _id);
    try {
      await coll.insertOne({ ...entry, _id } as never);
      return _id;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err; // a reader tombstoned this number: take another
    }
  }
}

export type NewActivity = Omit<ActivityLogDoc, "_id" | "timestamp" | "tomb"> & { timestamp?: Date };
export type NewAdminEntry = Omit<AdminLogDoc, "_id" | "timestamp" | "tomb"> & { timestamp?: Date };

export const ACTIVITY_COUNTER = "activity_logs";
export const ADMIN_COUNTER = "admin_logs";

export function writeActivity(db: Database, entry: NewActivity): Promise<number> {
  return appendSequenced(db, db.activityLogs, ACTIVITY_COUNTER, { timestamp: new Date(), ...entry });
}

export function writeAdmin(db: Database, entry: NewAdminEntry): Promise<number> {
  return appendSequenced(db, db.adminLogs, ADMIN_COUNTER, { timestamp: new Date(), ...entry });
}
