// The SLO rate: the highest fixed arrival rate (open loop, lib/open-loop.ts) whose p99 stays
// within a limit with every answer the expected one. Latency is measured from each request's
// due time, so a server that falls behind shows as latency (coordinated omission is not hidden).
// The search doubles the rate from `startPerSec` until a step misses (halves it when the first
// one misses), then bisects between the highest rate met and the lowest missed, each step
// `stepMs` long, until they are within `precision` of each other or the time budget is spent.
// A step ends early once more than 1% of its planned requests answered over the limit (its p99
// cannot be met any more) or one answer was not the expected one: an overloaded step then
// costs little, and its backlog is drained before the next step starts. A missed rate is tried
// once more after a 2 s pause and counts as missed only when it misses again: on a shared
// machine one pause (a garbage collection, the tail of the previous step) must not decide it.
// A request that meets a limit (LimitMet) ends the search, which throws it.
import { performance } from "node:perf_hooks";
import { LimitMet } from "./limits.js";
import { percentile, round, sleep, thrownOutcome, type Outcome } from "./load.js";
import { openLoop } from "./open-loop.js";

export interface SloStep {
  ratePerSec: number;
  /** Requests sent (arrivals not dropped). */
  sent: number;
  ok: number;
  /** Answers other than the expected one, by status; "dropped" and "unanswered" too. */
  other: Record<string, number>;
  /** Latency from the due time, ms. */
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** p99 of the generator's own lateness (issue time − due time), ms: included in the latencies. */
  lagP99Ms: number | null;
  stoppedEarly: boolean;
  met: boolean;
}

export interface SloResult {
  /** Highest rate met (0 when even the lowest tried missed). */
  perSec: number;
  p99LimitMs: number;
  stepMs: number;
  /** Every step, in the order tried. */
  steps: SloStep[];
  elapsedMs: number;
}

export interface SloOptions {
  /** One request; `id` is distinct for every request of the search. A rejection is an unexpected answer, or with LimitMet the search's end. */
  call(id: string): Promise<Outcome>;
  p99LimitMs: number;
  stepMs: number;
  /** Whole search, steps and drains included. */
  budgetMs: number;
  startPerSec: number;
  /** Bisection ends when highest met × (1 + precision) ≥ lowest missed. */
  precision: number;
  minPerSec?: number;
  maxPerSec?: number;
  maxInFlight?: number;
  log?(msg: string): void;
}

async function sloStep(o: SloOptions, ratePerSec: number, idPrefix: string): Promise<SloStep> {
  const lat: number[] = [];
  const lag: number[] = [];
  const other: Record<string, number> = {};
  const allowedLate = Math.floor(((ratePerSec * o.stepMs) / 1000) * 0.01);
  let late = 0;
  let ok = 0;
  let met: LimitMet | undefined;
  const bump = (k: string) => (other[k] = (other[k] ?? 0) + 1);
  const loop = await openLoop({
    ratePerSec,
    durationMs: o.stepMs,
    maxInFlight: o.maxInFlight ?? 2000,
    drainMs: 10_000,
    stopEarly: () => late > allowedLate || Object.keys(other).length > 0 || met !== undefined,
    onDrop: () => bump("dropped"),
    issue: async (j, dueMs, lagMs) => {
      lag.push(lagMs);
      let r: Outcome;
      try {
        r = await o.call(`${idPrefix}-${j}`);
      } catch (err) {
        if (err instanceof LimitMet) met ??= err;
        r = thrownOutcome(err);
      }
      const ms = performance.now() - dueMs;
      lat.push(ms);
      if (ms > o.p99LimitMs) late++;
      if (r.ok) ok++;
      else bump(String(r.status));
    },
  });
  if (met) throw met;
  if (loop.unanswered) other.unanswered = loop.unanswered;
  const sorted = Float64Array.from(lat).sort();
  const p99 = percentile(sorted, 99);
  return {
    ratePerSec,
    sent: loop.issued,
    ok,
    other,
    p50Ms: percentile(sorted, 50),
    p99Ms: p99,
    maxMs: sorted.length ? round(sorted[sorted.length - 1]!) : null,
    lagP99Ms: percentile(Float64Array.from(lag).sort(), 99),
    stoppedEarly: loop.stoppedEarly,
    met: !loop.stoppedEarly && ok > 0 && Object.keys(other).length === 0 && p99 !== null && p99 <= o.p99LimitMs,
  };
}

/** The next rate to try, or null when the search is done. */
function nextRate(o: SloOptions, rate: number, highestMet: number, lowestMissed: number): number | null {
  if (lowestMissed === Number.POSITIVE_INFINITY) return rate >= (o.maxPerSec ?? 20_000) ? null : Math.min(rate * 2, o.maxPerSec ?? 20_000);
  if (highestMet === 0) return rate / 2 < (o.minPerSec ?? 5) ? null : Math.round(rate / 2);
  if (highestMet * (1 + o.precision) >= lowestMissed) return null;
  const mid = Math.round((highestMet + lowestMissed) / 2);
  return mid === highestMet || mid === lowestMissed ? null : mid;
}

export async function sloSearch(o: SloOptions, idPrefix: string): Promise<SloResult> {
  const t0 = performance.now();
  const steps: SloStep[] = [];
  let highestMet = 0;
  let lowestMissed = Number.POSITIVE_INFINITY;
  let rate: number | null = o.startPerSec;
  // A step costs its duration, a drain and a pause: start one only when it fits in the budget.
  const fits = () => performance.now() - t0 + o.stepMs + 1500 <= o.budgetMs;
  const step = async (r: number) => {
    const s = await sloStep(o, r, `${idPrefix}-${steps.length}`);
    steps.push(s);
    o.log?.(
      `    ${r}/s: sent ${s.sent}, p50 ${s.p50Ms} p99 ${s.p99Ms} max ${s.maxMs} ms, gen lag p99 ${s.lagP99Ms} ms${Object.keys(s.other).length ? ` ${JSON.stringify(s.other)}` : ""}${s.stoppedEarly ? " (stopped early)" : ""} → ${s.met ? "met" : "missed"}`,
    );
    await sleep(s.met ? 500 : 2000);
    return s.met;
  };
  while (rate !== null && fits()) {
    const met = (await step(rate)) || (fits() && (await step(rate)));
    if (met) highestMet = Math.max(highestMet, rate);
    else lowestMissed = Math.min(lowestMissed, rate);
    rate = nextRate(o, rate, highestMet, lowestMissed);
  }
  return { perSec: highestMet, p99LimitMs: o.p99LimitMs, stepMs: o.stepMs, steps, elapsedMs: Math.round(performance.now() - t0) };
}
