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
  const doc = await db.counters.findOneAndUpdate({ _id: name }, { $inc: { seq: 1 } }, { upsert: true, returnDocument: "after" });
  return doc!.seq;
}

async function appendSequenced<T extends { _id: number }>(db: Database, coll: Collection<T>, counter: string, entry: Omit<T, "_id">): Promise<number> {
  for (;;) {
    const _id = await nextSeq(db, counter);
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
