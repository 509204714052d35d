// The records workflows run on: documents of an environment's data database.
import type { Document, Filter } from "mongodb";
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";

export type RecordDoc = Record<string, unknown>;

export interface RecordStore {
  /** The first record of `collection` in database `dataDatabase` matching `filter`, or null. */
  find(dataDatabase: string, collection: string, filter: Record<string, unknown>): Promise<RecordDoc | null>;
  /** Sets fields on the record matching `filter`; false when none matches. */
  set(dataDatabase: string, collection: string, filter: Record<string, unknown>, fields: Record<string, unknown>): Promise<boolean>;
  /** Stores `record` unless one matching `key` exists (the demo's records; a concurrent seeder is no error). */
  putIfAbsent(dataDatabase: string, collection: string, key: Record<string, unknown>, record: RecordDoc): Promise<void>;
}

export function recordStore(d: Database): RecordStore {
  const coll = (db: string, name: string) => d.dataDb(db).collection<Document>(name);
  return {
    find: (db, name, filter) => coll(db, name).findOne(filter as Filter<Document>),
    async set(db, name, filter, fields) {
      const res = await coll(db, name).updateOne(filter as Filter<Document>, { $set: fields });
      return res.matchedCount > 0;
    },
    async putIfAbsent(db, name, key, record) {
      await coll(db, name)
        .updateOne(key as Filter<Document>, { $setOnInsert: { ...record } }, { upsert: true })
        .catch((err: unknown) => {
          if (!isDuplicateKey(err)) throw err;
        });
    },
  };
}
