// The embedded file backend's data file and restart time after many runs: N runs written
// through runhook's store (runs.create, 64 at a time), then the Java database killed with
// SIGKILL and started again (a crash restart), then every run finished (runs.markSucceeded, as an
// executor's last step does, on _id alone: mongo-java-server answers a query on more fields
// than an index's by a scan), then a clean stop and start. Restart time: process start →
// "listening" (startEmbeddedServer). Writes bench/results/<date>-restart.md.
//   node --import tsx bench/restart.ts [--runs=100000] [--backend=file|file-ack-before-commit]
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, homedir, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { newRunDoc } from "../src/domain/runs/model.js";
import { startEmbeddedServer, type EmbeddedServer } from "../src/embedded/index.js";
import { ensureIndexes, openStore, type Store } from "../src/store/index.js";
import { BACKENDS } from "./scenarios/backends.js";

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const runs = Number(arg("runs") ?? 100_000);
const backend = BACKENDS.find((b) => b.name === (arg("backend") ?? "file") && b.persistent);
if (!backend) throw new Error("--backend must be file or file-ack-before-commit");
const cacheDir = process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
const dataDir = mkdtempSync(join(tmpdir(), "runhook-restart-bench-"));
const file = join(dataDir, "mongo", "runhook.mv");
const log = (m: string) => console.log(`[restart] ${m}`);
const fileMb = () => Math.round((statSync(file).size / 1048576) * 10) / 10;
const rows: string[] = [];
const row = (what: string, extra = "") => {
  rows.push(`| ${what} | ${fileMb()} | ${extra} |`);
  log(`${what}: file ${fileMb()} MB ${extra}`);
};

async function start(): Promise<{ server: EmbeddedServer; store: Store; ms: number; close(): Promise<void> }> {
  const t = performance.now();
  const server = await startEmbeddedServer({ noTableScan: true, dataDir, cacheDir, persistent: true, javaOptions: [...backend!.javaOptions], progress: log });
  const ms = Math.round(performance.now() - t);
  const store = await openStore(server.uri, { dbName: "runhook" });
  await ensureIndexes(store);
  return { server, store, ms, close: () => store.close() };
}

/** `fn(i)` for i < n, 64 at a time; returns calls per second. */
async function pool(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const t = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < n) {
        const i = next++;
        await fn(i);
        if (i % 10_000 === 0 && i) log(`${i}… (file ${fileMb()} MB, ${Math.round(performance.now() - t)} ms)`);
      }
    }),
  );
  return Math.round(n / ((performance.now() - t) / 1000));
}

function runDoc() {
  const step = { type: "load_record" } as const;
  const id = () => randomUUID();
  return newRunDoc({
    workflowId: id(),
    workflowVersion: 1,
    steps: [step, step, step],
    renderingId: id(),
    organizationId: id(),
    projectId: id(),
    environmentId: id(),
    collectionId: id(),
    collection: "customers",
    recordId: id(),
    userId: id(),
    userEmail: "someone@example.com",
    tokenId: id(),
    via: "webhook",
  });
}

async function main() {
  log(
    `${backend!.name}: ${backend!.what}; ${runs} runs; ${cpus().length} CPUs, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(", ")}`,
  );
  let s = await start();
  const ids: string[] = [];
  const createRate = await pool(runs, async () => {
    const r = runDoc();
    ids.push(r._id);
    await s.store.runs.create(r);
  });
  row(`${runs} runs created (QUEUED), server running`, `${createRate} runs.create/s`);
  const { pid } = JSON.parse(readFileSync(join(dataDir, "mongo", "running.json"), "utf8")) as { pid: number };
  process.kill(pid, "SIGKILL");
  await s.close();
  await s.server.stop();
  s = await start();
  row("after SIGKILL of the database: restart", `restart ${s.ms} ms`);
  const finishRate = await pool(ids.length, (i) => s.store.runs.markSucceeded(ids[i]!, 3));
  row(`${runs} runs finished (SUCCEEDED), server running`, `${finishRate} runs.markSucceeded/s`);
  await s.close();
  const t = performance.now();
  await s.server.stop();
  row("after a clean stop (closes, compacts the file if its live data is small)", `stop ${Math.round(performance.now() - t)} ms`);
  s = await start();
  row("clean restart", `restart ${s.ms} ms`);
  await s.close();
  await s.server.stop();
  const md = [
    `# Embedded file backend: file size and restart time after ${runs} runs — ${new Date().toISOString()}`,
    "",
    `Backend: ${backend!.name} (${backend!.what}). ${cpus().length} CPUs; load average at the end ${loadavg()
      .map((x) => x.toFixed(1))
      .join(", ")}. \`node --import tsx bench/restart.ts --runs=${runs} --backend=${backend!.name}\``,
    "",
    "| step | file MB | |",
    "|---|---:|---|",
    ...rows,
    "",
  ].join("\n");
  mkdirSync(join(import.meta.dirname, "results"), { recursive: true });
  const out = join(import.meta.dirname, "results", `${new Date().toISOString().slice(0, 19).replace(/:/g, "-")}-restart-${backend!.name}.md`);
  writeFileSync(out, md);
  console.log(`\n${md}\n(written ${out})`);
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => rmSync(dataDir, { recursive: true, force: true }));
