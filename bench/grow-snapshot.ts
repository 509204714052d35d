// `npm run bench:snapshot -- <make|settle|measure> <dir> [n]`: the growth benchmark's accept
// trials against a database file made once, so that a change to the embedded server can be
// measured at a million runs in minutes instead of the half hour `--grow` takes (most of it
// the fill). For development; `npm run bench -- --grow` is the benchmark of record.
//   make <dir> [size=1000000]  the growth bench's three tenants, seed and fill (scenarios/growth.ts)
//                              in a new file-backed database under <dir>, and <dir>/snapshot.json
//                              (the tenants, their tokens in clear, and the signing keys: a
//                              benchmark's throwaway secrets, never a real deployment's)
//   settle <dir>               opens it and waits until the space reuse has caught up
//   measure <dir> [trials=3]   accept trials (one not counted, then 16 and 64 callers alternating)
//                              on a new empty database, then on <dir>, and the ratios; the trials
//                              add runs to <dir>: measure a copy (`cp -r`, then `sync`, or the
//                              copy's write-back competes with the trials)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureIndexes, openStore, storeFixtures, type Store } from "../src/store/index.js";
import { newSigningKeys, benchWorld, spawnFor, uriFor, type BenchContext, type BenchWorld } from "./lib/context.js";
import { openBenchDatabase } from "./lib/database.js";
import { rssMb } from "./lib/procs.js";
import { ratio, sleep } from "./lib/load.js";
import { acceptTrial, afterAccepts, commitStats, fill, GROWTH_EFFORT, medianTrial, seed, spaceReuseCaughtUp, STEPS, BURST } from "./scenarios/growth.js";

const DB_NAME = "snapshot_grow";
const log = (m: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${m}\n`);

interface Snapshot {
  signingKeys: string;
  worlds: BenchWorld[];
}

/** The embedded file-backed database on `dir` (as the growth bench opens it), the store on it, and a context for the bench's helpers. */
async function open(dir: string, signingKeys = newSigningKeys()) {
  if (process.env.MONGODB_URI) throw new Error("bench:snapshot measures the embedded server's file: unset MONGODB_URI");
  const db = await openBenchDatabase(dir, log, { persistent: true });
  const ctx: BenchContext = { quick: false, uri: db.uri, runTag: "snapshot", signingKeys, javaPid: db.javaPid, log, cleanups: [] };
  const store = await openStore(uriFor(db.uri, DB_NAME), { dbName: DB_NAME });
  await ensureIndexes(store);
  const close = async () => {
    await store.close();
    await db.stop();
  };
  return { ctx, store, close };
}

/** The growth bench's tenants: the measured one (with BURST records and its seed entries) and two others. */
async function worlds(ctx: BenchContext, store: Store): Promise<BenchWorld[]> {
  const records = Array.from({ length: BURST }, (_, i) => ({ id: `r${i}`, status: "new" }));
  const w = await benchWorld(ctx, store, { steps: [...STEPS], records });
  const others = [await benchWorld(ctx, store, { steps: [...STEPS] }), await benchWorld(ctx, store, { steps: [...STEPS] })];
  await seed(store, w);
  return [w, ...others];
}

async function make(dir: string, size: number): Promise<void> {
  const { ctx, store, close } = await open(dir);
  const all = await worlds(ctx, store);
  if (size > 0) await fill(store, all, size, log);
  const snapshot: Snapshot = { signingKeys: ctx.signingKeys, worlds: all };
  writeFileSync(join(dir, "snapshot.json"), JSON.stringify(snapshot));
  await close();
  log(`made ${dir}: ${size} runs and entries`);
}

async function settle(dir: string): Promise<void> {
  const { store, close } = await open(dir);
  const seconds = await spaceReuseCaughtUp(storeFixtures(store), log);
  await close();
  log(`space reuse caught up in ${seconds} s`);
}

/** The median trials at 16 and 64 callers on `dir` (a new empty database when null). */
async function trials(dir: string | null, n: number) {
  const empty = dir === null;
  const at = dir ?? mkdtempSync(join(tmpdir(), "runhook-snapshot-empty-"));
  const snapshot = empty ? null : (JSON.parse(readFileSync(join(at, "snapshot.json"), "utf8")) as Snapshot);
  const { ctx, store, close } = await open(at, snapshot?.signingKeys);
  try {
    const w = snapshot ? snapshot.worlds[0]! : (await worlds(ctx, store))[0]!;
    const server = await spawnFor(ctx, "grow", "start", DB_NAME);
    try {
      const trial = async (c: number) => {
        const t = await acceptTrial(ctx, store, server, w, c, 10_000);
        log(`${empty ? "empty" : dir} c=${c}: ${JSON.stringify(t)}`);
        return t;
      };
      await trial(16); // the JIT's warm-up, not counted
      const at16 = [];
      const at64 = [];
      for (let i = 0; i < n; i++) {
        at16.push(await trial(16));
        at64.push(await trial(64));
      }
      // Then what the growth bench measures after its accept trials (pick-up, a burst, the
      // reads), with the live pages the space reuse moved meanwhile.
      const moved = async () => (await commitStats(storeFixtures(store), false))?.file.movedBytes ?? 0;
      const movedBefore = await moved();
      const after = await afterAccepts(store, server, w, GROWTH_EFFORT.full);
      const javaRssMb = ctx.javaPid ? rssMb(ctx.javaPid) : null;
      log(
        `${empty ? "empty" : dir} after the trials: ${JSON.stringify(after)}, ${Math.round(((await moved()) - movedBefore) / 1024)} KB moved, Java RSS ${javaRssMb} MB`,
      );
      // The same once the space reuse has caught up: what the reads cost without it beside them.
      await spaceReuseCaughtUp(storeFixtures(store), log);
      await sleep(60_000); // the API token's 600 calls a minute, which the first pass spent
      const settled = await afterAccepts(store, server, w, GROWTH_EFFORT.full);
      log(`${empty ? "empty" : dir} again, the space reuse caught up: ${JSON.stringify(settled)}`);
      return { c16: medianTrial(at16), c64: medianTrial(at64), after, settled, javaRssMb };
    } finally {
      await server.stop();
    }
  } finally {
    // An empty run's tenants and files go; a snapshot's stay (the runhook process's scratch dir goes at exit).
    if (empty) for (const cleanup of ctx.cleanups) await cleanup().catch(() => undefined);
    await close();
    if (empty) rmSync(at, { recursive: true, force: true });
  }
}

async function measure(dir: string, n: number): Promise<void> {
  const empty = await trials(null, n);
  const grown = await trials(dir, n);
  const r16 = ratio(grown.c16.perSec, empty.c16.perSec);
  const r64 = ratio(grown.c64.perSec, empty.c64.perSec);
  log(`c=16: ${grown.c16.perSec} / ${empty.c16.perSec} a second (${r16}×); c=64: ${grown.c64.perSec} / ${empty.c64.perSec} (${r64}×)`);
  process.stdout.write(`${JSON.stringify({ empty, grown, acceptRatio16: r16, acceptRatio64: r64 })}\n`);
}

const [command, dir, n] = process.argv.slice(2);
if (!dir || !["make", "settle", "measure"].includes(command ?? "")) {
  process.stderr.write("usage: npm run bench:snapshot -- <make|settle|measure> <dir> [size | trials]\n");
  process.exit(2);
}
if (command === "make") await make(dir, n ? Number(n) : 1_000_000);
else if (command === "settle") await settle(dir);
else await measure(dir, n ? Number(n) : 3);
process.exit(0);
