// A closed-loop load generator: `concurrency` workers, each issuing its next request as soon
// as the previous one answered, for `durationMs` (or `maxRequests`, whichever comes first).
// Latency of every request is kept (not bucketed), so p50/p99/p999 are exact for the sample.
// A request that meets a limit (it throws LimitMet) ends the phase, which throws it.
import { performance } from "node:perf_hooks";
import { LimitMet } from "./limits.js";

export interface Outcome {
  /** Counted as the expected answer (202 for an accept, 409 for a conflict, …). */
  ok: boolean;
  /** Status or error code, for the breakdown. */
  status: string | number;
}

export interface LoadStats {
  concurrency: number;
  requests: number;
  ok: number;
  /** Answers other than the expected one, by status. */
  other: Record<string, number>;
  durationMs: number;
  /** Expected answers per second. */
  okPerSec: number;
  p50Ms: number | null;
  p99Ms: number | null;
  p999Ms: number | null;
  maxMs: number | null;
  /** Every latency, ms, when asked for (keepSamples); for merging slices, not for the results file. */
  samples?: number[];
}

export function percentile(sorted: ArrayLike<number>, p: number): number | null {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return round(sorted[i]!);
}

export const round = (v: number, digits = 2) => Math.round(v * 10 ** digits) / 10 ** digits;

export interface LoadOptions {
  concurrency: number;
  durationMs: number;
  maxRequests?: number;
  /** Requests issued (and not measured) before the measured period, per worker. */
  warmupPerWorker?: number;
  /** Give up (throw) when the phase has not ended this long after its duration (default duration × 5 + 60 s). */
  hardTimeoutMs?: number;
  /** The request; `i` is a process-wide unique sequence number. */
  fn: (i: number) => Promise<Outcome>;
  /** Called once the warm-up is over, as the measured period starts. */
  onMeasureStart?: () => void;
  /** Return every latency in `samples` (see mergeStats). */
  keepSamples?: boolean;
}

let seq = 0;

/** What a request that threw counts as: its error's code. */
export function thrownOutcome(err: unknown): Outcome {
  return { ok: false, status: (err as { code?: string }).code ?? (err as Error).name ?? "error" };
}

export async function closedLoop(o: LoadOptions): Promise<LoadStats> {
  const limit = o.hardTimeoutMs ?? o.durationMs * 5 + 60_000;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`load phase (concurrency ${o.concurrency}) did not end within ${Math.round(limit / 1000)} s`)), limit);
  });
  try {
    return await Promise.race([closedLoopInner(o), expired]);
  } finally {
    clearTimeout(timer);
  }
}

async function closedLoopInner(o: LoadOptions): Promise<LoadStats> {
  const max = o.maxRequests ?? Number.MAX_SAFE_INTEGER;
  let met: LimitMet | undefined;
  /** What a request that threw stands for: its error's code, unless it met a limit (then the phase ends). */
  const failed = (err: unknown): Outcome => {
    if (err instanceof LimitMet) met ??= err;
    return thrownOutcome(err);
  };
  if (o.warmupPerWorker) {
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        for (let k = 0; k < o.warmupPerWorker! && !met; k++) await o.fn(seq++).catch(failed);
      }),
    );
  }
  if (met) throw met;
  o.onMeasureStart?.();
  const lat: number[] = [];
  const other: Record<string, number> = {};
  let ok = 0;
  let issued = 0;
  const start = performance.now();
  const end = start + o.durationMs;
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      while (issued < max && performance.now() < end && !met) {
        issued++;
        const t0 = performance.now();
        let r: Outcome;
        try {
          r = await o.fn(seq++);
        } catch (err) {
          r = failed(err);
        }
        lat.push(performance.now() - t0);
        if (r.ok) ok++;
        else other[String(r.status)] = (other[String(r.status)] ?? 0) + 1;
      }
    }),
  );
  if (met) throw met;
  const durationMs = performance.now() - start;
  const sorted = Float64Array.from(lat).sort();
  return {
    concurrency: o.concurrency,
    requests: lat.length,
    ok,
    other,
    durationMs: round(durationMs, 0),
    okPerSec: round((ok / durationMs) * 1000, 1),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    p999Ms: percentile(sorted, 99.9),
    maxMs: sorted.length ? round(sorted[sorted.length - 1]!) : null,
    ...(o.keepSamples ? { samples: lat } : {}),
  };
}

/** One LoadStats of several slices of the same load (made with keepSamples), as if it had run in one piece. */
export function mergeStats(parts: LoadStats[]): LoadStats {
  const lat = parts.flatMap((p) => p.samples ?? []);
  const sorted = Float64Array.from(lat).sort();
  const other: Record<string, number> = {};
  for (const p of parts) for (const [k, v] of Object.entries(p.other)) other[k] = (other[k] ?? 0) + v;
  const ok = parts.reduce((a, p) => a + p.ok, 0);
  const durationMs = parts.reduce((a, p) => a + p.durationMs, 0);
  return {
    concurrency: parts[0]?.concurrency ?? 0,
    requests: parts.reduce((a, p) => a + p.requests, 0),
    ok,
    other,
    durationMs,
    okPerSec: round((ok / Math.max(1, durationMs)) * 1000, 1),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    p999Ms: percentile(sorted, 99.9),
    maxMs: sorted.length ? round(sorted[sorted.length - 1]!) : null,
  };
}

/** p50/p99 (and count) of a list of millisecond values. */
export function summarize(values: number[]): { n: number; p50Ms: number | null; p99Ms: number | null; maxMs: number | null } {
  const s = Float64Array.from(values).sort();
  return { n: s.length, p50Ms: percentile(s, 50), p99Ms: percentile(s, 99), maxMs: s.length ? round(s[s.length - 1]!) : null };
}

export const ratio = (a: number | null | undefined, b: number | null | undefined): number | null =>
  a == null || b == null || b === 0 ? null : round(a / b, 3);

export { sleep } from "../../src/lib/sleep.js";
