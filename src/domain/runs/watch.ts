// Following runs without change streams: one poller per process re-reads every run that
// somebody is waiting on, in one query per tick, and wakes the waiters whose run changed.
// Changes made on this instance (RUN_CHANGED events) are picked up without waiting for a tick.
import type { EventEmitter } from "node:events";
import type { Logger } from "pino";
import type { Store } from "../../store/index.js";
import type { RunDoc } from "../../store/types.js";
import { isUnavailable } from "../../store/index.js";
import { isFinished, RUN_CHANGED } from "./model.js";
import { coalesced } from "../../lib/coalesce.js";

export const WATCH_POLL_MS = 150;

interface Waiter {
  known: number;
  resolve(run: RunDoc | null): void;
}

/** What the watcher reads runs from, hears local changes on, and logs a failed poll to. */
export interface WatchDeps {
  store: Pick<Store, "runs">;
  events: Pick<EventEmitter, "on">;
  logger: Pick<Logger, "warn">;
}

export class RunWatcher {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private timer: NodeJS.Timeout | undefined;
  /** One poll at a time; a change noticed during one makes it poll once more. */
  private readonly poll = coalesced(() => this.pollOnce());

  constructor(
    private readonly deps: WatchDeps,
    private readonly intervalMs = WATCH_POLL_MS,
  ) {
    deps.events.on(RUN_CHANGED, (id: string) => {
      if (this.waiters.has(id)) void this.poll();
    });
  }

  /**
   * Resolves with the run as soon as its version differs from `known` or it is finished,
   * or with null when `deadline` (epoch ms) passes or `signal` aborts.
   */
  wait(runId: string, known: number, deadline: number, signal?: AbortSignal): Promise<RunDoc | null> {
    return new Promise((resolve) => {
      let set = this.waiters.get(runId);
      if (!set) {
        set = new Set();
        this.waiters.set(runId, set);
      }
      const done = (run: RunDoc | null) => {
        clearTimeout(timeout);
        signal?.removeEventListener("abort", onAbort);
        const s = this.waiters.get(runId);
        s?.delete(w);
        if (s && s.size === 0) this.waiters.delete(runId);
        if (this.waiters.size === 0 && this.timer) {
          clearInterval(this.timer);
          this.timer = undefined;
        }
        resolve(run);
      };
      const w: Waiter = { known, resolve: done };
      const onAbort = () => done(null);
      const timeout = setTimeout(() => done(null), Math.max(0, deadline - Date.now()));
      set.add(w);
      if (signal?.aborted) return done(null);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (!this.timer) {
        this.timer = setInterval(() => void this.poll(), this.intervalMs);
        this.timer.unref();
      }
    });
  }

  /** Re-reads every run waited on, and wakes the waiters whose run changed; false when there is nothing (more) to read. */
  private async pollOnce(): Promise<boolean> {
    const ids = [...this.waiters.keys()];
    if (ids.length === 0) return false;
    let runs: RunDoc[];
    try {
      runs = await this.deps.store.runs.getMany(ids);
    } catch (err) {
      // An outage is logged once, by the database monitor (main.ts); waiters keep waiting.
      if (!isUnavailable(err)) this.deps.logger.warn({ err }, "run watcher poll failed");
      return false;
    }
    for (const run of runs) {
      for (const w of [...(this.waiters.get(run._id) ?? [])]) {
        if (run.version !== w.known || isFinished(run.state)) w.resolve(run);
      }
    }
    return true;
  }
}
