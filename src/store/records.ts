// The records workflows run on: documents of an environment's data database.
import type { Document, Filter } from "mongodb";
import type { Database } from "./connection.js";

export type RecordDoc = Record<string, unknown>;

export interface RecordStore {
  /** The first record of `collection` in database `dataDatabase` matching `filter`, or null. */
  find(dataDatabase: string, collection: string, filter: Record<string, unknown>): Promise<RecordDoc | null>;
  /** Sets fields on the record matching `filter`; false when none matches. */
  set(dataDatabase: string, collection: string, filter: Record<string, unknown>, fields: Record<string, unknown>): Promise<boolean>;
}

export function recordStore(d: Database): RecordStore {
  const coll = (db: string, name: string) => d.dataDb(db).collection<Document>(name);
  return {
    find: (db, name, filter) => coll(db, name).findOne(filter as Filter<Document>),
    async set(db, name, filter, fields) {
      const res = await coll(db, name).updateOne(filter as Filter<Document>, { $set: fields });
      return res.matchedCount > 0;
    },
  };
}
