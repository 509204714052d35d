// The records workflows run on: documents of an environment's data database.
import type { Document, Filter } from "mongodb";
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";
import { ensureRecordIndex } from "./indexes.js";

export type RecordDoc = Record<string, unknown>;

/** Which record: each key field equal to one of its values, and every scope field equal to its value. */
export interface RecordMatch {
  key: { field: string; values: (string | number)[] }[];
  scope: Record<string, unknown>;
}

/** The query of a match: `$eq` for one value, `$in` for several; the scope `$and`-ed when there is one. */
export function recordQuery(m: RecordMatch): Filter<Document> {
  const key: Record<string, unknown> = {};
  for (const { field, values } of m.key) key[field] = values.length === 1 ? { $eq: values[0] } : { $in: values };
  const scoped: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(m.scope)) scoped[field] = { $eq: value };
  return Object.keys(scoped).length === 0 ? key : { $and: [key, scoped] };
}

/**
 * How long the server may spend on one query of a data step (maxTimeMS): a tenant's records
 * (a missing index, a huge collection) never hold a database connection and an executor slot
 * for longer. Past it the step fails (isTimeLimitExceeded).
 */
export const DATA_QUERY_TIME_LIMIT_MS = 5000;

export interface RecordStore {
  /** The first record of `collection` in database `dataDatabase` that `match` selects, or null. */
  find(dataDatabase: string, collection: string, match: RecordMatch): Promise<RecordDoc | null>;
  /** Sets fields on the record `match` selects; false when none matches. */
  set(dataDatabase: string, collection: string, match: RecordMatch, fields: Record<string, unknown>): Promise<boolean>;
  /** Stores `record` unless one matching `key` exists (the demo's records; a concurrent seeder is no error). */
  putIfAbsent(dataDatabase: string, collection: string, key: Record<string, unknown>, record: RecordDoc): Promise<void>;
  /** Creates the index that finds a collection's records by their primary key (a collection just defined). */
  ensureKeyIndex(dataDatabase: string, collection: string, primaryKey: string[]): Promise<void>;
}

export function recordStore(d: Database): RecordStore {
  const coll = (db: string, name: string) => d.dataDb(db).collection<Document>(name);
  return {
    find: (db, name, match) => coll(db, name).findOne(recordQuery(match), { maxTimeMS: DATA_QUERY_TIME_LIMIT_MS }),
    async set(db, name, match, fields) {
      const res = await coll(db, name).updateOne(recordQuery(match), { $set: fields }, { maxTimeMS: DATA_QUERY_TIME_LIMIT_MS });
      return res.matchedCount > 0;
    },
    ensureKeyIndex: (db, name, primaryKey) => ensureRecordIndex(d, db, name, primaryKey),
    async putIfAbsent(db, name, key, record) {
      await coll(db, name)
        .updateOne(key as Filter<Document>, { $setOnInsert: { ...record } }, { upsert: true })
        .catch((err: unknown) => {
          if (!isDuplicateKey(err)) throw err;
        });
    },
  };
}
