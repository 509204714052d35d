// Leases on claimed runs: their owner names, the heartbeat that keeps one alive while its run
// goes on, and its release when the executors stop.
//
// A lease owner is unique per claim (`<executor id>#<n>`), so even a re-claim by the same
// process invalidates the old holder. A release gives the lease a new owner name and an expiry
// in the past (domain/runs/state.ts), and happens only after the heartbeat has stopped and its beat
// in flight has landed: no renewal can extend a released lease.
import type { Logger } from "pino";
import { isUnavailable } from "../store/index.js";
import type { Lease } from "../store/runs.js";
import type { RunStateMachine } from "../domain/runs/state.js";

/** A new lease, owned by `<executorId>#<n>`, for each claim this executor makes. */
export function leaseIssuer(executorId: string, leaseMs: number): () => Lease {
  let claimSeq = 0;
  return () => ({ owner: `${executorId}#${++claimSeq}`, expiresAt: new Date(Date.now() + leaseMs) });
}

/** How often a lease of `leaseMs` is renewed: well before it expires. */
export function renewalInterval(leaseMs: number): number {
  return Math.max(100, Math.floor(leaseMs / 3));
}

export interface LeaseEnv {
  machine: RunStateMachine;
  leaseMs: number;
  /** The lease is renewed this often. */
  renewEveryMs: number;
}

/** What the runner tells the heartbeat of its lease. */
export interface HeartbeatState {
  /** A change of the run has just extended the lease: the next renewal can wait. */
  renewed(): void;
}

export interface HeldLease {
  state: HeartbeatState;
  /** Stops beating, once a beat in flight has landed (so it cannot renew after a release). */
  stop(): Promise<void>;
  /** Stops beating and, with `handOver` (the executors are stopping), releases the run for another executor to resume at once. */
  end(handOver: boolean): Promise<void>;
}

/** Keeps the lease of run `id` alive; calls `onGone` when the run is no longer `owner`'s. */
export function holdLease(env: LeaseEnv, log: Logger, id: string, owner: string, onGone: () => void): HeldLease {
  let lastRenew = Date.now();
  let beat: Promise<void> = Promise.resolve();
  let beating = false;
  const state: HeartbeatState = {
    renewed: () => {
      lastRenew = Date.now();
    },
  };
  const tick = async () => {
    if (Date.now() - lastRenew < env.renewEveryMs) return;
    if (!(await env.machine.renew(id, owner, new Date(Date.now() + env.leaseMs)))) return onGone();
    lastRenew = Date.now();
  };
  const timer = setInterval(
    () => {
      // One beat at a time: piling up renewals of one run would only contend with its steps' updates.
      if (beating) return;
      beating = true;
      beat = tick()
        .catch((err: unknown) =>
          isUnavailable(err) ? log.debug({ err }, "lease renewal failed: the database is unreachable") : log.warn({ err }, "lease renewal failed"),
        )
        .finally(() => (beating = false));
    },
    Math.max(50, Math.floor(env.renewEveryMs / 2)),
  );
  const stop = async () => {
    clearInterval(timer);
    await beat;
  };
  return {
    state,
    stop,
    async end(handOver) {
      await stop();
      if (handOver) await env.machine.release(id, owner).catch((err: unknown) => log.warn({ err }, "could not release the run"));
    },
  };
}
