// Puts in the log the activity entries that processes which died left pending in their runs
// (domain/runs/activity.ts). One sweep per process, like retention's: each put is idempotent, so
// processes need not elect one.
import type { Logger } from "pino";
import { sweepPendingEntries } from "../domain/runs/activity.js";
import { isUnavailable, type Store } from "../store/index.js";

/** How often a process looks for entries left pending. */
export const PENDING_SWEEP_EVERY_MS = 2_000;

export function startPendingSweep(store: Store, logger: Logger): NodeJS.Timeout {
  let sweeping = false;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweepPendingEntries(store)
      .then(
        (put) => put > 0 && logger.info({ put }, "put activity entries left pending by a process that stopped"),
        (err: unknown) => !isUnavailable(err) && logger.warn({ err }, "putting pending activity entries failed"),
      )
      .finally(() => (sweeping = false));
  }, PENDING_SWEEP_EVERY_MS);
  timer.unref();
  return timer;
}
