// The writes every accepted call makes — a rate-limit count, a log position, a run, an activity
// entry — grouped across the calls that arrive together (lib/batch.ts): one command serves a
// round of them. Each keeps the meaning of its single-document form exactly: an increment by
// n hands out n consecutive values, as n increments would; an unordered insertMany inserts
// every document a unique index does not refuse, and says which ones it refused.
import { MongoBulkWriteError, MongoServerError, type Collection, type Document, type Filter, type OptionalUnlessRequiredId, type UpdateFilter } from "mongodb";
import { batched, failed, ok, type Outcome } from "../lib/batch.js";
import { isDuplicateKey, isUnavailable } from "./errors.js";

/** While the database is unreachable, the calls waiting for the next round fail with the current one (lib/batch.ts). */
export const STORE_BATCHING = { failsTheNext: isUnavailable };

/**
 * insertOne, grouped. A document a unique index refuses fails its own caller with a
 * duplicate-key error (isDuplicateKey), as insertOne would; the others are inserted.
 */
export function groupedInsert<T extends Document>(coll: () => Collection<T>): (doc: T) => Promise<void> {
  return batched<T, void>(async (docs) => {
    if (docs.length === 1) {
      // One document: insertOne, whose errors are the caller's own.
      try {
        await coll().insertOne(docs[0] as OptionalUnlessRequiredId<T>);
        return [ok(undefined)];
      } catch (err) {
        return [failed(err)];
      }
    }
    try {
      await coll().insertMany(docs as OptionalUnlessRequiredId<T>[], { ordered: false });
      return docs.map(() => ok(undefined));
    } catch (err) {
      // The whole command failed, or its write concern did: every caller's write is in doubt.
      if (!(err instanceof MongoBulkWriteError) || !Array.isArray(err.writeErrors) || err.writeErrors.length === 0 || err.result?.getWriteConcernError())
        throw err;
      const byIndex = new Map(err.writeErrors.map((e) => [e.index, e]));
      return docs.map((_, i) => {
        const e = byIndex.get(i);
        return e ? failed(new MongoServerError({ message: e.errmsg ?? "write error", errmsg: e.errmsg, code: e.code })) : ok(undefined);
      });
    }
  }, STORE_BATCHING);
}

/** A value an increment handed out, and the document's stamp as that increment left it. */
export interface Taken {
  value: number;
  /** The later of the stamp before the increment and the time it was made: never lower than an earlier value's. */
  at: Date;
}

/**
 * A `$inc` by one of document `_id`'s `field` (upserted), grouped: one `$inc` by n per
 * document per round. Each caller gets the value its own increment made (as if the n had
 * been made one after the other), from the document before the round's increment.
 * With `stamp`, the same update raises the document's `stamp` field to the time ($max), so the
 * values and their stamps rise together: a higher value never has an earlier stamp, whatever
 * the callers' clocks.
 */
export function groupedIncrement<T extends { _id: string }>(
  coll: () => Collection<T>,
  field: string,
  o: { onInsert?: (id: string) => Document; stamp?: string } = {},
): (id: string) => Promise<Taken> {
  async function incrementBy(id: string, n: number): Promise<Taken> {
    for (let attempt = 0; ; attempt++) {
      try {
        // "before" plus the increment: exact on every server (see counters.ts).
        const now = new Date();
        const update = { $inc: { [field]: n }, $setOnInsert: o.onInsert?.(id) ?? {}, ...(o.stamp ? { $max: { [o.stamp]: now } } : {}) } as UpdateFilter<T>;
        const before = (await coll().findOneAndUpdate({ _id: id } as Filter<T>, update, { upsert: true, returnDocument: "before" })) as Document | null;
        const stamped = o.stamp ? (before?.[o.stamp] as Date | undefined) : undefined;
        return { value: ((before?.[field] as number | undefined) ?? 0) + n, at: stamped && stamped > now ? stamped : now };
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 3) throw err; // two first upserts raced: the loser updates
      }
    }
  }
  return batched<string, Taken>(async (ids) => {
    const counts = new Map<string, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const tops = new Map<string, Outcome<Taken>>(
      await Promise.all([...counts].map(async ([id, n]) => [id, await incrementBy(id, n).then(ok, failed)] as const)),
    );
    // The values of one document's round, handed out in the callers' order: top − n + 1 … top.
    const handed = new Map<string, number>();
    return ids.map((id): Outcome<Taken> => {
      const top = tops.get(id)!;
      if (!top.ok) return top;
      const k = handed.get(id) ?? 0;
      handed.set(id, k + 1);
      return ok({ value: top.value.value - counts.get(id)! + 1 + k, at: top.value.at });
    });
  }, STORE_BATCHING);
}
