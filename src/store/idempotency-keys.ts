// Idempotency keys of trigger calls. The `_id` unique index decides which call reserves a key
// (insert first, never read-then-write); every later change is conditioned on the reservation
// it replaces, so a call that lost its reservation can change nothing.
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";
import type { IdempotencyKeyDoc } from "./types.js";

export interface IdempotencyKeyStore {
  /** Stores `doc` unless its `_id` is taken; else names the reservation in place (null: it was deleted in between). */
  reserve(doc: IdempotencyKeyDoc): Promise<{ stored: true } | { stored: false; existing: IdempotencyKeyDoc | null }>;
  get(id: string): Promise<IdempotencyKeyDoc | null>;
  /** Puts `doc` in the place of the reservation `old` (an expired one), if it is still in place: whether it was. */
  replace(old: IdempotencyKeyDoc, doc: IdempotencyKeyDoc): Promise<boolean>;
  /** Makes `reservedAt` the time of the reservation `old`, if it is still in place: whether it was. */
  takeOver(old: IdempotencyKeyDoc, reservedAt: Date): Promise<boolean>;
  /** Deletes the reservation `doc`, if it is still in place (unchanged by a takeover). */
  release(doc: IdempotencyKeyDoc): Promise<void>;
}

export function idempotencyKeyStore(d: Database): IdempotencyKeyStore {
  return {
    async reserve(doc) {
      try {
        await d.idempotencyKeys.insertOne(doc);
        return { stored: true };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      return { stored: false, existing: await d.idempotencyKeys.findOne({ _id: doc._id }) };
    },
    get: (id) => d.idempotencyKeys.findOne({ _id: id }),
    async replace(old, doc) {
      const r = await d.idempotencyKeys.replaceOne({ _id: old._id, runId: old.runId, reservedAt: old.reservedAt }, doc);
      return r.matchedCount === 1;
    },
    async takeOver(old, reservedAt) {
      const r = await d.idempotencyKeys.updateOne({ _id: old._id, runId: old.runId, reservedAt: old.reservedAt }, { $set: { reservedAt } });
      return r.modifiedCount === 1;
    },
    async release(doc) {
      await d.idempotencyKeys.deleteOne({ _id: doc._id, runId: doc.runId, reservedAt: doc.reservedAt });
    },
  };
}
