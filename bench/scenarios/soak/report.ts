import { round } from "../../lib/load.js";
import { f0, f1, lat, rssCell } from "./aggregate.js";
import { KINDS, KIND_LABEL, MIX, SHORT, TRIGGER_SHARE, type SoakResult } from "./model.js";

export function renderSoakMarkdown(
  r: SoakResult,
  meta: {
    date: string;
    database: string;
    commit: string;
    dirty: boolean;
    loadAvgStart: number[];
    loadAvgEnd: number[];
    cpus: number;
    node: string;
    uptimeStart: string;
    uptimeEnd: string;
  },
): string {
  const names = Object.keys(r.processes);
  const o = r.options;
  const c = r.capacity;
  const out: string[] = [];
  out.push(`# runhook soak — ${meta.date}`);
  out.push("");
  out.push(`${meta.database}; commit ${meta.commit}${meta.dirty ? " (dirty)" : ""}; ${meta.cpus} CPUs; node ${meta.node}.`);
  out.push(`Machine at the start: \`${meta.uptimeStart}\`; at the end: \`${meta.uptimeEnd}\`.`);
  out.push("");
  out.push(
    `Soak of ${o.durationMs / 1000} s, figures per ${o.windowMs / 1000}-s window ("minute"). Processes: ${names.map((n) => `${n} (pid ${r.processes[n] ?? "–"})`).join(", ")}. ${r.tenants} tenants, ${o.records} records each.`,
  );
  out.push("");
  out.push(`Mix per 100 arrivals: ${KINDS.map((k) => `${KIND_LABEL[k]} ${MIX[k]}`).join(", ")}.`);
  out.push("");
  if (c) {
    out.push(
      `Capacity: closed loop of the mix at concurrency ${c.concurrency} for ${c.durationMs / 1000} s: ${c.mixPerSec} req/s, ${c.acceptedPerSec} runs accepted/s, ${c.finishedPerSec} runs finished/s meanwhile; backlog ${c.backlogAfter} runs, drained with the load off at ${c.drainRunsPerSec ?? "–"} runs/s in ${round(c.drainMs / 1000, 1)} s${c.cancelled ? ` (${c.cancelled} cancelled at the drain's time limit)` : ""}. ${c.how}`,
    );
  } else {
    out.push("Capacity: not measured (--soak-rate given).");
  }
  out.push(
    `Open loop at **${r.targetPerSec} req/s**${c ? ` (${Math.round(o.share * 100)}% of ${c.capacityPerSec} req/s)` : ""}, i.e. about ${round(r.targetPerSec * TRIGGER_SHARE, 1)} triggers/s.`,
  );
  out.push("");
  out.push(
    `| min | s | accepted/s | 409 | errors | finished/s | backlog | ${names.map((n) => `${n} RSS MB`).join(" | ")} | ${KINDS.map((k) => `${SHORT[k]} p50 / p99 ms`).join(" | ")} | gen lag p99 ms | load |`,
  );
  out.push(`|---:|---:|---:|---:|---:|---:|---:|${names.map(() => "---:|").join("")}${KINDS.map(() => "---:|").join("")}---:|---:|`);
  for (const w of r.windows) {
    out.push(
      `| ${w.minute} | ${w.durationS} | ${w.acceptedPerSec} | ${w.conflicts} | ${w.errors} | ${f1(w.finishedPerSec)} | ${f0(w.backlog)} | ${names.map((n) => rssCell(w, n)).join(" | ")} | ${KINDS.map((k) => lat(w.kinds[k])).join(" | ")} | ${f1(w.genLagP99Ms)} | ${w.loadAvg1 ?? "–"} |`,
    );
  }
  out.push("");
  out.push(
    "RSS: at the window's end (peak of the 5-s samples in it, when higher). Latency from each request's due time (includes the generator's own lag, shown apart). finished/s: runs whose `finishedAt` falls in the window; backlog: QUEUED + RUNNING runs at its end; load: the machine's 1-minute load average at its end.",
  );
  const t = r.totals;
  const other = r.windows.flatMap((w) =>
    KINDS.flatMap((k) =>
      Object.entries(w.kinds[k].statuses)
        .filter(([s]) => !["200", "201", "202", "409", "OK", "grpc-ALREADY_EXISTS"].includes(s))
        .map(([s, n]) => `${SHORT[k]} ${s}×${n}`),
    ),
  );
  const followed = r.windows.map((w) => w.followedFinished).filter((x): x is number => x != null);
  out.push("");
  out.push(
    `Totals: ${t.arrivals} arrivals in ${t.elapsedS} s, ${t.accepted} runs accepted, ${t.conflicts} answered 409 / ALREADY_EXISTS, ${t.errors} errors${other.length ? ` (${other.slice(0, 12).join(", ")})` : ""}, ${t.dropped} dropped (more than the in-flight limit outstanding), ${t.unanswered} unanswered at the end, at most ${t.maxInFlight} in flight. Runs followed about 1 s after their accept and already finished: ${followed.length ? `${round(Math.min(...followed) * 100, 1)}% (lowest minute), ${round(Math.max(...followed) * 100, 1)}% (highest)` : "–"}. Runs stored at the end: ${f0(r.windows[r.windows.length - 1]?.runsStored)}, activity entries: ${f0(r.windows[r.windows.length - 1]?.activityEntries)}.`,
  );
  out.push("");
  out.push("## Verdict");
  out.push("");
  out.push("```");
  out.push(r.verdict.text);
  out.push("```");
  return `${out.join("\n")}\n`;
}
