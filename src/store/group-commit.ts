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

/** The counters a process keeps the last value of (groupedIncrement's clock); beyond, it reads them again. */
const MAX_CLOCKED_DOCUMENTS = 100_000;

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

/** A value an increment handed out, and with a clock its time in microseconds. */
export interface Taken {
  value: number;
  /**
   * With `clock`: microseconds since the epoch, unique and rising with the value (a higher value
   * always has a later time), close to the clock (see groupedIncrement).
   */
  micros: number;
}

/**
 * A `$inc` by one of document `_id`'s `field` (upserted), grouped: one `$inc` by n per
 * document per round. Each caller gets the value its own increment made (as if the n had
 * been made one after the other), from the document before the round's increment.
 *
 * With `clock` (a field name), every value also gets a time: value + lead, where the document's
 * `lead` only ever rises ($max, in the same update as the increment) to "now minus the value".
 * Values rise by at least one per call and the lead never falls, so times are unique and rise with
 * the values whatever the callers' clocks; each is at or just after its caller's clock (by the
 * values other processes took since this one last looked, in microseconds). The lead needs the
 * value before the update: the value this process last saw, read once per document.
 */
export function groupedIncrement<T extends { _id: string }>(
  coll: () => Collection<T>,
  field: string,
  o: { onInsert?: (id: string) => Document; clock?: string } = {},
): (id: string) => Promise<Taken> {
  const lastSeen = new Map<string, number>();
  async function seen(id: string): Promise<number> {
    let v = lastSeen.get(id);
    if (v === undefined) {
      const doc = (await coll().findOne({ _id: id } as Filter<T>, { projection: { [field]: 1 } })) as Document | null;
      v = (doc?.[field] as number | undefined) ?? 0;
      // Bounded: a process forgets the documents it saw (one more read each) rather than grow.
      if (lastSeen.size >= MAX_CLOCKED_DOCUMENTS) lastSeen.clear();
    }
    return v;
  }
  async function incrementBy(id: string, n: number): Promise<Taken> {
    const clock = o.clock;
    const known = clock ? await seen(id) : 0;
    for (let attempt = 0; ; attempt++) {
      try {
        // "before" plus the increment: exact on every server (see counters.ts).
        const lead = Date.now() * 1000 - known - 1;
        const update = { $inc: { [field]: n }, $setOnInsert: o.onInsert?.(id) ?? {}, ...(clock ? { $max: { [clock]: lead } } : {}) } as UpdateFilter<T>;
        const before = (await coll().findOneAndUpdate({ _id: id } as Filter<T>, update, { upsert: true, returnDocument: "before" })) as Document | null;
        const value = ((before?.[field] as number | undefined) ?? 0) + n;
        if (!clock) return { value, micros: 0 };
        lastSeen.set(id, value);
        const leadBefore = before?.[clock] as number | undefined;
        // The time of the round's last value; the others are the microseconds before it.
        return { value, micros: value + (leadBefore !== undefined && leadBefore > lead ? leadBefore : lead) };
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
      const back = counts.get(id)! - 1 - k;
      return ok({ value: top.value.value - back, micros: top.value.micros - back });
    });
  }, STORE_BATCHING);
}
