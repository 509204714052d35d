import { percentile, round } from "../../lib/load.js";
import { KINDS, RSS_EVERY_MS, SHORT, type Kind, type KindFigures, type SoakResult, type SoakWindow } from "./model.js";

interface KindAcc {
  lat: number[];
  statuses: Record<string, number>;
  errors: number;
}

export interface DbFigures {
  finished: number | null;
  backlog: number | null;
  runs: number | null;
  activity: number | null;
}

export interface WindowAcc {
  minute: number;
  fromMs: number;
  toMs: number;
  arrivals: number;
  dropped: number;
  pending: number;
  accepted: number;
  conflicts: number;
  lag: number[];
  kinds: Record<Kind, KindAcc>;
  followed: { finished: number; unfinished: number };
  logEntries: number;
  rssEnd?: Record<string, number | null>;
  loadAvg1?: number;
  db?: DbFigures;
  dbAtEnd?: Promise<DbFigures>;
  printed: boolean;
}

export function newWindow(minute: number, fromMs: number, toMs: number): WindowAcc {
  return {
    minute,
    fromMs,
    toMs,
    arrivals: 0,
    dropped: 0,
    pending: 0,
    accepted: 0,
    conflicts: 0,
    lag: [],
    kinds: Object.fromEntries(KINDS.map((k) => [k, { lat: [], statuses: {}, errors: 0 }])) as unknown as Record<Kind, KindAcc>,
    followed: { finished: 0, unfinished: 0 },
    logEntries: 0,
    printed: false,
  };
}

export function kindFigures(a: KindAcc): KindFigures {
  const s = Float64Array.from(a.lat).sort();
  return {
    n: s.length,
    p50Ms: percentile(s, 50),
    p99Ms: percentile(s, 99),
    maxMs: s.length ? round(s[s.length - 1]!, 1) : null,
    errors: a.errors,
    statuses: { ...a.statuses },
  };
}

export function windowFigures(w: WindowAcc, samples: SoakResult["rssSamples"], names: string[]): SoakWindow {
  const durationS = (w.toMs - w.fromMs) / 1000;
  const inWin = samples.filter((s) => s.t * 1000 >= w.fromMs && s.t * 1000 <= w.toMs + RSS_EVERY_MS / 2);
  const peak: Record<string, number | null> = {};
  for (const n of names) {
    const v = [...inWin.map((s) => s.mb[n]), w.rssEnd?.[n]].filter((x): x is number => x != null);
    peak[n] = v.length ? Math.max(...v) : null;
  }
  const kinds = Object.fromEntries(KINDS.map((k) => [k, kindFigures(w.kinds[k])])) as Record<Kind, KindFigures>;
  const followed = w.followed.finished + w.followed.unfinished;
  const lag = Float64Array.from(w.lag).sort();
  return {
    minute: w.minute,
    fromS: round(w.fromMs / 1000, 1),
    durationS: round(durationS, 1),
    arrivals: w.arrivals,
    dropped: w.dropped,
    acceptedPerSec: round(w.accepted / durationS, 1),
    conflicts: w.conflicts,
    errors: KINDS.reduce((a, k) => a + w.kinds[k].errors, 0) + w.dropped,
    finishedPerSec: w.db?.finished == null ? null : round(w.db.finished / durationS, 1),
    backlog: w.db?.backlog ?? null,
    runsStored: w.db?.runs ?? null,
    activityEntries: w.db?.activity ?? null,
    rssMb: { ...(w.rssEnd ?? {}) },
    rssPeakMb: peak,
    kinds,
    followedFinished: followed ? round(w.followed.finished / followed, 3) : null,
    logEntriesRead: w.logEntries,
    genLagP99Ms: percentile(lag, 99),
    loadAvg1: w.loadAvg1 ?? null,
  };
}

export const f0 = (v: number | null | undefined) => (v == null ? "–" : String(Math.round(v)));
export const f1 = (v: number | null | undefined) => (v == null ? "–" : String(round(v, 1)));
export const lat = (k: KindFigures) => `${f1(k.p50Ms)} / ${f1(k.p99Ms)}`;
export const rssCell = (w: SoakWindow, n: string) =>
  `${f0(w.rssMb[n])}${w.rssPeakMb[n] != null && w.rssPeakMb[n] !== w.rssMb[n] ? ` (${f0(w.rssPeakMb[n])})` : ""}`;

export function consoleLine(w: SoakWindow, names: string[]): string {
  return [
    `  min ${w.minute} (${w.durationS} s): accepted ${w.acceptedPerSec}/s, 409 ×${w.conflicts}, finished ${f1(w.finishedPerSec)}/s, backlog ${f0(w.backlog)}, errors ${w.errors}`,
    ` | RSS MB ${names.map((n) => `${n} ${rssCell(w, n)}`).join(", ")}`,
    ` | p50/p99 ms ${KINDS.map((k) => `${SHORT[k]} ${lat(w.kinds[k])}`).join(", ")}`,
    ` | gen lag p99 ${f1(w.genLagP99Ms)} ms, load ${w.loadAvg1 ?? "–"}`,
  ].join("");
}

/** Least-squares slope of (t seconds, v) in units of v per minute. */
export function slopePerMin(points: { t: number; v: number }[]): number | null {
  if (points.length < 3) return null;
  const n = points.length;
  const mt = points.reduce((a, p) => a + p.t, 0) / n;
  const mv = points.reduce((a, p) => a + p.v, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.v - mv);
    den += (p.t - mt) ** 2;
  }
  return den === 0 ? null : round((num / den) * 60, 2);
}
