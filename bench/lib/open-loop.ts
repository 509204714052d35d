// An open-loop load generator: arrivals at a fixed rate (arrival j is due at start + j / rate),
// whether or not earlier requests have answered, so that a slow server shows up as latency
// and not as a lower request rate (a closed loop hides it: its callers wait instead). The
// caller measures each request from its due time, which includes any delay of the
// generator itself; that delay (lag) is passed along so that it can be reported apart.
// Bounded: no arrival after `durationMs`, at most `maxInFlight` requests outstanding (the
// others are dropped and counted), and at most `drainMs` of waiting for the last answers.
import { performance } from "node:perf_hooks";
import { sleep } from "./load.js";

export interface OpenLoopOptions {
  ratePerSec: number;
  durationMs: number;
  /** Arrivals while this many requests are outstanding are dropped (onDrop), not queued. */
  maxInFlight: number;
  /** After the last arrival, wait at most this long for outstanding answers. */
  drainMs: number;
  /** Arrival j, due at `dueMs` (performance.now() time), issued `lagMs` after that. Must not reject. */
  issue(j: number, dueMs: number, lagMs: number): Promise<void>;
  onDrop?(j: number, dueMs: number): void;
  /** performance.now() at which arrival 0 is due (default: now). */
  startMs?: number;
  /** Checked before each batch of arrivals: true ends the arrivals early (the outstanding ones are still drained). */
  stopEarly?(): boolean;
}

export interface OpenLoopResult {
  issued: number;
  dropped: number;
  /** Requests still without an answer when the drain time ran out. */
  unanswered: number;
  /** Arrivals ended before `durationMs` because stopEarly() said so. */
  stoppedEarly: boolean;
  maxInFlight: number;
  startMs: number;
  endMs: number;
}

export async function openLoop(o: OpenLoopOptions): Promise<OpenLoopResult> {
  if (!(o.ratePerSec > 0)) throw new Error(`open loop: rate must be positive, got ${o.ratePerSec}`);
  const start = o.startMs ?? performance.now();
  const end = start + o.durationMs;
  const interval = 1000 / o.ratePerSec;
  const total = Math.floor(o.durationMs / interval);
  let inFlight = 0;
  let maxInFlight = 0;
  let dropped = 0;
  let j = 0;
  let idle: (() => void) | undefined;
  let stoppedEarly = false;
  while (j < total) {
    const now = performance.now();
    if (now >= end) break;
    if (o.stopEarly?.()) {
      stoppedEarly = true;
      break;
    }
    // Every arrival due by now, in order (after a stall of the event loop, several at once).
    while (j < total && start + j * interval <= now) {
      const due = start + j * interval;
      if (inFlight >= o.maxInFlight) {
        dropped++;
        o.onDrop?.(j, due);
      } else {
        inFlight++;
        if (inFlight > maxInFlight) maxInFlight = inFlight;
        void o.issue(j, due, now - due).finally(() => {
          inFlight--;
          if (inFlight === 0) idle?.();
        });
      }
      j++;
    }
    const next = start + j * interval;
    await sleep(Math.max(1, Math.min(50, next - performance.now())));
  }
  const issued = j - dropped;
  if (inFlight > 0) {
    await Promise.race([new Promise<void>((r) => (idle = r)), sleep(o.drainMs)]);
  }
  return { issued, dropped, unanswered: inFlight, stoppedEarly, maxInFlight, startMs: start, endMs: performance.now() };
}
