// mongo-java-server's backends under runhook's launcher (src/embedded/index.ts), through runhook's
// store (src/store: its connection, indexes and verbs): runs.create/s of a run document at
// concurrency 1, 16 and 64, counters.next (a findOneAndUpdate $inc on one document) at 64,
// the Java process's RSS, the H2 file's size,
// and durability (a clean restart keeps every acknowledged write; what a kill -9 of the Java
// process loses).
//   node --import tsx bench/embedded-backends.ts [--quick] [--rounds=N] [--seconds=S]
// Backends: memory; h2-stock (the unmodified `new H2Backend(file)`, -Drunhook.h2=stock);
// h2 (runhook's MVStore settings and data types, the default for persistent servers).
// Rounds run the backends interleaved and the report gives the median per figure, as other
// load on the machine moves single runs a lot. Writes bench/results/<date>-embedded-backends.md.
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir, loadavg, cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { newRunDoc } from "../src/domain/runs/model.js";
import { ensureEmbeddedJar, startEmbeddedServer, type EmbeddedServer } from "../src/embedded/index.js";
import { ensureIndexes, openStore, storeFixtures, type Store } from "../src/store/index.js";
import { sleep } from "../src/lib/sleep.js";

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const quick = process.argv.includes("--quick");
const rounds = Number(arg("rounds") ?? (quick ? 1 : 3));
const seconds = Number(arg("seconds") ?? (quick ? 3 : 8));
const durableN = Number(arg("durable") ?? (quick ? 5000 : 20000));
const killRuns = Number(arg("kills") ?? (quick ? 1 : 3));
const cacheDir = process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
const log = (m: string) => console.log(`[bench] ${m}`);

interface Backend {
  name: string;
  persistent: boolean;
  javaOptions: string[];
}
const backends: Backend[] = [
  { name: "memory", persistent: false, javaOptions: [] },
  { name: "h2-stock", persistent: true, javaOptions: ["-Drunhook.h2=stock"] },
  { name: "h2", persistent: true, javaOptions: [] },
];

const scratch = mkdtempSync(join(tmpdir(), "rh-embedded-bench-"));
const started: EmbeddedServer[] = [];
async function cleanup() {
  await Promise.allSettled(started.map((s) => s.stop()));
  rmSync(scratch, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => void cleanup().then(() => process.exit(130)));

const pids = new Map<EmbeddedServer, number>();
async function start(b: Backend, dataDir: string): Promise<EmbeddedServer> {
  const before = javaChildren();
  const s = await startEmbeddedServer({ noTableScan: true, dataDir, cacheDir, persistent: b.persistent, javaOptions: b.javaOptions, progress: log });
  started.push(s);
  const pid = [...javaChildren()].find((p) => !before.has(p));
  if (pid) pids.set(s, pid);
  return s;
}
function javaPid(s: EmbeddedServer): number {
  const pid = pids.get(s);
  if (!pid) throw new Error(`no java child for ${s.uri}`);
  return pid;
}
async function stop(s: EmbeddedServer): Promise<number> {
  const t = performance.now();
  await s.stop();
  if (started.includes(s)) started.splice(started.indexOf(s), 1);
  return performance.now() - t;
}

/** The pids of this process's java children. */
function javaChildren(): Set<number> {
  const pids = new Set<number>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && stat.includes("(java)")) pids.add(Number(d));
    } catch {
      // gone
    }
  }
  return pids;
}
function rssMb(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return { rss: Math.round(kb("VmRSS") / 1024), hwm: Math.round(kb("VmHWM") / 1024) };
}
const fileMb = (dataDir: string) => {
  const st = statSync(join(dataDir, "mongo", "runhook.mv"), { throwIfNoEntry: false });
  return st ? Math.round((st.size / 1048576) * 10) / 10 : NaN;
};

/** A run as the trigger stores it (newRunDoc), three steps, on a fresh (workflow, record). */
function runDoc() {
  const step = { type: "load_record" } as const;
  return newRunDoc({
    workflowId: randomUUID(),
    workflowVersion: 3,
    steps: [step, step, step],
    renderingId: randomUUID(),
    organizationId: randomUUID(),
    projectId: randomUUID(),
    environmentId: randomUUID(),
    collectionId: randomUUID(),
    collection: "customers",
    recordId: randomUUID(),
    userId: randomUUID(),
    userEmail: "someone@example.com",
    tokenId: randomUUID(),
    via: "webhook",
  });
}
/** runhook's store on database `name` of server `s`, with every index runhook creates. */
async function storeOn(s: EmbeddedServer, name: string, timeoutMs?: number): Promise<Store> {
  const store = await openStore(s.uri, { dbName: name, timeoutMs });
  await ensureIndexes(store);
  return store;
}

/** Stores a new run; one that the unique index refuses is a failure here (every run is on a fresh record). */
async function createRun(store: Store): Promise<void> {
  if (!(await store.runs.create(runDoc())).created) throw new Error("a new run was refused");
}

/** Closed loop: `concurrency` callers for `secs` seconds (and at most 2,000,000 ops). */
async function closedLoop(concurrency: number, secs: number, op: () => Promise<unknown>) {
  const lat: number[] = [];
  const end = performance.now() + secs * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end && lat.length < 2_000_000) {
        const t = performance.now();
        await op();
        lat.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { perSec: Math.round(lat.length / elapsed), p99: Math.round((lat[Math.floor(lat.length * 0.99)] ?? NaN) * 10) / 10 };
}

interface Figures {
  c1: number;
  c16: number;
  c64: number;
  p99c64: number;
  inc64: number;
  rssIdle: number;
  rssLoad: number;
  rssPeak: number;
  docs: number;
  fileLoad: number;
  fileStopped: number;
  stopMs: number;
  startMs: number;
}

async function measure(b: Backend, round: number): Promise<Figures> {
  const dataDir = join(scratch, `${b.name}-${round}`);
  mkdirSync(dataDir, { recursive: true });
  const t = performance.now();
  const s = await start(b, dataDir);
  const startMs = Math.round(performance.now() - t);
  const pid = javaPid(s);
  await sleep(1000);
  const rssIdle = rssMb(pid).rss;
  const opened: Store[] = [];
  try {
    const warm = await storeOn(s, "bench_warm");
    opened.push(warm);
    await closedLoop(16, Math.min(3, seconds), () => createRun(warm));
    const store = await storeOn(s, "bench");
    opened.push(store);
    const c1 = await closedLoop(1, seconds, () => createRun(store));
    const c16 = await closedLoop(16, seconds, () => createRun(store));
    const c64 = await closedLoop(64, seconds, () => createRun(store));
    await store.counters.next("c");
    const inc = await closedLoop(64, seconds, () => store.counters.next("c"));
    const { rss: rssLoad, hwm: rssPeak } = rssMb(pid);
    const docs = await storeFixtures(store).runs.countDocuments();
    const fileLoad = b.persistent ? fileMb(dataDir) : NaN;
    for (const o of opened.splice(0)) await o.close();
    const stopMs = Math.round(await stop(s));
    return {
      c1: c1.perSec,
      c16: c16.perSec,
      c64: c64.perSec,
      p99c64: c64.p99,
      inc64: inc.perSec,
      rssIdle,
      rssLoad,
      rssPeak,
      docs,
      fileLoad,
      fileStopped: b.persistent ? fileMb(dataDir) : NaN,
      stopMs,
      startMs,
    };
  } finally {
    for (const o of opened) await o.close().catch(() => {});
    await s.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Clean restart: N acknowledged inserts (c=64) and N/10 $inc, stop(), start again: all there? */
async function cleanRestart(b: Backend) {
  const dataDir = join(scratch, `${b.name}-durable`);
  let s = await start(b, dataDir);
  let store = await storeOn(s, "durable");
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < durableN) {
        next++;
        await createRun(store);
      }
    }),
  );
  const incs = Math.round(durableN / 10);
  let done = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (done < incs) {
        done++;
        await store.counters.next("c");
      }
    }),
  );
  await store.close();
  const fileBefore = fileMb(dataDir);
  const stopMs = Math.round(await stop(s));
  const fileAfter = fileMb(dataDir);
  const t = performance.now();
  s = await start(b, dataDir);
  const restartMs = Math.round(performance.now() - t);
  store = await openStore(s.uri, { dbName: "durable" });
  const count = await storeFixtures(store).runs.countDocuments();
  const n = await store.counters.current("c");
  // the unique index survived too: a second run on an ongoing run's (workflow, record) is refused
  const one = await storeFixtures(store).runs.findOne({});
  const uniqueKept = !!one && !(await store.runs.create({ ...runDoc(), activeKey: one.activeKey })).created;
  await store.close();
  await stop(s);
  rmSync(dataDir, { recursive: true, force: true });
  return { inserted: durableN, count, incs, n, uniqueKept, stopMs, restartMs, fileBefore, fileAfter };
}

/**
 * kill -9 of the Java process while 16 callers insert (sequential numeric _ids); then start
 * again and see which acknowledged inserts are gone, and how long before the kill they were
 * acknowledged.
 */
async function killWindow(b: Backend, run: number) {
  const dataDir = join(scratch, `${b.name}-kill-${run}`);
  let s = await start(b, dataDir);
  const pid = javaPid(s);
  let db = await openStore(s.uri, { dbName: "killed", timeoutMs: 2000 });
  // Not runhook's data: numbered documents, to tell which acknowledged writes a kill loses.
  const col = storeFixtures(db).scratch<{ _id: number; at: Date }>("docs");
  const acked = new Map<number, number>();
  let seq = 0;
  let stopAt = Infinity;
  const killAfter = 3000 + run * 700; // not in step with the 1 s commit timer
  const t0 = performance.now();
  const callers = Array.from({ length: 16 }, async () => {
    while (performance.now() < stopAt) {
      const id = ++seq;
      try {
        await col.insertOne({ _id: id, at: new Date() });
        acked.set(id, performance.now());
      } catch {
        return;
      }
    }
  });
  await sleep(killAfter);
  const killedAt = performance.now();
  process.kill(pid, "SIGKILL");
  stopAt = 0;
  await Promise.all(callers);
  await db.close().catch(() => {});
  await stop(s); // reaps the child; the state file is left for the restart to find stale
  s = await start(b, dataDir);
  db = await openStore(s.uri, { dbName: "killed" });
  const kept = new Set(
    (
      await storeFixtures(db)
        .scratch<{ _id: number }>("docs")
        .find({}, { projection: { _id: 1 } })
        .toArray()
    ).map((d) => d._id),
  );
  await db.close();
  await stop(s);
  rmSync(dataDir, { recursive: true, force: true });
  const lost = [...acked].filter(([id]) => !kept.has(id));
  const oldestLost = lost.length ? Math.min(...lost.map(([, at]) => at)) : undefined;
  return {
    killedAfterMs: Math.round(killedAt - t0),
    acked: acked.size,
    kept: kept.size,
    lostAcked: lost.length,
    windowMs: oldestLost === undefined ? 0 : Math.round(killedAt - oldestLost),
  };
}

const median = (xs: number[]) => {
  const v = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  return v.length ? v[Math.floor((v.length - 1) / 2)]! : NaN;
};
const fmt = (x: number) => (Number.isNaN(x) ? "–" : x.toLocaleString("en-US"));

try {
  const t = performance.now();
  const jar = await ensureEmbeddedJar(cacheDir, log);
  log(`jar ${jar} (${Math.round(performance.now() - t)} ms)`);
  const results = new Map<string, Figures[]>(backends.map((b) => [b.name, []]));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < backends.length; i++) {
      const b = backends[(i + r) % backends.length]!;
      const f = await measure(b, r);
      results.get(b.name)!.push(f);
      log(`round ${r + 1} ${b.name}: ${JSON.stringify(f)}`);
    }
  }
  const durable: Record<string, Awaited<ReturnType<typeof cleanRestart>>> = {};
  const kills: Record<string, Awaited<ReturnType<typeof killWindow>>[]> = {};
  for (const b of backends.filter((b) => b.persistent)) {
    durable[b.name] = await cleanRestart(b);
    log(`clean restart ${b.name}: ${JSON.stringify(durable[b.name])}`);
    kills[b.name] = [];
    for (let k = 0; k < killRuns; k++) {
      kills[b.name]!.push(await killWindow(b, k));
      log(`kill -9 ${b.name}: ${JSON.stringify(kills[b.name]!.at(-1))}`);
    }
  }

  const m = (name: string, k: keyof Figures) => median(results.get(name)!.map((f) => f[k]));
  const rows = backends.map(
    (b) =>
      `| ${b.name} | ${fmt(m(b.name, "c1"))} | ${fmt(m(b.name, "c16"))} | ${fmt(m(b.name, "c64"))} | ${fmt(m(b.name, "p99c64"))} | ${fmt(m(b.name, "inc64"))} | ${fmt(m(b.name, "rssIdle"))} | ${fmt(m(b.name, "rssLoad"))} / ${fmt(m(b.name, "rssPeak"))} | ${fmt(m(b.name, "fileLoad"))} → ${fmt(m(b.name, "fileStopped"))} | ${fmt(m(b.name, "startMs"))} / ${fmt(m(b.name, "stopMs"))} |`,
  );
  const all = backends.flatMap((b) => results.get(b.name)!.map((f, r) => `| ${b.name} | ${r + 1} | ${f.c1} | ${f.c16} | ${f.c64} | ${f.inc64} | ${f.docs} |`));
  const report = [
    `# mongo-java-server backends under runhook's launcher — ${new Date().toISOString()}`,
    "",
    `\`node --import tsx bench/embedded-backends.ts${quick ? " --quick" : ""}\`: ${rounds} round(s) of ${seconds} s per phase, backends interleaved, medians shown. ` +
      `${cpus().length} CPUs, load average at the end ${loadavg()
        .map((x) => x.toFixed(1))
        .join(" ")} (the machine is shared: single runs vary a lot). ` +
      `Node ${process.version}, runhook's store (src/store: connect(), ensureIndexes(), runs.create, counters.next). JVM flags: the launcher's (see src/embedded/index.ts).`,
    "",
    "Runs as the trigger stores them (newRunDoc: ~25 fields, UUID strings, 3 steps), by runs.create into a collection with runhook's indexes (`activeKey` unique; the non-unique ones are accepted but ignored by mongo-java-server). " +
      "The collection grows through the phases (c=1, then 16, then 64). `$inc`: counters.next (findOneAndUpdate on one document), c=64.",
    "",
    "| backend | runs.create/s c=1 | c=16 | c=64 | p99 ms c=64 | $inc/s c=64 | RSS idle MB | RSS after load / peak MB | file MB loaded → stopped | start / stop ms |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    "Every round:",
    "",
    "| backend | round | c=1 | c=16 | c=64 | $inc c=64 | docs |",
    "|---|---|---|---|---|---|---|",
    ...all,
    "",
    `## Durability`,
    "",
    `Clean restart: ${durableN.toLocaleString("en-US")} acknowledged runs.create (c=64) and ${Math.round(durableN / 10).toLocaleString("en-US")} counters.next (c=16), stop(), start on the same dataDir.`,
    "",
    "| backend | count after restart | counter | unique index kept | stop ms | restart ms | file MB before → after stop |",
    "|---|---|---|---|---|---|---|",
    ...Object.entries(durable).map(
      ([k, d]) =>
        `| ${k} | ${d.count} / ${d.inserted} | ${d.n} / ${d.incs} | ${d.uniqueKept ? "yes" : "NO"} | ${d.stopMs} | ${d.restartMs} | ${d.fileBefore} → ${d.fileAfter} |`,
    ),
    "",
    "kill -9 of the Java process while 16 callers insert; start again on the same dataDir. " +
      "`window` = how long before the kill the oldest lost acknowledged insert was acknowledged.",
    "",
    "| backend | killed after ms | acknowledged | kept | acknowledged but lost | window ms |",
    "|---|---|---|---|---|---|",
    ...Object.entries(kills).flatMap(([k, runs]) => runs.map((r) => `| ${k} | ${r.killedAfterMs} | ${r.acked} | ${r.kept} | ${r.lostAcked} | ${r.windowMs} |`)),
    "",
  ].join("\n");
  console.log(`\n${report}`);
  const file = join(import.meta.dirname, "results", `${new Date().toISOString().slice(0, 10)}-embedded-backends${quick ? "-quick" : ""}.md`);
  writeFileSync(file, report);
  log(`written ${file}`);
} finally {
  await cleanup();
}
