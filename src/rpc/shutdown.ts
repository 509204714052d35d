// How a server's calls still in flight (WatchRun streams, long polls) end when it stops: they
// may run for a grace period, then each ends with UNAVAILABLE, the code a client retries on
// (on another instance, or on this one once it is back), rather than a clean end that would
// read as "the run is finished".
import { setMaxListeners } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";

/** How long calls still in flight may run once their server starts to stop. */
export const CALLS_GRACE_MS = 5000;

export interface CallsShutdown {
  /** Every call of the server links its own signal to this one (Connect's `shutdownSignal`). */
  signal: AbortSignal;
  /**
   * For a call that makes its own context (the gRPC fast path, in-process calls), cheaper than a
   * linked signal: `end` is called with the reason once the grace period is over; the function
   * returned forgets the call, and is called when it ends.
   */
  track(end: (reason: unknown) => void): () => void;
  /** Ends the calls still in flight once the grace period is over. */
  begin(): void;
}

export function callsShutdown(graceMs = CALLS_GRACE_MS): CallsShutdown {
  const controller = new AbortController();
  // Every call in flight listens on it, and each removes its listener when it ends: there is no
  // count past which a listener would be a leak, so no warning of one.
  setMaxListeners(0, controller.signal);
  const tracked = new Set<(reason: unknown) => void>();
  controller.signal.addEventListener("abort", () => {
    for (const end of tracked) end(controller.signal.reason);
  });
  let timer: NodeJS.Timeout | undefined;
  return {
    signal: controller.signal,
    track(end) {
      if (controller.signal.aborted) end(controller.signal.reason);
      tracked.add(end);
      return () => tracked.delete(end);
    },
    begin() {
      timer ??= setTimeout(() => controller.abort(new ConnectError("the server is stopping: call again", Code.Unavailable)), graceMs);
      timer.unref();
    },
  };
}
