// Named sequence counters: one document each, advanced by one atomic $inc.
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";
import { groupedIncrement, type Taken } from "./group-commit.js";

export interface CounterStore {
  /** Takes the next number of counter `name` (1, 2, 3, …): distinct across every instance. */
  next(name: string): Promise<number>;
  /**
   * The same, with its time in microseconds: unique, and later for a higher number whatever the
   * callers' clocks (a log stream's entries are in time order, each at a time of its own).
   */
  nextStamped(name: string): Promise<Taken>;
  /** The highest number taken so far (0 before the first). */
  current(name: string): Promise<number>;
  /** A number kept under `name` that only ever rises (a watermark). */
  raise(name: string, value: number): Promise<void>;
}

export function counterStore(d: Database): CounterStore {
  /** Retries an upsert whose insert lost the race against a concurrent upsert of the same _id (then it updates). */
  async function upsert<R>(op: () => Promise<R>): Promise<R> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 3) throw err;
      }
    }
  }
  // The value before the increment, plus it: exact on every server. (mongo-java-server
  // serializes an "after" document once its lock is released, so a concurrent increment can
  // show through it; a "before" document is a copy taken under the lock.) Concurrent takers
  // of one counter share one increment (group-commit.ts).
  const next = groupedIncrement(() => d.counters, "seq");
  const nextStamped = groupedIncrement(() => d.counters, "seq", { clock: "lead" });
  return {
    next: async (name) => (await next(name)).value,
    nextStamped,
    async current(name) {
      return (await d.counters.findOne({ _id: name }))?.seq ?? 0;
    },
    async raise(name, value) {
      await upsert(() => d.counters.updateOne({ _id: name }, { $max: { seq: value } }, { upsert: true }));
    },
  };
}
