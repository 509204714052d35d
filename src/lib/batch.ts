// Group commit: calls that arrive while a round is under way wait for the next round, which
// serves all of them at once (one database command instead of one each). A call is answered by
// the first round that starts after it arrived, so what it reads is never older than the call,
// and what it writes is written after it was asked for. An idle batcher starts a round at once:
// a lone call waits for nothing.

/** One call's outcome in a round: its value, or the error that fails it alone. */
export type Outcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

export const ok = <O>(value: O): Outcome<O> => ({ ok: true, value });
export const failed = <O = never>(error: unknown): Outcome<O> => ({ ok: false, error });

interface Waiting<I, O> {
  item: I;
  resolve(value: O): void;
  reject(error: unknown): void;
}

export interface BatchOptions {
  /** At most this many calls per round. */
  max?: number;
  /**
   * An error that would fail the next round too (the database is unreachable): when a round
   * fails with one, the calls waiting for the next round fail with it at once, instead of each
   * waiting for a round of its own to fail the same way.
   */
  failsTheNext?: (err: unknown) => boolean;
}

/**
 * Wraps `round`, which serves a batch of calls and returns one outcome per call (in order), so
 * that at most one round runs at a time and each takes up to `max` of the calls waiting. A round
 * that throws fails every call of its batch.
 */
export function batched<I, O>(round: (items: I[]) => Promise<Outcome<O>[]>, opts: BatchOptions = {}): (item: I) => Promise<O> {
  const { max = 512, failsTheNext } = opts;
  const waiting: Waiting<I, O>[] = [];
  let running = false;
  async function serve(batch: Waiting<I, O>[]): Promise<unknown> {
    let outcomes: Outcome<O>[];
    try {
      outcomes = await round(batch.map((w) => w.item));
    } catch (err) {
      for (const w of batch) w.reject(err);
      return err;
    }
    let shared: unknown;
    batch.forEach((w, i) => {
      const o = outcomes[i] ?? failed(new Error("a batched round gave no outcome for a call"));
      if (o.ok) w.resolve(o.value);
      else {
        w.reject(o.error);
        shared ??= o.error;
      }
    });
    return shared;
  }
  async function drain(): Promise<void> {
    running = true;
    try {
      while (waiting.length > 0) {
        const err = await serve(waiting.splice(0, max));
        if (err !== undefined && failsTheNext?.(err)) for (const w of waiting.splice(0)) w.reject(err);
      }
    } finally {
      running = false;
    }
  }
  return (item) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      if (!running) void drain();
    });
}

/**
 * `read`, grouped: the calls of a round that ask for the same key share one read of it (each
 * read starts after every call it answers arrived, so none is answered with an older value).
 */
export function sharedByKey<V>(read: (key: string) => Promise<V>, opts?: BatchOptions): (key: string) => Promise<V> {
  return batched<string, V>(async (keys) => {
    const reads = new Map<string, Promise<Outcome<V>>>();
    for (const k of new Set(keys)) reads.set(k, read(k).then(ok, failed));
    const done = new Map<string, Outcome<V>>();
    for (const [k, p] of reads) done.set(k, await p);
    return keys.map((k) => done.get(k)!);
  }, opts);
}
