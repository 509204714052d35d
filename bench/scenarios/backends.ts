// Webhook accepts on each embedded backend, interleaved: memory (what the other scenarios use),
// file (what `npm start` uses: a write is answered once its group commit is on disk) and file
// with that durability off (-Drunhook.h2.commitMs=1000: H2 commits once a second and writes
// are answered before, the behaviour before the group commit). Each backend has its own Java
// database server and its own runhook server (executors off); distinct records, REST.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "undici";
import { startEmbeddedServer, type EmbeddedServer } from "../../src/embedded/index.js";
import type { StepDoc } from "../../src/store/types.js";
import { loadConfig } from "../../src/config.js";
import { benchWorld, openStore, spawnFor, type BenchContext, type BenchWorld } from "../lib/context.js";
import { ratio } from "../lib/load.js";
import type { Proc } from "../lib/procs.js";
import { fmtCpu, interleaved, restTrigger, type Phase, type Slicing } from "./webhook.js";

export const BACKENDS = [
  { name: "memory", what: "memory backend", persistent: false, javaOptions: [] as string[] },
  { name: "file", what: "file (H2), a write answered once its group commit is on disk", persistent: true, javaOptions: [] as string[] },
  {
    name: "file-ack-before-commit",
    what: "file (H2), committed once a second, writes answered before (-Drunhook.h2.commitMs=1000: the behaviour before)",
    persistent: true,
    javaOptions: ["-Drunhook.h2.commitMs=1000"],
  },
] as const;

export interface BackendsResult {
  backends: Array<{ name: string; what: string }>;
  levels: Array<{ concurrency: number; byBackend: Record<string, Phase> }>;
  /** accepted/s, durable file ÷ file acknowledged before commit, at the top concurrency. */
  fileVsAckBeforeCommit: number | null;
}

interface Setup {
  name: string;
  dir: string;
  db: EmbeddedServer;
  ctx: BenchContext;
  world?: BenchWorld;
  server?: Proc;
}

const STEPS: StepDoc[] = [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }];

async function setUp(ctx: BenchContext, b: (typeof BACKENDS)[number]): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), `runhook-bench-${b.name}-`));
  const { cacheDir } = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dir });
  const db = await startEmbeddedServer({
    noTableScan: true,
    dataDir: dir,
    cacheDir,
    persistent: b.persistent,
    javaOptions: [...b.javaOptions],
    progress: ctx.log,
  });
  const s: Setup = { name: b.name, dir, db, ctx: { ...ctx, uri: db.uri, javaPid: undefined, cleanups: [] } };
  const dbName = `${ctx.runTag}_${b.name.replace(/-/g, "_")}`;
  s.world = await benchWorld(s.ctx, await openStore(s.ctx, dbName), { steps: STEPS });
  s.server = await spawnFor(s.ctx, `backend-${b.name}`, "start", dbName, { RUNHOOK_EXECUTOR: "false" });
  return s;
}

async function tearDown(s: Setup): Promise<void> {
  await s.server?.stop();
  for (const c of s.ctx.cleanups.splice(0).reverse()) await c().catch(() => {});
  await s.db.stop();
  rmSync(s.dir, { recursive: true, force: true });
}

export async function backendsScenario(
  ctx: BenchContext,
  opts: { concurrencies: number[]; durationMs: number; repeat: number; slicing?: Slicing },
): Promise<BackendsResult> {
  const setups: Setup[] = [];
  const levels: BackendsResult["levels"] = [];
  try {
    // Side by side: the servers of all three start in the time of one.
    const ready = await Promise.allSettled(BACKENDS.map((b) => setUp(ctx, b)));
    for (const r of ready) if (r.status === "fulfilled") setups.push(r.value);
    const failed = ready.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    ctx.log(`  ${setups.length} database servers and runhook servers up; loads of a level interleaved in balanced orders, ${opts.durationMs} ms each`);
    for (const c of opts.concurrencies) {
      const pools = setups.map((s) => new Pool(s.server!.baseUrl!, { connections: c, pipelining: 1 }));
      try {
        const loads = setups.map((s, k) => {
          const post = restTrigger(pools[k]!, s.world!, 202);
          return { name: s.name, fn: (i: number) => post(`${s.name}-${c}-${i}`) };
        });
        const byBackend = await interleaved({}, c, loads, {
          repeat: opts.repeat,
          durationMs: opts.durationMs,
          warmupPerWorker: c === 1 ? 20 : 2,
          ...opts.slicing,
        });
        for (const [name, p] of Object.entries(byBackend))
          ctx.log(`  ${name.padEnd(22)} c=${c}: ${p.okPerSec}/s p50 ${p.p50Ms} p99 ${p.p99Ms} ms ${fmtCpu(p)}`);
        levels.push({ concurrency: c, byBackend });
      } finally {
        await Promise.all(pools.map((p) => p.close()));
      }
    }
  } finally {
    for (const s of setups) await tearDown(s);
  }
  const top = levels.at(-1)?.byBackend;
  return {
    backends: BACKENDS.map(({ name, what }) => ({ name, what })),
    levels,
    fileVsAckBeforeCommit: ratio(top?.file?.okPerSec, top?.["file-ack-before-commit"]?.okPerSec),
  };
}
