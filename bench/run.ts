// `npm run bench [-- --quick] [-- --profile[=webhook|e2e|logs|all]] [-- --only=webhook,processes,roundtrips,pickup,batch,e2e,logs]`
// `npm run bench -- --soak 10m [--soak-rate=N] [--soak-workers=N] [--soak-window=60s]`: soak mode only (scenarios/soak/).
// `npm run bench -- --vs temporal [--quick]`: runhook against Temporal's dev server only (scenarios/temporal.ts).
// `npm run bench -- --grow [--quick] [--grow-sizes=0,100000,1000000] [--sweep-runs=100000]`: the same calls as the file-backed database grows to 1,000,000 runs (scenarios/growth.ts).
// `npm run bench -- --smoke`: every scenario of the quick bench and --grow, tiny, writing no results; exits 1 when a scenario
// fails or a headline figure is null (CI runs it).
// Runs runhook as users do (separate `node bin/runhook.js start|worker` processes) on one
// database server (the embedded mongo-java-server, memory backend, in a temp dir, or
// MONGODB_URI), loads it over loopback, measures the raw-driver baseline of each scenario on
// the same server in the same run, and writes bench/results/<date>.json and .md. The last line
// printed is one JSON object with the headline figures (null for a scenario that could not run);
// the exit status is 1 when a scenario failed (a limit met among others: lib/limits.ts).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, homedir, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { newSigningKeys, type BenchContext } from "./lib/context.js";
import { openBenchDatabase, type BenchDatabase } from "./lib/database.js";
import { limitsNotCovered } from "./lib/limits.js";
import { round } from "./lib/load.js";
import { cpuMs, liveProcs, ROOT, rssMb, rssSampler } from "./lib/procs.js";
import { formatSummary, profileFiles, summarize } from "./profile-summary.js";
import { e2eScenario } from "./scenarios/e2e.js";
import { logsScenario } from "./scenarios/logs.js";
import { pickupScenario } from "./scenarios/pickup.js";
import { batchScenario } from "./scenarios/batch.js";
import { processesScenario } from "./scenarios/processes.js";
import { roundTripsScenario } from "./scenarios/roundtrips.js";
import { webhookScenario } from "./scenarios/webhook.js";
import { backendsScenario } from "./scenarios/backends.js";
import { soakScenario } from "./scenarios/soak/index.js";
import { renderTemporalMarkdown, temporalScenario } from "./scenarios/temporal.js";
import { GROWTH_EFFORT, growthScenario, renderGrowthMarkdown, type GrowthResult } from "./scenarios/growth.js";
import { limitsScenario } from "./scenarios/limits.js";
import { parseDuration } from "./scenarios/soak/model.js";
import { renderSoakMarkdown } from "./scenarios/soak/report.js";
import { headline, renderMarkdown, TARGETS, type BenchResults } from "./report.js";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const quick = args.includes("--quick") || smoke;
/** How much each scenario does: a full run, --quick, or --smoke (a few seconds each: every step runs, nothing is a figure of record). */
const effort = smoke ? "smoke" : quick ? "quick" : "full";
/** This run's value of a setting, by effort. */
const by = <T>(full: T, quickValue: T, smokeValue: T): T => (effort === "full" ? full : effort === "quick" ? quickValue : smokeValue);
const profileArg = args.find((a) => a === "--profile" || a.startsWith("--profile="));
const profile = profileArg ? (profileArg.split("=")[1] ?? "all") : undefined;
const onlyArg = args.find((a) => a.startsWith("--only="));
const only = onlyArg ? new Set(onlyArg.slice("--only=".length).split(",")) : undefined;
const wanted = (s: string) => !only || only.has(s);
/** `--soak 10m` or `--soak=10m`, and its options; exits with a usage error when malformed. */
function soakArgs() {
  const i = args.findIndex((a) => a === "--soak" || a.startsWith("--soak="));
  if (i < 0) return undefined;
  const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const raw = args[i]!.includes("=") ? args[i]!.slice("--soak=".length) : args[i + 1];
  const durationMs = parseDuration(raw);
  const windowMs = parseDuration(opt("soak-window") ?? "60s");
  const rate = opt("soak-rate");
  const workers = Number(opt("soak-workers") ?? 1);
  const bad = (m: string): never => {
    process.stderr.write(
      `${m}\nusage: npm run bench -- --soak <duration: 90s, 3m, 10m, 1h> [--soak-rate=<req/s>] [--soak-workers=<0..4>] [--soak-window=<duration>]\n`,
    );
    process.exit(2);
  };
  if (!durationMs || durationMs < 10_000) bad(`--soak needs a duration of at least 10s with a unit (ms, s, m, h), got ${JSON.stringify(raw ?? "")}`);
  if (!windowMs || windowMs < 5000) bad("--soak-window must be a duration of at least 5s");
  if (rate !== undefined && !(Number(rate) > 0)) bad(`--soak-rate must be a positive number of requests a second, got ${JSON.stringify(rate)}`);
  if (!Number.isInteger(workers) || workers < 0 || workers > 4) bad("--soak-workers must be 0 to 4");
  return {
    durationMs: durationMs!,
    windowMs: windowMs!,
    workers,
    ratePerSec: rate === undefined ? undefined : Number(rate),
    share: 0.5,
    capacityMs: 10_000,
    capacityConcurrency: 16,
    records: 2000,
  };
}
const soak = soakArgs();
/** `--vs temporal` or `--vs=temporal`: the only peer there is to run against. */
function vsArg(): "temporal" | undefined {
  const i = args.findIndex((a) => a === "--vs" || a.startsWith("--vs="));
  if (i < 0) return undefined;
  const peer = args[i]!.includes("=") ? args[i]!.slice("--vs=".length) : args[i + 1];
  if (peer === "temporal") return peer;
  process.stderr.write(
    `--vs needs a peer to run against, and the only one is temporal; got ${JSON.stringify(peer ?? "")}\nusage: npm run bench -- --vs temporal [--quick]\n`,
  );
  process.exit(2);
}
const vs = vsArg();
const grow = args.includes("--grow");

const started = new Date();
const stamp =
  started.toISOString().slice(0, 19).replace(/:/g, "-") + (soak ? "-soak" : vs ? `-vs-${vs}` : grow ? "-grow" : "") + (quick && !soak ? "-quick" : "");
const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-"));
const resultsDir = join(ROOT, "bench/results");
const profileDir = profile ? join(ROOT, "bench/profiles", stamp) : undefined;
let database: BenchDatabase | undefined;
const ctx: BenchContext = {
  quick,
  uri: "",
  runTag: `bench_${randomBytes(3).toString("hex")}`,
  profileDir,
  profile,
  signingKeys: newSigningKeys(),
  log: (m) => process.stdout.write(`${m}\n`),
  cleanups: [],
};

/** Waits for `p`, at most `ms`; a cleanup step that hangs must not keep the benchmark alive. */
const bounded = (p: Promise<unknown>, ms: number) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    p.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      clearTimeout(t);
      resolve();
    });
  });

let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await Promise.allSettled(liveProcs().map((p) => p.stop()));
    for (const c of ctx.cleanups.splice(0).reverse()) await bounded(c(), 10_000);
    await bounded(database?.stop() ?? Promise.resolve(), 10_000);
    rmSync(dataDir, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(sig, () => {
    process.stderr.write(`\n${sig}: stopping every process the benchmark started…\n`);
    const hard = setTimeout(() => process.exit(130), 20_000);
    hard.unref();
    void cleanup().finally(() => process.exit(130));
  });
}

function git(...a: string[]): string {
  try {
    return execFileSync("git", a, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "";
  }
}

/** The code measured: HEAD, and whether the work tree differs from it (a commit made while the bench runs is not what it measured). */
function measuredCode(): { commit: string; dirty: boolean } {
  return { commit: git("rev-parse", "--short", "HEAD"), dirty: git("status", "--porcelain").length > 0 };
}

/** The scenarios that failed, with why: the run exits 1 when there is any. */
const failures: string[] = [];

async function scenario<T>(name: string, fn: () => Promise<T>): Promise<T | { error: string } | null> {
  if (!wanted(name)) return null;
  ctx.log(`\n== ${name} ==`);
  const t = Date.now();
  const cpu0 = cpuMs("self", true);
  const ownCleanups = ctx.cleanups.length;
  try {
    const r = await fn();
    // The CPU of this process and of the processes that ended (a shared machine stretches the wall time).
    const cpu = cpuMs("self", true);
    ctx.log(`  (${Math.round((Date.now() - t) / 100) / 10} s${cpu !== null && cpu0 !== null ? `, CPU ${Math.round((cpu - cpu0) / 100) / 10} s` : ""})`);
    return r;
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    ctx.log(`  ${name} failed: ${msg}`);
    failures.push(`${name}: ${msg.slice(0, 500)}`);
    return { error: msg.slice(0, 2000) };
  } finally {
    // Its databases go with it: the memory backend holds every scenario's data on its heap.
    for (const c of ctx.cleanups.splice(ownCleanups).reverse()) await bounded(c(), 10_000);
  }
}

function uptime(): string {
  try {
    return execFileSync("uptime", { encoding: "utf8" }).trim();
  } catch {
    return `load average: ${loadavg()
      .map((x) => x.toFixed(2))
      .join(", ")}`;
  }
}

/** Soak mode: only the soak, written to bench/results/<date>-soak.{md,json}. */
async function soakMain(o: NonNullable<typeof soak>): Promise<number> {
  const t0 = Date.now();
  const uptimeStart = uptime();
  const loadAvgStart = loadavg();
  ctx.log(
    `runhook bench --soak ${o.durationMs / 1000}s: ${database!.description}${ctx.javaPid ? ` (java pid ${ctx.javaPid})` : ""}; ${cpus().length} CPUs; node ${process.version}; ${uptimeStart}`,
  );
  ctx.log("\n== soak ==");
  const r = await soakScenario(ctx, o);
  const uptimeEnd = uptime();
  const loadAvgEnd = loadavg();
  await cleanup();
  const meta = {
    date: started.toISOString(),
    database: database!.description,
    ...measuredCode(),
    loadAvgStart,
    loadAvgEnd,
    cpus: cpus().length,
    node: process.version,
    uptimeStart,
    uptimeEnd,
  };
  const md = renderSoakMarkdown(r, meta);
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    join(resultsDir, `${stamp}.json`),
    `${JSON.stringify(
      {
        ...meta,
        machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "", memGb: Math.round(totalmem() / 2 ** 30), platform: process.platform },
        durationS: Math.round((Date.now() - t0) / 1000),
        ...r,
      },
      null,
      2,
    )}\n`,
  );
  writeFileSync(join(resultsDir, `${stamp}.md`), md);
  ctx.log(`\n${md}`);
  ctx.log(`(written bench/results/${stamp}.json and .md; ${Math.round((Date.now() - t0) / 1000)} s)`);
  const serverSlope = r.verdict.rss.find((x) => x.process === "server")?.slopeMbPerMin ?? null;
  const worstP99 = r.verdict.p99.reduce<number | null>((a, p) => (p.judged && p.ratio !== null && (a === null || p.ratio > a) ? p.ratio : a), null);
  process.stdout.write(
    `${JSON.stringify({
      soakS: o.durationMs / 1000,
      targetPerSec: r.targetPerSec,
      capacityPerSec: r.capacity?.capacityPerSec ?? null,
      acceptedPerSec: round(r.totals.accepted / Math.max(1, r.totals.elapsedS), 1),
      errors: r.totals.errors,
      rssFlat: r.verdict.rssFlat,
      serverSlopeMbPerMin: serverSlope,
      p99Stable: r.verdict.p99Stable,
      worstP99Ratio: worstP99,
    })}\n`,
  );
  return 0;
}

/** `--vs temporal`: only that comparison (scenarios/temporal.ts), written to bench/results/<date>-vs-temporal[-quick].{md,json}. */
async function vsTemporalMain(): Promise<number> {
  const t0 = Date.now();
  ctx.log(`runhook bench --vs temporal: ${cpus().length} CPUs; node ${process.version}; ${uptime()}`);
  ctx.log("\n== vs temporal ==");
  const cacheDir = process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
  const r = await temporalScenario(ctx, { cacheDir, dataDir, concurrencies: [1, 16, 64], durationMs: quick ? 3000 : 10_000, repeat: quick ? 1 : 2 });
  await cleanup();
  const meta = {
    date: started.toISOString(),
    ...measuredCode(),
  };
  const md = renderTemporalMarkdown(r, meta);
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, `${stamp}.json`), `${JSON.stringify({ ...meta, machine: { cpus: cpus().length, node: process.version }, ...r }, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${stamp}.md`), md);
  ctx.log(`\n${md}`);
  ctx.log(`(written bench/results/${stamp}.json and .md; ${Math.round((Date.now() - t0) / 1000)} s)`);
  const top = r.levels.at(-1);
  process.stdout.write(
    `${JSON.stringify({ temporal: r.temporal, concurrency: top?.concurrency ?? null, webhookVsTemporal: top?.webhookVsTemporal ?? null, grpcVsTemporal: top?.grpcVsTemporal ?? null })}\n`,
  );
  return 0;
}

/** The growth scenario on the file backend, as npm start runs, in `dir`; its database is stopped at the end. */
async function growth(dir: string): Promise<GrowthResult> {
  mkdirSync(dir, { recursive: true });
  database = await openBenchDatabase(dir, (m) => ctx.log(m), { persistent: true });
  ctx.uri = database.uri;
  ctx.javaPid = database.javaPid;
  ctx.log(`runhook bench --grow${quick ? " --quick" : ""}: ${database.description}; ${cpus().length} CPUs; node ${process.version}; ${uptime()}`);
  const cacheDir = process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
  const sizesArg = args.find((a) => a.startsWith("--grow-sizes="));
  const sizes = sizesArg ? sizesArg.slice("--grow-sizes=".length).split(",").map(Number) : by([0, 100_000, 1_000_000], [0, 20_000, 100_000], [0, 1000]);
  const sweepArg = args.find((a) => a.startsWith("--sweep-runs="));
  const sweepRuns = sweepArg ? Number(sweepArg.slice("--sweep-runs=".length)) : sizesArg ? Math.max(1000, sizes.at(-1)! / 10) : by(100_000, 20_000, 100);
  const db = database;
  try {
    return await growthScenario(ctx, { dataDir: dir, cacheDir, sizes, sweepRuns, effort: GROWTH_EFFORT[effort] }, () => db.stop());
  } finally {
    await bounded(db.stop(), 10_000);
    database = undefined;
  }
}

/** `--grow`: only the growth scenario (scenarios/growth.ts) on the file backend, written to bench/results/<date>-grow[-quick].{md,json}. */
async function growMain(): Promise<number> {
  const t0 = Date.now();
  const measured = measuredCode();
  const r = await growth(dataDir);
  await cleanup();
  const meta = { date: started.toISOString(), ...measured, quick };
  const md = renderGrowthMarkdown(r, meta);
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, `${stamp}.json`), `${JSON.stringify({ ...meta, machine: { cpus: cpus().length, node: process.version }, ...r }, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${stamp}.md`), md);
  ctx.log(`\n${md}`);
  ctx.log(`(written bench/results/${stamp}.json and .md; ${Math.round((Date.now() - t0) / 1000)} s)`);
  process.stdout.write(`${JSON.stringify(r.ratios)}\n`);
  return 0;
}

/** Every scenario of the bench but soak, temporal and growth, on one database server (the embedded memory backend, in `dir`). */
async function scenarios(dir: string): Promise<BenchResults> {
  const loadAvgStart = loadavg();
  mkdirSync(dir, { recursive: true });
  database = await openBenchDatabase(dir, (m) => ctx.log(m));
  ctx.uri = database.uri;
  ctx.javaPid = database.javaPid;
  ctx.log(
    `runhook bench${smoke ? " --smoke" : quick ? " --quick" : ""}: ${database.description}${ctx.javaPid ? ` (java pid ${ctx.javaPid})` : ""}; ${cpus().length} CPUs; load average ${loadAvgStart.map((x) => x.toFixed(2)).join(", ")}; node ${process.version}`,
  );
  const javaIdleMb = ctx.javaPid ? rssMb(ctx.javaPid) : null;
  const javaSampler = ctx.javaPid ? rssSampler(ctx.javaPid, 500) : undefined;

  const results: BenchResults = {
    date: started.toISOString(),
    quick,
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "",
      memGb: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      platform: process.platform,
      loadAvgStart,
    },
    database: database.description,
    ...measuredCode(),
    webhook: null,
    backends: null,
    processes: null,
    roundTrips: null,
    pickup: null,
    batch: null,
    e2e: null,
    logs: null,
    javaRss: null,
  };
  // The smoke run's check that a met limit fails a load, naming it (not a figure).
  if (smoke) await scenario("limits", () => limitsScenario(ctx));
  // A smoke run runs each load once, 20 ms apart: it runs every step, it measures nothing.
  const slicing = smoke ? { pauseMs: 20, onePass: true } : undefined;
  results.webhook = await scenario("webhook", () =>
    webhookScenario(ctx, {
      concurrencies: by([1, 16, 64], [1, 16, 64], [1, 64]),
      durationMs: by(15_000, 3000, 500),
      repeat: by(2, 1, 1),
      conflictConcurrency: by(64, 16, 16),
      slo: {
        p99LimitMs: TARGETS.webhookP99Ms,
        stepMs: by(8000, 3000, 500),
        budgetMs: by(180_000, 60_000, 2000),
        precision: by(0.05, 0.1, 0.5),
      },
      slicing,
    }),
  );
  results.backends = await scenario("backends", () =>
    backendsScenario(ctx, { concurrencies: by([1, 16, 64], [1, 16, 64], [64]), durationMs: by(15_000, 3000, 500), repeat: by(2, 1, 1), slicing }),
  );
  results.processes = await scenario("processes", () => processesScenario(ctx, { concurrency: 64, durationMs: by(10_000, 3000, 1000), rounds: by(3, 2, 1) }));
  results.roundTrips = await scenario("roundtrips", () =>
    roundTripsScenario(ctx, { calls: by(100, 20, 5), runs: by(20, 5, 2), concurrency: 64, durationMs: by(10_000, 3000, 1000) }),
  );
  results.pickup = await scenario("pickup", () =>
    pickupScenario(ctx, { runs: by(200, 50, 10), historyRuns: by(50_000, 10_000, 500), backlogRuns: by(5000, 1000, 100) }),
  );
  results.batch = await scenario("batch", () =>
    batchScenario(ctx, {
      batchRuns: by(10_000, 10_000, 100),
      concurrency: 16,
      durationMs: by(10_000, 5000, 1000),
      pacedPerSec: 20,
      pickupMs: by(30_000, 15_000, 1000),
      finishTimeoutMs: by(900_000, 900_000, 60_000),
    }),
  );
  results.e2e = await scenario("e2e", () =>
    e2eScenario(
      ctx,
      by(
        { pacedRuns: 200, burstRuns: 2000, triggerConcurrency: 16, rawDurationMs: 10_000, probeTimeoutMs: 15_000, finishTimeoutMs: 180_000 },
        { pacedRuns: 10, burstRuns: 40, triggerConcurrency: 16, rawDurationMs: 1500, probeTimeoutMs: 8000, finishTimeoutMs: 15_000 },
        { pacedRuns: 3, burstRuns: 10, triggerConcurrency: 8, rawDurationMs: 500, probeTimeoutMs: 8000, finishTimeoutMs: 15_000 },
      ),
    ),
  );
  results.logs = await scenario("logs", () =>
    logsScenario(ctx, {
      entries: by(100_000, 10_000, 1000),
      timeLimitMs: by(180_000, 30_000, 15_000),
      tailEntries: by(20_000, 20_000, 1000),
      tailTimeLimitMs: by(300_000, 120_000, 30_000),
    }),
  );

  if (ctx.javaPid) results.javaRss = { idleMb: javaIdleMb, endMb: rssMb(ctx.javaPid), peakMb: javaSampler!.stop() };
  results.machine.loadAvgEnd = loadavg();
  await bounded(database.stop(), 10_000);
  database = undefined;
  return results;
}

/** The fields of a headline that are null, but those of the Java database when there is none (MONGODB_URI). */
function nullFields(h: object): string[] {
  const noJava = process.env.MONGODB_URI !== undefined;
  return Object.entries(h)
    .filter(([k, v]) => v === null && !(noJava && k.startsWith("java")))
    .map(([k]) => k);
}

/** `--smoke`: every scenario of the quick bench and a tiny --grow, writing no results; 1 when any failed or left a headline figure null. */
async function smokeMain(): Promise<number> {
  const t0 = Date.now();
  const results = await scenarios(join(dataDir, "scenarios"));
  const figures = headline(results);
  ctx.log(`\n${JSON.stringify(figures)}`);
  const grown = await scenario("grow", () => growth(join(dataDir, "grow")));
  const ratios = grown && !("error" in grown) ? grown.ratios : null;
  if (ratios) ctx.log(`\n${JSON.stringify(ratios)}`);
  await cleanup();
  const nulls = [...nullFields(figures), ...(ratios ? nullFields(ratios) : [])];
  const seconds = Math.round((Date.now() - t0) / 1000);
  const passed = failures.length === 0 && nulls.length === 0;
  if (!passed) {
    process.stderr.write(
      `bench --smoke failed:\n${[...failures.map((f) => `  scenario ${f}`), ...(nulls.length ? [`  headline figures null: ${nulls.join(", ")}`] : [])].join("\n")}\n`,
    );
  }
  process.stdout.write(`${JSON.stringify({ smoke: passed ? "passed" : "failed", seconds, failedScenarios: failures.length, nullFigures: nulls })}\n`);
  return passed ? 0 : 1;
}

async function main(): Promise<number> {
  const t0 = Date.now();
  const uncovered = limitsNotCovered();
  if (uncovered.length) {
    process.stderr.write(
      `bench: the server has limits the bench does not set: ${uncovered.join(", ")}. Set each out of reach in bench/lib/limits.ts (LIMITS_OUT_OF_REACH), or say there why no scenario can meet it.\n`,
    );
    return 2;
  }
  if (smoke) return smokeMain(); // every scenario, --grow's too
  if (vs) return vsTemporalMain(); // it starts the database it needs
  if (grow) return growMain(); // the file backend, as npm start runs
  if (soak) {
    database = await openBenchDatabase(dataDir, (m) => ctx.log(m));
    ctx.uri = database.uri;
    ctx.javaPid = database.javaPid;
    return soakMain(soak);
  }
  const results = await scenarios(dataDir);
  await cleanup();
  results.durationS = Math.round((Date.now() - t0) / 1000);

  let profileText = "";
  if (profileDir) {
    const files = profileFiles(profileDir);
    results.profiles = files.map((f) => f.slice(ROOT.length + 1));
    profileText = files.map((f) => formatSummary(summarize(f, 20))).join("\n\n");
  }

  const md = renderMarkdown(results) + (profileText ? `\n\n## CPU profiles\n\n${profileText}\n` : "");
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, `${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${stamp}.md`), md);
  ctx.log(`\n${md}`);
  ctx.log(`(written bench/results/${stamp}.json and .md; ${results.durationS} s)`);
  if (failures.length) process.stderr.write(`bench: ${failures.length} scenario(s) failed:\n${failures.map((f) => `  ${f}`).join("\n")}\n`);
  process.stdout.write(`${JSON.stringify(headline(results))}\n`);
  return failures.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    await cleanup();
    process.exit(1);
  },
);
