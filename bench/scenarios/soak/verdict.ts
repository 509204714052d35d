import { round } from "../../lib/load.js";
import { f0, f1, slopePerMin } from "./aggregate.js";
import {
  FLAT_MB_PER_MIN,
  KINDS,
  KIND_LABEL,
  MIN_P99_REQUESTS,
  RSS_EVERY_MS,
  STABLE_P99_RATIO,
  type SoakResult,
  type SoakVerdict,
  type SoakWindow,
} from "./model.js";

export function verdictOf(windows: SoakWindow[], samples: SoakResult["rssSamples"], names: string[], windowMs: number, javaName?: string): SoakVerdict {
  const warmupMinutes = 1;
  const afterS = (warmupMinutes * windowMs) / 1000;
  const after = samples.filter((s) => s.t >= afterS).sort((a, b) => a.t - b.t);
  const spanS = after.length ? after[after.length - 1]!.t - after[0]!.t : 0;
  const measured = windows.filter((w) => w.minute > warmupMinutes && w.durationS * 1000 >= windowMs / 2);
  // What the database took on after the warm-up, per window.
  const w0 = windows[warmupMinutes - 1];
  const wN = windows[windows.length - 1];
  const spanMin = w0 && wN && wN !== w0 ? (wN.fromS + wN.durationS - (w0.fromS + w0.durationS)) / (windowMs / 1000) : 0;
  const per = (a: number | null | undefined, b: number | null | undefined) =>
    a == null || b == null || !spanMin ? "–" : String(Math.round((b - a) / spanMin));
  const growth = `+${per(w0?.runsStored, wN?.runsStored)} runs and +${per(w0?.activityEntries, wN?.activityEntries)} activity entries a minute`;
  const lines: string[] = [];
  const rss = names.map((name) => {
    const pts = after.map((s) => ({ t: s.t, v: s.mb[name] })).filter((p): p is { t: number; v: number } => p.v != null);
    const slope = spanS >= Math.min(30, windowMs / 2000) ? slopePerMin(pts) : null;
    const firstMb = pts[0]?.v ?? null;
    const lastMb = pts[pts.length - 1]?.v ?? null;
    // Flat: not growing. A fall (a heap given back after a collection) is no leak.
    const flat = slope === null ? null : slope < FLAT_MB_PER_MIN;
    const note = name === javaName ? `the memory backend keeps every document in the JVM heap, so its RSS follows the data (${growth})` : undefined;
    return { process: name, slopeMbPerMin: slope, firstMb, lastMb, flat, ...(note ? { note } : {}) };
  });
  const p99 = KINDS.map((kind) => {
    const ws = measured.filter((w) => w.kinds[kind].p99Ms != null);
    const v = ws.map((w) => w.kinds[kind].p99Ms!);
    const judged = ws.length >= 2 && ws.every((w) => w.kinds[kind].n >= MIN_P99_REQUESTS);
    if (v.length < 2) return { kind, minMs: v[0] ?? null, maxMs: v[0] ?? null, ratio: null, judged: false, stable: null };
    const minMs = Math.min(...v);
    const maxMs = Math.max(...v);
    const ratio = minMs > 0 ? round(maxMs / minMs, 2) : null;
    return { kind, minMs, maxMs, ratio, judged, stable: judged && ratio !== null ? ratio <= STABLE_P99_RATIO : null };
  });
  const runhook = rss.filter((r) => r.process !== javaName);
  const rssFlat = runhook.some((r) => r.flat === null) ? null : runhook.every((r) => r.flat);
  const judged = p99.filter((p) => p.stable !== null);
  const p99Stable = judged.length === 0 ? null : judged.every((p) => p.stable);

  lines.push(`RSS after minute ${warmupMinutes} (least-squares slope over the ${RSS_EVERY_MS / 1000}-s samples, flat below +${FLAT_MB_PER_MIN} MB/min):`);
  for (const r of rss) {
    const judgement = r.note
      ? `not judged: ${r.note}`
      : r.flat === null
        ? "too short to tell"
        : !r.flat
          ? "growing"
          : r.slopeMbPerMin! <= -FLAT_MB_PER_MIN
            ? "falling: flat (not growing)"
            : "flat";
    lines.push(
      `  ${r.process}: ${r.slopeMbPerMin == null ? "–" : `${r.slopeMbPerMin >= 0 ? "+" : ""}${r.slopeMbPerMin}`} MB/min (${f0(r.firstMb)} → ${f0(r.lastMb)} MB) — ${judgement}`,
    );
  }
  lines.push(
    `p99 per minute after minute ${warmupMinutes} (stable when max/min ≤ ${STABLE_P99_RATIO}; judged for kinds with ≥ ${MIN_P99_REQUESTS} requests in each of those minutes, below that a minute's p99 is its slowest request):`,
  );
  for (const p of p99) {
    const minN = Math.min(...measured.map((w) => w.kinds[p.kind].n));
    const judgement =
      p.stable !== null ? (p.stable ? "stable" : "unstable") : `not judged (as few as ${measured.length ? minN : 0} requests in a minute: p99 = max)`;
    lines.push(
      `  ${KIND_LABEL[p.kind]}: ${p.ratio === null ? "too few minutes or requests to tell" : `${f1(p.minMs)}–${f1(p.maxMs)} ms, max/min ${p.ratio} — ${judgement}`}`,
    );
  }
  const loads = measured.map((w) => w.loadAvg1).filter((x): x is number => x != null);
  if (loads.length) lines.push(`Machine load average (1 min) at the ends of those minutes: ${Math.min(...loads)}–${Math.max(...loads)}.`);
  const say = (v: boolean | null, yes: string, no: string) => (v === null ? `${yes}: too short to tell` : v ? yes : no);
  lines.push(`Verdict: ${say(rssFlat, "RSS flat", "RSS not flat")} (runhook processes); ${say(p99Stable, "p99 stable", "p99 not stable")}.`);
  if (measured.length < 2)
    lines.push(`(Only ${measured.length} full minute(s) after the warm-up minute: a soak of 3 minutes or more gives a slope and a ratio worth reading.)`);
  else if (measured.length < 9)
    lines.push(`(${measured.length} minutes after the warm-up: the slope also catches V8 heaps still settling in; 10 minutes or more give a steadier figure.)`);
  return { warmupMinutes, rss, p99, rssFlat, p99Stable, text: lines.join("\n") };
}
