// The results file's shape, the markdown report and the one-line JSON headline.
import type { E2eResult } from "./scenarios/e2e.js";
import type { LogsResult } from "./scenarios/logs.js";
import type { PickupResult } from "./scenarios/pickup.js";
import type { BatchResult } from "./scenarios/batch.js";
import { formatTrace, type RoundTripsResult } from "./scenarios/roundtrips.js";
import type { Phase, WebhookResult } from "./scenarios/webhook.js";
import type { SloResult } from "./lib/slo.js";
import type { BackendsResult } from "./scenarios/backends.js";
import type { ProcessesResult } from "./scenarios/processes.js";

type Or<T> = T | { error: string } | null;

export interface BenchResults {
  date: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; memGb: number; node: string; platform: string; loadAvgStart: number[]; loadAvgEnd?: number[] };
  database: string;
  commit: string;
  dirty: boolean;
  durationS?: number;
  webhook: Or<WebhookResult>;
  backends?: Or<BackendsResult>;
  processes?: Or<ProcessesResult>;
  roundTrips: Or<RoundTripsResult>;
  pickup: Or<PickupResult>;
  batch?: Or<BatchResult>;
  e2e: Or<E2eResult>;
  logs: Or<LogsResult>;
  /** The embedded Java database server over the whole run (null with MONGODB_URI). */
  javaRss: { idleMb: number | null; peakMb: number | null; endMb: number | null } | null;
  profiles?: string[];
}

export const TARGETS = {
  webhookVsRawInsert: 0.4,
  webhookP99Ms: 50,
  /** The p99 limit of the SLO search, and the SLO rate the webhook must reach. */
  sloP99LimitMs: 50,
  sloWebhookPerSec: 500,
  commandsPerAcceptC64: 4,
  serverCpuMsPerAccept: 1.5,
  grpcVsRest: 1,
  pickupP99Ms: 50,
  pickupBacklogVsIdle: 2,
  batchAcceptsVsIdle: 0.8,
  batchPickupVsIdle: 2,
  logsPagingVsRawScan: 0.5,
  tailMs: 60_000,
  rssIdleMb: 150,
  rssLoadMb: 300,
};

const ok = <T extends object>(v: Or<T>): T | null => (v && !("error" in v) ? v : null);
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
  /** Webhook accepts at c=64 with RUNHOOK_PROCESSES=1 and with one process per core, and their ratio. */
  processes1PerSec: number | null;
  processesNPerSec: number | null;
  processesSpeedup: number | null;
  /** Commands per accepted call, calls one at a time. */
  roundTripsPerAccept: number | null;
  /** Commands per accepted call with 64 callers at once. */
  commandsPerAcceptC64: number | null;
  /** CPU ms (user + system, /proc) per accepted REST call at concurrency 64: runhook server, Java database. */
  serverCpuMsPerAccept: number | null;
  javaCpuMsPerAccept: number | null;
  /** The SLO rates: highest open-loop rate with p99 ≤ 50 ms and every answer a 202 (REST webhook) / OK (native gRPC). */
  sloWebhookPerSec: number | null;
  sloGrpcPerSec: number | null;
  pickupSameP99Ms: number | null;
  pickupOtherP99Ms: number | null;
  /** Same-instance pick-up p99 while another organization has a backlog in 5 projects, and its ratio to the idle one (fair share). */
  pickupBacklogP99Ms: number | null;
  pickupBacklogVsIdle: number | null;
  /** Webhook accepts and pick-up p99 while a retry batch runs in the same project, as ratios to the idle figures. */
  batchAcceptsVsIdle: number | null;
  batchPickupVsIdle: number | null;
  batchRunsPerSec: number | null;
  e2eRunsPerSec1: number | null;
  e2eRunsPerSec2: number | null;
  e2ePickupP99Ms: number | null;
  completionP99Ms: number | null;
  logsPagingPerSec: number | null;
  logsPagingVsRawScan: number | null;
  logsPagingAgainVsRawScan: number | null;
  /** Newest first by createdAt.lt (no target: shown beside the two ascending passes). */
  logsPagingNewestFirstVsRawScan: number | null;
  logsExportVsRawScan: number | null;
  tailMs: number | null;
  rssIdleMb: number | null;
  rssLoadMb: number | null;
  javaRssIdleMb: number | null;
  javaRssPeakMb: number | null;
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
  const p = ok(r.pickup);
  const rt = ok(r.roundTrips);
  const procs = ok(r.processes ?? null);
  const rss = [w?.rss, ...(e?.configs.flatMap((c) => [c.rss, c.workerRss]) ?? []), l?.rss];
  const loads = rss.flatMap((x) => [x?.peakMb, x && "endMb" in x ? x.endMb : null]).filter((v): v is number => typeof v === "number");
  const tail = l?.tail && !l.tail.partial && !l.tail.error && l.tail.received === l.tail.entries ? l.tail.ms : null;
  return {
    webhookAcceptedPerSec: top?.rest.okPerSec ?? null,
    rawInsertPerSec: top?.raw.okPerSec ?? null,
    webhookVsRawInsert: top?.restVsRaw ?? null,
    webhookP99Ms: top?.rest.p99Ms ?? null,
    grpcAcceptedPerSec: top?.grpc?.okPerSec ?? null,
    grpcVsRest: top?.grpcVsRest ?? null,
    conflictPerSec: w?.conflict?.rest.okPerSec ?? null,
    processes1PerSec: procs?.oneProcessPerSec ?? null,
    processesNPerSec: procs?.manyProcessesPerSec ?? null,
    processesSpeedup: procs?.speedup ?? null,
    roundTripsPerAccept: rt?.perCall.mean ?? null,
    commandsPerAcceptC64: rt?.concurrent?.concurrency === 64 ? rt.concurrent.perAccept : null,
    serverCpuMsPerAccept: top?.concurrency === 64 ? (top.rest.cpuMsPerOk.server ?? null) : null,
    javaCpuMsPerAccept: top?.concurrency === 64 ? (top.rest.cpuMsPerOk.java ?? null) : null,
    sloWebhookPerSec: w?.slo?.rest?.perSec ?? null,
    sloGrpcPerSec: w?.slo?.grpc?.perSec ?? null,
    pickupSameP99Ms: p?.sameInstance.p99Ms ?? null,
    pickupOtherP99Ms: p?.otherInstance.p99Ms ?? null,
    pickupBacklogP99Ms: p?.backlog?.sameInstance.p99Ms ?? null,
    pickupBacklogVsIdle: p?.backlog?.p99VsIdle ?? null,
    batchAcceptsVsIdle: ok(r.batch ?? null)?.acceptsVsIdle ?? null,
    batchPickupVsIdle: ok(r.batch ?? null)?.pickupP99VsIdle ?? null,
    batchRunsPerSec: ok(r.batch ?? null)?.batch.runsPerSec ?? null,
    e2eRunsPerSec1: w1?.burst?.runsPerSec ?? null,
    e2eRunsPerSec2: w2?.burst?.runsPerSec ?? null,
    e2ePickupP99Ms: one?.paced?.pickup.p99Ms ?? null,
    completionP99Ms: one?.paced?.completion.p99Ms ?? null,
    logsPagingPerSec: l?.paging?.entriesPerSec ?? null,
    logsPagingVsRawScan: l?.pagingVsRawScan ?? null,
    logsPagingAgainVsRawScan: l?.pagingAgainVsRawScan ?? null,
    logsPagingNewestFirstVsRawScan: l?.pagingNewestFirstVsRawScan ?? null,
    logsExportVsRawScan: l?.exportVsRawScan ?? null,
    tailMs: tail,
    rssIdleMb: w?.rss.idleMb ?? l?.rss?.idleMb ?? null,
    rssLoadMb: loads.length ? Math.max(...loads) : null,
    javaRssIdleMb: r.javaRss?.idleMb ?? null,
    javaRssPeakMb: r.javaRss?.peakMb ?? null,
    quick: r.quick,
  };
}

function status(v: number | null, target: number, atLeast: boolean): string {
  if (v == null) return "not measured";
  if (atLeast ? v >= target : v <= target) return "met";
  const by = atLeast ? `${Math.round((1 - v / target) * 100)}% short` : `${Math.round((v / target - 1) * 100)}% over`;
  return `**missed** (${by})`;
}

const cpu = (p: Phase | null | undefined) => (p ? `${f(p.cpuMsPerOk.loadGenerator)} / ${f(p.cpuMsPerOk.server)} / ${f(p.cpuMsPerOk.java)}` : "–");

export function renderMarkdown(r: BenchResults): string {
  const h = headline(r);
  const out: string[] = [];
  out.push(`# runhook benchmark — ${r.date}${r.quick ? " (--quick)" : ""}`);
  out.push("");
  const load = (a?: number[]) => (a ? a.map((x) => x.toFixed(2)).join(", ") : "?");
  out.push(
    `${r.machine.cpus} × ${r.machine.cpuModel}, ${r.machine.memGb} GB, node ${r.machine.node}; ${r.database}; commit ${r.commit}${r.dirty ? " + uncommitted changes" : ""}; ${r.durationS ?? "?"} s.`,
  );
  out.push(`Load average (1, 5, 15 min) at the start: ${load(r.machine.loadAvgStart)}; at the end: ${load(r.machine.loadAvgEnd)}.`);
  out.push("Absolute figures depend on the machine and its other load; compare the ratios, which are measured in the same run on the same database server.");

  out.push("", "## 1 + 4. Webhook accept, distinct records (server without executors)", "");
  const w = ok(r.webhook);
  if (r.webhook && "error" in r.webhook) out.push(`failed: ${r.webhook.error}`);
  else if (!w) out.push("not run");
  else {
    out.push(
      "| conc. | REST 202/s | p50 ms | p99 ms | p999 ms | raw insertOne/s | raw p99 ms | REST / raw | gRPC 202/s | gRPC p50 ms | gRPC p99 ms | gRPC / REST |",
    );
    out.push("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const l of w.levels) {
      out.push(
        `| ${l.concurrency} | ${l.rest.okPerSec} | ${f(l.rest.p50Ms)} | ${f(l.rest.p99Ms)} | ${f(l.rest.p999Ms)} | ${l.raw.okPerSec} | ${f(l.raw.p99Ms)} | ${pct(l.restVsRaw)} | ${f(l.grpc?.okPerSec)} | ${f(l.grpc?.p50Ms)} | ${f(l.grpc?.p99Ms)} | ${pct(l.grpcVsRest)} |`,
      );
    }
    const bad = w.levels
      .flatMap(
        (l) =>
          [
            ["REST", l.rest],
            ["gRPC", l.grpc],
          ] as const,
      )
      .filter(([, s]) => s && Object.keys(s.other).length);
    for (const [k, s] of bad) out.push(`\n${k} c=${s!.concurrency}: unexpected answers ${JSON.stringify(s!.other)}`);
    if (w.grpcError) out.push(`\ngRPC not measured: ${w.grpcError}`);

    out.push("", "CPU time per accepted call (ms; load generator / runhook server / Java database), from /proc during each measured period:", "");
    out.push("| conc. | REST | raw insertOne | gRPC |", "|---:|---:|---:|---:|");
    for (const l of w.levels) out.push(`| ${l.concurrency} | ${cpu(l.rest)} | ${cpu(l.raw)} | ${cpu(l.grpc)} |`);

    const g = w.grpcClients;
    if (g) {
      out.push(
        "",
        `gRPC clients compared at concurrency ${g.concurrency} (REST at this level: ${w.levels.find((l) => l.concurrency === g.concurrency)?.rest.okPerSec}/s):`,
        "",
      );
      out.push("| client | 202/s | p50 ms | p99 ms | vs REST | CPU ms/call: load gen. / server / Java |", "|---|---:|---:|---:|---:|---:|");
      for (const v of g.variants)
        out.push(`| ${v.name}: ${v.what} | ${v.stats.okPerSec} | ${f(v.stats.p50Ms)} | ${f(v.stats.p99Ms)} | ${pct(v.vsRest)} | ${cpu(v.stats)} |`);
    }

    const c = w.conflict;
    if (c) {
      out.push("", `409 path, one record with an ongoing run, concurrency ${c.concurrency}:`, "");
      out.push("| | answers/s | p50 ms | p99 ms | p999 ms | CPU ms/answer: load gen. / server / Java |", "|---|---:|---:|---:|---:|---:|");
      out.push(`| REST 409 | ${c.rest.okPerSec} | ${f(c.rest.p50Ms)} | ${f(c.rest.p99Ms)} | ${f(c.rest.p999Ms)} | ${cpu(c.rest)} |`);
      out.push(`| raw: duplicate insertOne + findOne | ${c.raw.okPerSec} | ${f(c.raw.p50Ms)} | ${f(c.raw.p99Ms)} | ${f(c.raw.p999Ms)} | ${cpu(c.raw)} |`);
      out.push(`| ratio | ${pct(c.restVsRaw)} | | | | |`);
    }
    renderSlo(out, w.slo);
  }

  renderBackends(out, r.backends);
  renderProcesses(out, r.processes);

  out.push("", "## Database round trips of one webhook call", "");
  const rt = ok(r.roundTrips);
  if (r.roundTrips && "error" in r.roundTrips) out.push(`failed: ${r.roundTrips.error}`);
  else if (!rt) out.push("not run");
  else {
    out.push(
      `Counted by the server's own driver (\`monitorCommands\`), calls one at a time: ${rt.perCall.mean} commands per accepted call (min ${rt.perCall.min}, max ${rt.perCall.max}, ${rt.calls} calls) in ${rt.stagesPerCall.min}–${rt.stagesPerCall.max} sequential stages; call p50 ${rt.callMs.p50Ms} ms, of which the database stages take ${pct(rt.dbShareP50)} (median).`,
      "",
      `One accepted call (${rt.accepted.roundTrips} commands, ${rt.accepted.callMs} ms; [start from the request's start, duration]):`,
      "",
    );
    for (const line of formatTrace(rt.accepted)) out.push(`- ${line}`);
    if (rt.conflict) {
      out.push("", `One 409 call (${rt.conflict.roundTrips} commands, ${rt.conflict.callMs} ms):`, "");
      for (const line of formatTrace(rt.conflict)) out.push(`- ${line}`);
    }
    const cc = rt.concurrent;
    if (cc)
      out.push(
        "",
        `At concurrency ${cc.concurrency} (closed loop, distinct records): ${cc.commands} commands for ${cc.accepted} accepted calls, ${f(cc.perAccept)} per accepted call${Object.keys(cc.other).length ? `; unexpected answers ${JSON.stringify(cc.other)}` : ""}.`,
      );
    if (rt.run) {
      out.push(
        "",
        `One run of the load_record + update_record workflow, by an executor woken by run.queued, from the claim until it is idle again: ${rt.run.perRun.mean} commands per run (min ${rt.run.perRun.min}, max ${rt.run.perRun.max}, ${rt.run.runs} runs). The last one (${rt.run.trace.callMs} ms until the run was seen finished + 50 ms):`,
        "",
      );
      for (const line of formatTrace(rt.run.trace)) out.push(`- ${line}`);
    }
  }

  out.push(...batchSection(r));
  out.push("", "## Pick-up latency (QUEUED insert → startedAt, one run at a time, idle executor)", "");
  const p = ok(r.pickup);
  if (r.pickup && "error" in r.pickup) out.push(`failed: ${r.pickup.error}`);
  else if (!p) out.push("not run");
  else {
    out.push(`A runhook worker in the benchmark process, executor concurrency ${p.concurrency}, poll every ${p.pollIntervalMs} ms.`, "");
    out.push("| case | runs | p50 ms | p90 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|---:|");
    out.push(
      `| same instance: insert + run.queued event | ${p.sameInstance.n} | ${f(p.sameInstance.p50Ms)} | ${f(p.sameInstance.p90Ms)} | ${f(p.sameInstance.p99Ms)} | ${f(p.sameInstance.maxMs)} |`,
    );
    out.push(
      `| other instance: insert only, found by the poll | ${p.otherInstance.n} | ${f(p.otherInstance.p50Ms)} | ${f(p.otherInstance.p90Ms)} | ${f(p.otherInstance.p99Ms)} | ${f(p.otherInstance.maxMs)} |`,
    );
    const bl = p.backlog;
    if (bl)
      out.push(
        `| same instance, another organization with ${bl.backlogRuns} queued runs in 5 projects (${bl.queuedAtStart} → ${bl.queuedAtEnd} queued while measuring) | ${bl.sameInstance.n} | ${f(bl.sameInstance.p50Ms)} | ${f(bl.sameInstance.p90Ms)} | ${f(bl.sameInstance.p99Ms)} | ${f(bl.sameInstance.maxMs)} |`,
      );
    const hs = p.withHistory;
    if (hs)
      out.push(
        `| same instance, ${hs.finishedRuns} finished runs in the collection | ${hs.sameInstance.n} | ${f(hs.sameInstance.p50Ms)} | ${f(hs.sameInstance.p90Ms)} | ${f(hs.sameInstance.p99Ms)} | ${f(hs.sameInstance.maxMs)} |`,
      );
  }

  out.push("", "## 2. End to end: trigger → SUCCEEDED (load_record + update_record)", "");
  const e = ok(r.e2e);
  if (r.e2e && "error" in r.e2e) out.push(`failed: ${r.e2e.error}`);
  else if (!e) out.push("not run");
  else {
    out.push(`Raw driver lifecycle (insert, claim, read record, update record, finish) at concurrency 8: ${f(e.rawLifecycle?.okPerSec)} runs/s.`, "");
    out.push(
      "| executors | runs/s (burst) | vs raw | pick-up p50 / p99 ms (paced) | completion p50 / p99 ms (paced) | pick-up p99 ms (burst) | completion p99 ms (burst) | succeeded |",
    );
    out.push("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const c of e.configs) {
      if (!c.available) {
        out.push(`| ${c.name} | ${c.reason ?? "not available"} | | | | | | |`);
        continue;
      }
      const pc = c.paced;
      const b = c.burst;
      out.push(
        `| ${c.name} | ${f(b?.runsPerSec)} | ${pct(b?.vsRawLifecycle)} | ${f(pc?.pickup.p50Ms)} / ${f(pc?.pickup.p99Ms)} | ${f(pc?.completion.p50Ms)} / ${f(pc?.completion.p99Ms)} | ${f(b?.pickup.p99Ms)} | ${f(b?.completion.p99Ms)} | ${(pc?.succeeded ?? 0) + (b?.succeeded ?? 0)}/${(pc?.runs ?? 0) + (b?.runs ?? 0)}${b?.failed ? `, ${b.failed} failed` : ""}${b?.unfinished ? `, ${b.unfinished} unfinished` : ""} |`,
      );
    }
  }

  out.push("", "## 3. Activity logs over REST", "");
  const l = ok(r.logs);
  if (r.logs && "error" in r.logs) out.push(`failed: ${r.logs.error}`);
  else if (!l) out.push("not run");
  else {
    out.push(`${l.entries} entries, appended through the store (32 in flight) at ${l.append.entriesPerSec}/s.`, "");
    out.push("| read | entries | entries/s | vs raw scan |", "|---|---:|---:|---:|");
    out.push(`| raw driver cursor scan | ${l.rawScan.entries} | ${l.rawScan.entriesPerSec} | 100% |`);
    out.push(
      `| raw driver, paged by \`_id\` ranges of ${l.pageSize} | ${l.rawPaged.entries} | ${l.rawPaged.entriesPerSec}${l.rawPaged.partial ? " (time limit)" : ""} | ${pct(l.rawPaged.entriesPerSec / l.rawScan.entriesPerSec)} |`,
    );
    if (!l.available) out.push(`| REST paging | ${l.reason ?? "not available"} | | |`);
    else {
      const pg = (name: string, x: NonNullable<LogsResult["paging"]>, rr: number | null) =>
        `| ${name} (${x.pages} pages, page p50 ${x.pageP50Ms} ms, max ${x.pageMaxMs} ms) | ${x.entries} | ${x.entriesPerSec}${x.partial ? " (time limit)" : ""} | ${pct(rr)} |`;
      const paged = `REST paging, limit=${l.pageSize}`;
      out.push(pg(`${paged}, order=asc + cursor, first pass: positions above the watermark`, l.paging!, l.pagingVsRawScan));
      if (l.pagingAgain) out.push(pg(`${paged}, order=asc + cursor, again: below the watermark`, l.pagingAgain, l.pagingAgainVsRawScan));
      if (l.pagingNewestFirst) out.push(pg(`${paged}, newest first by createdAt.lt`, l.pagingNewestFirst, l.pagingNewestFirstVsRawScan));
      out.push(
        l.export
          ? `| REST NDJSON export | ${l.export.entries} | ${l.export.entriesPerSec}${l.export.partial ? " (time limit)" : ""} | ${pct(l.exportVsRawScan)} |`
          : "| REST NDJSON export | not available | | |",
      );
    }
    const t = l.tail;
    if (t) {
      out.push(
        "",
        `Tail: ${t.writers} writers in ${t.processes} processes appended ${t.entries} entries through the store while one consumer polled \`nextCursor\` (order=asc, limit ${l.pageSize}, 100 ms after a caught-up page): ` +
          `${t.received} received in ${t.ms} ms (the writers took ${f(t.writersMs)} ms), ${t.polls} polls, ${t.tombstones} tombstones, ${t.duplicates} duplicates, ${t.outOfOrder} out of order${t.partial ? "; stopped at the time limit" : ""}${t.error ? `; error: ${t.error}` : ""}.`,
      );
    }
  }

  out.push("", "## 5. Memory (VmRSS, MB)", "");
  out.push("| process | idle | end of scenario | peak during |", "|---|---:|---:|---:|");
  if (w) out.push(`| runhook server, webhook scenario | ${f(w.rss.idleMb)} | ${f(w.rss.endMb)} | ${f(w.rss.peakMb)} |`);
  for (const c of e?.configs ?? []) {
    if (c.rss) out.push(`| runhook server, e2e: ${c.name} | ${f(c.rss.idleMb)} | ${f(c.rss.endMb)} | ${f(c.rss.peakMb)} |`);
    if (c.workerRss) out.push(`| runhook worker(s), e2e: ${c.name} (highest) | ${f(c.workerRss.idleMb)} | | ${f(c.workerRss.peakMb)} |`);
  }
  if (l?.rss) out.push(`| runhook server, logs scenario | ${f(l.rss.idleMb)} | ${f(l.rss.endMb)} | ${f(l.rss.peakMb)} |`);
  if (w?.javaRss) out.push(`| embedded Java database, webhook scenario | ${f(w.javaRss.idleMb)} | ${f(w.javaRss.endMb)} | ${f(w.javaRss.peakMb)} |`);
  if (r.javaRss) out.push(`| embedded Java database, whole run | ${f(r.javaRss.idleMb)} (at start) | ${f(r.javaRss.endMb)} | ${f(r.javaRss.peakMb)} |`);

  out.push("", "## Targets", "");
  out.push("| target | figure | status |", "|---|---:|---|");
  out.push(
    `| webhook accept ≥ 40% of raw insertOne at concurrency 64 | ${pct(h.webhookVsRawInsert)} | ${status(h.webhookVsRawInsert, TARGETS.webhookVsRawInsert, true)} |`,
  );
  out.push(`| webhook p99 ≤ 50 ms at concurrency 64 | ${f(h.webhookP99Ms, " ms")} | ${status(h.webhookP99Ms, TARGETS.webhookP99Ms, false)} |`);
  out.push(
    `| webhook SLO rate (open loop, p99 ≤ ${TARGETS.sloP99LimitMs} ms) ≥ ${TARGETS.sloWebhookPerSec}/s | ${f(h.sloWebhookPerSec, "/s")} | ${status(h.sloWebhookPerSec, TARGETS.sloWebhookPerSec, true)} |`,
  );
  out.push(
    `| database commands per accepted call at concurrency 64 ≤ ${TARGETS.commandsPerAcceptC64} | ${f(h.commandsPerAcceptC64)} | ${status(h.commandsPerAcceptC64, TARGETS.commandsPerAcceptC64, false)} |`,
  );
  out.push(
    `| runhook server CPU per accepted call at concurrency 64 ≤ ${TARGETS.serverCpuMsPerAccept} ms | ${f(h.serverCpuMsPerAccept, " ms")} | ${status(h.serverCpuMsPerAccept, TARGETS.serverCpuMsPerAccept, false)} |`,
  );
  out.push(`| native gRPC accepts ≥ REST at concurrency 64 | ${pct(h.grpcVsRest)} | ${status(h.grpcVsRest, TARGETS.grpcVsRest, true)} |`);
  out.push(`| pick-up p99 ≤ 50 ms on the same instance | ${f(h.pickupSameP99Ms, " ms")} | ${status(h.pickupSameP99Ms, TARGETS.pickupP99Ms, false)} |`);
  out.push(
    `| pick-up p99 with another organization's backlog (5 projects) ≤ 2× idle | ${f(h.pickupBacklogVsIdle, "×")} | ${status(h.pickupBacklogVsIdle, TARGETS.pickupBacklogVsIdle, false)} |`,
  );
  out.push(
    `| webhook accepts while a retry batch runs ≥ 0.8× idle | ${f(h.batchAcceptsVsIdle, "×")} | ${status(h.batchAcceptsVsIdle, TARGETS.batchAcceptsVsIdle, true)} |`,
  );
  out.push(
    `| webhook pick-up p99 while a retry batch runs ≤ 2× idle | ${f(h.batchPickupVsIdle, "×")} | ${status(h.batchPickupVsIdle, TARGETS.batchPickupVsIdle, false)} |`,
  );
  out.push(
    `| log paging ≥ 50% of raw scan (first pass) | ${pct(h.logsPagingVsRawScan)} | ${status(h.logsPagingVsRawScan, TARGETS.logsPagingVsRawScan, true)} |`,
  );
  out.push(
    `| log paging ≥ 50% of raw scan (again, below the watermark) | ${pct(h.logsPagingAgainVsRawScan)} | ${status(h.logsPagingAgainVsRawScan, TARGETS.logsPagingVsRawScan, true)} |`,
  );
  out.push(`| tail of 20,000 entries from 4 writers < 60 s | ${f(h.tailMs, " ms")} | ${status(h.tailMs, TARGETS.tailMs, false)} |`);
  out.push(`| runhook RSS ≤ 150 MB idle | ${f(h.rssIdleMb, " MB")} | ${status(h.rssIdleMb, TARGETS.rssIdleMb, false)} |`);
  out.push(`| runhook RSS ≤ 300 MB under load | ${f(h.rssLoadMb, " MB")} | ${status(h.rssLoadMb, TARGETS.rssLoadMb, false)} |`);
  return `${out.join("\n")}\n`;
}

/** Webhook accepts with one process and with one per core (RUNHOOK_PROCESSES), interleaved. */
function renderProcesses(out: string[], r: Or<ProcessesResult> | undefined): void {
  out.push("", "## Every core: RUNHOOK_PROCESSES=1 against one process per core (REST webhook, closed loop)", "");
  const p = ok(r ?? null);
  if (r && "error" in r) return void out.push(`failed: ${r.error}`);
  if (!p) return void out.push("not run");
  out.push(`| processes | accepted/s at c=${p.concurrency} | p99 ms |`, "|---:|---:|---:|");
  for (const x of p.rounds) out.push(`| ${x.processes} | ${x.acceptedPerSec} | ${f(x.p99Ms)} |`);
  out.push("", `Median: ${p.oneProcessPerSec}/s with 1 process, ${p.manyProcessesPerSec}/s with ${p.processes} (${pct(p.speedup)}).`);
}

/** The webhook accept on each embedded backend, side by side. */
function renderBackends(out: string[], r: Or<BackendsResult> | undefined): void {
  out.push("", "## Webhook accept on each embedded backend (REST, distinct records, interleaved)", "");
  const b = ok(r ?? null);
  if (r && "error" in r) return void out.push(`failed: ${r.error}`);
  if (!b) return void out.push("not run");
  for (const x of b.backends) out.push(`- **${x.name}**: ${x.what}`);
  out.push("", `| conc. | ${b.backends.map((x) => `${x.name} 202/s | p99 ms`).join(" | ")} |`, `|---:|${b.backends.map(() => "---:|---:").join("|")}|`);
  for (const l of b.levels)
    out.push(`| ${l.concurrency} | ${b.backends.map((x) => `${f(l.byBackend[x.name]?.okPerSec)} | ${f(l.byBackend[x.name]?.p99Ms)}`).join(" | ")} |`);
  out.push("", `file ÷ file-ack-before-commit at the top concurrency: ${pct(b.fileVsAckBeforeCommit)} (target ≥ 80 %).`);
}

/** The SLO searches: the rate found and every rate tried with its p99. */
function renderSlo(out: string[], slo: WebhookResult["slo"]): void {
  if (!slo) return;
  const both: [string, SloResult | null][] = [
    ["REST webhook", slo.rest],
    ["native gRPC TriggerRun", slo.grpc],
  ];
  const first = slo.rest ?? slo.grpc;
  out.push(
    "",
    `SLO rate: open loop (fixed arrival rate, latency from each request's due time), the highest rate whose p99 ≤ ${first?.p99LimitMs ?? TARGETS.sloP99LimitMs} ms with every answer a 202 / OK; steps of ${first?.stepMs ?? "?"} ms, doubling from 50/s, then bisection; a missed rate is tried once more. "Stopped early": more than 1% of the step's requests were already late (p99 over the limit) or one answer was not the expected one; its p99 is that of the requests sent.`,
    "",
  );
  out.push("| protocol | SLO rate | rates tried: rate/s → p99 ms (✓ met, ✗ missed) |", "|---|---:|---|");
  for (const [name, r] of both) {
    if (!r) {
      out.push(`| ${name} | not measured | |`);
      continue;
    }
    const tried = r.steps.map(
      (s) =>
        `${s.ratePerSec} → ${f(s.p99Ms)} ${s.met ? "✓" : "✗"}${Object.keys(s.other).length ? ` ${JSON.stringify(s.other)}` : ""}${s.stoppedEarly ? " (stopped early)" : ""}`,
    );
    out.push(`| ${name} | ${r.perSec}/s | ${tried.join("; ")} |`);
  }
}

/** The batch beside live webhooks: the two phases, their ratios, and the batch's own pace. */
function batchSection(r: BenchResults): string[] {
  const out = ["", "## A retry batch beside live webhooks (same project)", ""];
  const b = ok(r.batch ?? null);
  if (r.batch && "error" in r.batch) return [...out, `failed: ${r.batch.error}`];
  if (!b) return [...out, "not run"];
  out.push(
    `One \`runhook start\`, idle and then while a batch retries ${b.batchRuns} failed runs of the same workflow: accepts by a closed loop of ${b.concurrency} webhook callers (each call a fresh record), pick-up at a steady rate the executors keep up with.`,
    "",
    "| phase | accepts/s | call p99 ms | pick-up p50 ms | pick-up p99 ms | runs picked up |",
    "|---|---:|---:|---:|---:|---:|",
  );
  for (const [name, ph] of [
    ["idle", b.idle],
    ["while the batch runs", b.during],
  ] as const)
    out.push(`| ${name} | ${f(ph.accepts.okPerSec)} | ${f(ph.accepts.p99Ms)} | ${f(ph.pickup.p50Ms)} | ${f(ph.pickup.p99Ms)} | ${ph.pickup.n} |`);
  out.push(
    "",
    `Accepts ${f(b.acceptsVsIdle, "×")} idle, pick-up p99 ${f(b.pickupP99VsIdle, "×")} idle. The batch (${b.batch.state}): ${b.batch.done} retried, ${b.batch.skipped} skipped, ${b.batch.failed} failed in ${b.batch.seconds} s (${f(b.batch.runsPerSec)} runs/s).`,
  );
  return out;
}
