// The results file's shape, the markdown report and the one-line JSON headline.
import type { E2eResult } from "./scenarios/e2e.js";
import type { LogsResult } from "./scenarios/logs.js";
import type { WebhookResult } from "./scenarios/webhook.js";

export interface BenchResults {
  date: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; memGb: number; node: string; platform: string };
  database: string;
  commit: string;
  dirty: boolean;
  durationS?: number;
  webhook: WebhookResult | { error: string } | null;
  e2e: E2eResult | { error: string } | null;
  logs: LogsResult | { error: string } | null;
  profiles?: string[];
}

export const TARGETS = {
  webhookVsRawInsert: 0.4,
  webhookP99Ms: 50,
  pickupP99Ms: 50,
  logsPagingVsRawScan: 0.5,
  rssIdleMb: 150,
  rssLoadMb: 300,
};

const ok = <T extends object>(v: T | { error: string } | null): T | null => (v && !("error" in v) ? v : null);
const f = (v: number | null | undefined, unit = "") => (v == null ? "–" : `${v}${unit}`);
const pct = (v: number | null | undefined) => (v == null ? "–" : `${Math.round(v * 1000) / 10}%`);

export interface Headline {
  webhookAcceptedPerSec: number | null;
  rawInsertPerSec: number | null;
  webhookVsRawInsert: number | null;
  webhookP99Ms: number | null;
  grpcAcceptedPerSec: number | null;
  grpcVsRest: number | null;
  conflictPerSec: number | null;
  e2eRunsPerSec1: number | null;
  e2eRunsPerSec2: number | null;
  pickupP99Ms: number | null;
  completionP99Ms: number | null;
  logsPagingPerSec: number | null;
  logsPagingVsRawScan: number | null;
  logsExportVsRawScan: number | null;
  rssIdleMb: number | null;
  rssLoadMb: number | null;
  quick: boolean;
}

export function headline(r: BenchResults): Headline {
  const w = ok(r.webhook);
  const top = w?.levels.find((l) => l.concurrency === 64) ?? w?.levels[w.levels.length - 1];
  const e = ok(r.e2e);
  const one = e?.configs.find((c) => c.name === "server with executors");
  const w1 = e?.configs.find((c) => c.name === "server + 1 worker");
  const w2 = e?.configs.find((c) => c.name === "server + 2 workers");
  const l = ok(r.logs);
  const rss = [w?.rss, ...(e?.configs.map((c) => c.rss) ?? []), l?.rss];
  const loads = rss.flatMap((x) => [x?.peakMb, x?.endMb]).filter((v): v is number => typeof v === "number");
  return {
    webhookAcceptedPerSec: top?.rest.okPerSec ?? null,
    rawInsertPerSec: top?.raw.okPerSec ?? null,
    webhookVsRawInsert: top?.restVsRaw ?? null,
    webhookP99Ms: top?.rest.p99Ms ?? null,
    grpcAcceptedPerSec: top?.grpc?.okPerSec ?? null,
    grpcVsRest: top?.grpcVsRest ?? null,
    conflictPerSec: w?.conflict?.rest.okPerSec ?? null,
    e2eRunsPerSec1: w1?.burst?.runsPerSec ?? null,
    e2eRunsPerSec2: w2?.burst?.runsPerSec ?? null,
    pickupP99Ms: one?.paced?.pickup.p99Ms ?? null,
    completionP99Ms: one?.paced?.completion.p99Ms ?? null,
    logsPagingPerSec: l?.paging?.entriesPerSec ?? null,
    logsPagingVsRawScan: l?.pagingVsRawScan ?? null,
    logsExportVsRawScan: l?.exportVsRawScan ?? null,
    rssIdleMb: w?.rss.idleMb ?? l?.rss?.idleMb ?? null,
    rssLoadMb: loads.length ? Math.max(...loads) : null,
    quick: r.quick,
  };
}

function status(v: number | null, target: number, atLeast: boolean): string {
  if (v == null) return "not measured";
  return (atLeast ? v >= target : v <= target) ? "met" : "**missed**";
}

export function renderMarkdown(r: BenchResults): string {
  const h = headline(r);
  const out: string[] = [];
  out.push(`# runhook benchmark — ${r.date}${r.quick ? " (--quick)" : ""}`);
  out.push("");
  out.push(`${r.machine.cpus} × ${r.machine.cpuModel}, ${r.machine.memGb} GB, node ${r.machine.node}; ${r.database}; commit ${r.commit}${r.dirty ? " + uncommitted changes" : ""}; ${r.durationS ?? "?"} s.`);
  out.push("Absolute figures depend on the machine; compare the ratios, which are measured in the same run on the same database.");

  out.push("", "## 1 + 4. Webhook accept, distinct records (server without executors)", "");
  if (r.webhook && "error" in r.webhook) out.push(`failed: ${r.webhook.error}`);
  else if (!r.webhook) out.push("not run");
  else {
    out.push("| conc. | REST 202/s | p50 ms | p99 ms | p999 ms | raw insertOne/s | raw p99 ms | REST / raw | gRPC 202/s | gRPC p99 ms | gRPC / REST |");
    out.push("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const l of r.webhook.levels) {
      out.push(`| ${l.concurrency} | ${l.rest.okPerSec} | ${f(l.rest.p50Ms)} | ${f(l.rest.p99Ms)} | ${f(l.rest.p999Ms)} | ${l.raw.okPerSec} | ${f(l.raw.p99Ms)} | ${pct(l.restVsRaw)} | ${f(l.grpc?.okPerSec)} | ${f(l.grpc?.p99Ms)} | ${pct(l.grpcVsRest)} |`);
    }
    const bad = r.webhook.levels.flatMap((l) => [["REST", l.rest], ["gRPC", l.grpc]] as const).filter(([, s]) => s && Object.keys(s.other).length);
    for (const [k, s] of bad) out.push(`\n${k} c=${s!.concurrency}: unexpected answers ${JSON.stringify(s!.other)}`);
    if (r.webhook.grpcError) out.push(`\ngRPC not measured: ${r.webhook.grpcError}`);
    const c = r.webhook.conflict;
    if (c) {
      out.push("", `409 path, one record with an ongoing run, concurrency ${c.concurrency}:`, "");
      out.push("| | answers/s | p50 ms | p99 ms | p999 ms |", "|---|---:|---:|---:|---:|");
      out.push(`| REST 409 | ${c.rest.okPerSec} | ${f(c.rest.p50Ms)} | ${f(c.rest.p99Ms)} | ${f(c.rest.p999Ms)} |`);
      out.push(`| raw: duplicate insertOne + findOne | ${c.raw.okPerSec} | ${f(c.raw.p50Ms)} | ${f(c.raw.p99Ms)} | ${f(c.raw.p999Ms)} |`);
      out.push(`| ratio | ${pct(c.restVsRaw)} | | | |`);
    }
    const b = r.webhook.breakdown;
    if (b && !("error" in b)) {
      out.push("", `Accept path stage by stage (the same operations with the raw driver, one at a time, ${b.iterations} times, after the load; ${b.rateLimitSlotsInWindow} rate-limit slots in the current window, ${b.rateLimitDocs} documents in rate_limits):`, "");
      out.push("| stage | p50 ms | p99 ms |", "|---|---:|---:|");
      for (const st of b.stages) out.push(`| ${st.stage} | ${f(st.p50Ms)} | ${f(st.p99Ms)} |`);
      out.push(`| sum of p50 | ${b.sumP50Ms} | |`);
      out.push("", "Query plans: `" + JSON.stringify(b.explain) + "`");
    } else if (b) out.push("", `breakdown failed: ${b.error}`);
  }

  out.push("", "## 2. End to end: trigger → SUCCEEDED (load_record + update_record)", "");
  if (r.e2e && "error" in r.e2e) out.push(`failed: ${r.e2e.error}`);
  else if (!r.e2e) out.push("not run");
  else {
    out.push(`Raw driver lifecycle (insert, claim, read record, update record, finish) at concurrency 8: ${f(r.e2e.rawLifecycle?.okPerSec)} runs/s.`, "");
    out.push("| executors | runs/s (burst) | vs raw | pick-up p50 / p99 ms (paced) | completion p50 / p99 ms (paced) | pick-up p99 ms (burst) | completion p99 ms (burst) | succeeded |");
    out.push("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const c of r.e2e.configs) {
      if (!c.available) {
        out.push(`| ${c.name} | ${c.reason ?? "not available"} | | | | | | |`);
        continue;
      }
      const p = c.paced;
      const b = c.burst;
      out.push(`| ${c.name} | ${f(b?.runsPerSec)} | ${pct(b?.vsRawLifecycle)} | ${f(p?.pickup.p50Ms)} / ${f(p?.pickup.p99Ms)} | ${f(p?.completion.p50Ms)} / ${f(p?.completion.p99Ms)} | ${f(b?.pickup.p99Ms)} | ${f(b?.completion.p99Ms)} | ${(p?.succeeded ?? 0) + (b?.succeeded ?? 0)}/${(p?.runs ?? 0) + (b?.runs ?? 0)}${b?.failed ? `, ${b.failed} failed` : ""}${b?.unfinished ? `, ${b.unfinished} unfinished` : ""} |`);
    }
  }

  out.push("", "## 3. Activity logs over REST", "");
  if (r.logs && "error" in r.logs) out.push(`failed: ${r.logs.error}`);
  else if (!r.logs) out.push("not run");
  else {
    const l = r.logs;
    out.push(`${l.entries} entries (inserted in ${l.insertMs} ms).`, "");
    out.push("| read | entries | entries/s | vs raw scan |", "|---|---:|---:|---:|");
    out.push(`| raw driver cursor scan | ${l.rawScan.entries} | ${l.rawScan.entriesPerSec} | 100% |`);
    out.push(`| raw driver, paged by 1000 | ${l.rawPaged.entries} | ${l.rawPaged.entriesPerSec}${l.rawPaged.partial ? " (time limit)" : ""} | ${pct(l.rawPaged.entriesPerSec / l.rawScan.entriesPerSec)} |`);
    if (!l.available) out.push(`| REST paging | ${l.reason ?? "not available"} | | |`);
    else {
      out.push(`| REST paging, limit=1000 (${l.paging!.pages} pages, page p50 ${l.paging!.pageP50Ms} ms, max ${l.paging!.pageMaxMs} ms) | ${l.paging!.entries} | ${l.paging!.entriesPerSec}${l.paging!.partial ? " (time limit)" : ""} | ${pct(l.pagingVsRawScan)} |`);
      out.push(l.export ? `| REST NDJSON export | ${l.export.entries} | ${l.export.entriesPerSec}${l.export.partial ? " (time limit)" : ""} | ${pct(l.exportVsRawScan)} |` : "| REST NDJSON export | not available | | |");
    }
  }

  out.push("", "## 5. Server memory (VmRSS, MB)", "");
  out.push("| server of | idle | end of scenario | peak during |", "|---|---:|---:|---:|");
  const w = ok(r.webhook);
  if (w) out.push(`| webhook | ${f(w.rss.idleMb)} | ${f(w.rss.endMb)} | ${f(w.rss.peakMb)} |`);
  for (const c of ok(r.e2e)?.configs ?? []) if (c.rss) out.push(`| e2e: ${c.name} | ${f(c.rss.idleMb)} | ${f(c.rss.endMb)} | ${f(c.rss.peakMb)} |`);
  const l = ok(r.logs);
  if (l?.rss) out.push(`| logs | ${f(l.rss.idleMb)} | ${f(l.rss.endMb)} | ${f(l.rss.peakMb)} |`);

  out.push("", "## Targets", "");
  out.push("| target | figure | status |", "|---|---:|---|");
  out.push(`| webhook accept ≥ 40% of raw insert at concurrency 64 | ${pct(h.webhookVsRawInsert)} | ${status(h.webhookVsRawInsert, TARGETS.webhookVsRawInsert, true)} |`);
  out.push(`| webhook p99 ≤ 50 ms at concurrency 64 | ${f(h.webhookP99Ms, " ms")} | ${status(h.webhookP99Ms, TARGETS.webhookP99Ms, false)} |`);
  out.push(`| pick-up p99 ≤ 50 ms on one instance | ${f(h.pickupP99Ms, " ms")} | ${status(h.pickupP99Ms, TARGETS.pickupP99Ms, false)} |`);
  out.push(`| log paging ≥ 50% of raw scan | ${pct(h.logsPagingVsRawScan)} | ${status(h.logsPagingVsRawScan, TARGETS.logsPagingVsRawScan, true)} |`);
  out.push(`| RSS ≤ 150 MB idle | ${f(h.rssIdleMb, " MB")} | ${status(h.rssIdleMb, TARGETS.rssIdleMb, false)} |`);
  out.push(`| RSS ≤ 300 MB under load | ${f(h.rssLoadMb, " MB")} | ${status(h.rssLoadMb, TARGETS.rssLoadMb, false)} |`);
  return out.join("\n") + "\n";
}
