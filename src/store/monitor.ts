// Whether the database can be reached, known without asking it on every probe: one ping every
// `intervalMs` (a ping in flight is never doubled). The database is "down" when a ping fails or
// has not answered within `timeoutMs`, and "up" again at the first ping that answers. main.ts
// turns the changes into the gRPC health status (both servers) and /readyz, logs each one
// once, and executors claim at once when the database is back. A full database (it answers, and
// refuses writes) is told at most once a minute, with the count of writes it refused.

export interface DatabaseMonitor {
  /** The last verdict: true until a ping fails or is slow, then true again at the next one that answers. */
  readonly up: boolean;
  /** Called at every change, with the new state and, when it went down, why. */
  onChange(listener: (up: boolean, why?: unknown) => void): () => void;
  stop(): void;
}

export interface MonitorOptions {
  intervalMs: number;
  /** A ping without an answer after this long counts as a failure (it keeps running; its answer still counts). */
  timeoutMs: number;
}

export class SlowPing extends Error {
  constructor(ms: number) {
    super(`the database did not answer a ping within ${ms} ms`);
    this.name = "SlowPing";
  }
}

export function monitorDatabase(ping: () => Promise<void>, opts: MonitorOptions): DatabaseMonitor {
  let up = true;
  let stopped = false;
  let inFlight = false;
  const listeners = new Set<(up: boolean, why?: unknown) => void>();
  const set = (next: boolean, why?: unknown) => {
    if (stopped || next === up) return;
    up = next;
    for (const l of [...listeners]) {
      try {
        l(next, why);
      } catch {
        /* a listener's failure must not stop the monitor */
      }
    }
  };
  const check = () => {
    if (inFlight || stopped) return;
    inFlight = true;
    const slow = setTimeout(() => set(false, new SlowPing(opts.timeoutMs)), opts.timeoutMs);
    slow.unref();
    void ping()
      .then(
        () => set(true),
        (err: unknown) => set(false, err),
      )
      .finally(() => {
        clearTimeout(slow);
        inFlight = false;
      });
  };
  const timer = setInterval(check, opts.intervalMs);
  timer.unref();
  return {
    get up() {
      return up;
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      stopped = true;
      clearInterval(timer);
      listeners.clear();
    },
  };
}

/** How often "the database is full" is told at most: a line a minute, not one per refused write. */
export const DATABASE_FULL_TOLD_EVERY_MS = 60_000;

/**
 * Counts the writes a full database refuses (Store.onFull) and tells of them at most
 * once every `everyMs`: at the first refusal, then at the first one after each interval, with
 * how many were refused since the line before (that one included).
 */
export function fullDatabaseReporter(tell: (refused: number) => void, everyMs = DATABASE_FULL_TOLD_EVERY_MS, now = Date.now): () => void {
  let refused = 0;
  let toldAt = Number.NEGATIVE_INFINITY;
  return () => {
    refused++;
    const t = now();
    if (t - toldAt < everyMs) return;
    toldAt = t;
    tell(refused);
    refused = 0;
  };
}
