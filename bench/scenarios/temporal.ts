// `npm run bench -- --vs temporal`: an anchor in the same run. Temporal's dev server (its CLI,
// built once from the Go module proxy into the cache) on a SQLite file, against runhook on the
// same machine on the store `npm start` uses, the embedded file backend (or MONGODB_URI), so
// that both answer only what is on disk: Temporal's StartWorkflowExecution (conflict policy
// FAIL, a distinct workflow id per call, no worker) and runhook's webhook and TriggerRun (a
// distinct record per call), at the same concurrencies, from the same load generator (grpc-js
// for both gRPC servers), in interleaved slices. Prints each level's rates and the ratios.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { Pool } from "undici";
import { benchWorld, openStore, spawnFor, type BenchContext } from "../lib/context.js";
import { openBenchDatabase } from "../lib/database.js";
import { grpcLimitMet } from "../lib/limits.js";
import { ratio, sleep, type Outcome } from "../lib/load.js";
import { freePort } from "../../test/helpers/load.js";
import { fmtCpu, grpcTrigger, interleaved, restTrigger, type Phase } from "./webhook.js";

/** The CLI release whose dev server is Temporal 1.29.1. */
const TEMPORAL_CLI = { module: "github.com/temporalio/cli/cmd/temporal", version: "v1.5.1" };
const START_PATH = "/temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution";

export interface TemporalLevel {
  concurrency: number;
  webhook: Phase;
  grpc: Phase;
  temporal: Phase;
  webhookVsTemporal: number | null;
  grpcVsTemporal: number | null;
}

export interface TemporalResult {
  temporal: string;
  /** runhook's database. */
  database: string;
  levels: TemporalLevel[];
}

/** The Temporal CLI binary, built with `go install` into the cache the first time. */
function temporalBinary(ctx: BenchContext, cacheDir: string): string {
  const dir = join(cacheDir, `temporal-cli-${TEMPORAL_CLI.version}`);
  const bin = join(dir, "temporal");
  if (existsSync(bin)) return bin;
  if (spawnSync("go", ["version"]).status !== 0) throw new Error("--vs temporal builds the Temporal CLI with Go, and `go` was not found on PATH");
  mkdirSync(dir, { recursive: true });
  ctx.log(`  building the Temporal CLI ${TEMPORAL_CLI.version} from the Go module proxy into ${dir} (once; a few minutes; go's own lines follow)…`);
  const t = Date.now();
  // go prints each module it downloads, and every error, on stderr: the build's progress as it goes.
  const built = spawnSync("go", ["install", `${TEMPORAL_CLI.module}@${TEMPORAL_CLI.version}`], {
    env: { ...process.env, GOBIN: dir, GOFLAGS: "-mod=mod" },
    stdio: ["ignore", "ignore", "inherit"],
    timeout: 30 * 60_000,
  });
  if (built.status !== 0 || !existsSync(bin)) throw new Error(`go install ${TEMPORAL_CLI.module}@${TEMPORAL_CLI.version} failed (go's output is above)`);
  ctx.log(`  built in ${Math.round((Date.now() - t) / 1000)} s`);
  return bin;
}

// StartWorkflowExecutionRequest, encoded by hand (no Temporal SDK): the field numbers of
// temporal/api/workflowservice/v1/request_response.proto.
const varint = (v: number) => {
  const out: number[] = [];
  for (; v > 0x7f; v >>>= 7) out.push((v & 0x7f) | 0x80);
  out.push(v);
  return Buffer.from(out);
};
const bytesField = (field: number, b: Buffer) => Buffer.concat([varint((field << 3) | 2), varint(b.length), b]);
const stringField = (field: number, s: string) => bytesField(field, Buffer.from(s));
const CONFLICT_POLICY_FAIL = Buffer.concat([varint(22 << 3), varint(1)]);

function startWorkflowRequest(workflowId: string): Buffer {
  return Buffer.concat([
    stringField(1, "default"), // namespace
    stringField(2, workflowId),
    bytesField(3, stringField(1, "bench-workflow")), // workflow_type.name
    bytesField(4, stringField(1, "bench-queue")), // task_queue.name
    stringField(9, "runhook-bench"), // identity
    stringField(10, randomUUID()), // request_id
    CONFLICT_POLICY_FAIL, // workflow_id_conflict_policy
  ]);
}

function temporalStart(client: grpc.Client) {
  const identity = (b: Buffer) => b;
  return (workflowId: string) =>
    new Promise<Outcome>((resolve, reject) =>
      client.makeUnaryRequest(START_PATH, identity, identity, startWorkflowRequest(workflowId), new grpc.Metadata(), (err) => {
        const met = grpcLimitMet(err, "Temporal's dev server");
        if (met) return reject(met);
        resolve(err ? { ok: false, status: `grpc-${err.code}` } : { ok: true, status: "ok" });
      }),
    );
}

/** `temporal server start-dev` on a SQLite file; resolves once it starts workflows. */
async function startTemporal(ctx: BenchContext, bin: string, dbFile: string): Promise<{ child: ChildProcess; client: grpc.Client }> {
  const port = await freePort();
  const child = spawn(
    bin,
    ["server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", String(port), "--db-filename", dbFile, "--log-level", "error"],
    {
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  ctx.cleanups.push(async () => {
    if (child.exitCode !== null) return;
    child.kill("SIGTERM");
    await Promise.race([new Promise((r) => child.once("exit", r)), sleep(10_000).then(() => child.kill("SIGKILL"))]);
  });
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const start = temporalStart(client);
  for (const end = Date.now() + 90_000; ; await sleep(500)) {
    if (child.exitCode !== null) throw new Error(`temporal server start-dev exited with ${child.exitCode}:\n${stderr}`);
    const probe = await start(`probe-${randomUUID()}`);
    if (probe.ok) break;
    if (Date.now() > end) throw new Error(`temporal server start-dev did not start workflows within 90 s (last: ${probe.status}):\n${stderr}`);
  }
  return { child, client };
}

export async function temporalScenario(
  ctx: BenchContext,
  o: { cacheDir: string; dataDir: string; concurrencies: number[]; durationMs: number; repeat: number },
): Promise<TemporalResult> {
  const bin = temporalBinary(ctx, o.cacheDir);
  const version = spawnSync(bin, ["--version"], { encoding: "utf8" }).stdout.trim();
  const temporal = await startTemporal(ctx, bin, join(o.dataDir, "temporal.sqlite"));
  ctx.log(`  ${version}: dev server up (pid ${temporal.child.pid}, SQLite file)`);

  // runhook on the file backend `npm start` uses, in a context of its own.
  const fileDir = join(o.dataDir, "runhook-file");
  mkdirSync(fileDir, { recursive: true });
  const database = await openBenchDatabase(fileDir, ctx.log, { persistent: true });
  ctx.cleanups.push(() => database.stop());
  const own: BenchContext = { ...ctx, uri: database.uri, javaPid: database.javaPid };
  const dbName = `${ctx.runTag}_vs`;
  const store = await openStore(own, dbName);
  const w = await benchWorld(own, store);
  const server = await spawnFor(own, "vs-temporal", "start", dbName, { RUNHOOK_EXECUTOR: "false" });
  ctx.log(`  runhook up (pid ${server.pid}) on ${database.description}`);
  const client = new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure());
  const pids = { server: server.pid, java: database.javaPid, temporal: temporal.child.pid };
  const levels: TemporalLevel[] = [];
  try {
    const trigger = grpcTrigger(client, w);
    const start = temporalStart(temporal.client);
    for (const c of o.concurrencies) {
      const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
      try {
        const post = restTrigger(pool, w, 202);
        const r = await interleaved(
          pids,
          c,
          [
            { name: "webhook", fn: (i) => post(`vs-rest-${c}-${i}-${randomUUID()}`) },
            { name: "grpc", fn: (i) => trigger(`vs-grpc-${c}-${i}-${randomUUID()}`) },
            { name: "temporal", fn: (i) => start(`vs-${c}-${i}-${randomUUID()}`) },
          ],
          { repeat: o.repeat, durationMs: o.durationMs, warmupPerWorker: c === 1 ? 20 : 2 },
        );
        const level = {
          concurrency: c,
          webhook: r.webhook!,
          grpc: r.grpc!,
          temporal: r.temporal!,
          webhookVsTemporal: ratio(r.webhook!.okPerSec, r.temporal!.okPerSec),
          grpcVsTemporal: ratio(r.grpc!.okPerSec, r.temporal!.okPerSec),
        };
        levels.push(level);
        for (const k of ["webhook", "grpc", "temporal"] as const) {
          const p = level[k];
          ctx.log(
            `  c=${c} ${k}: ${p.okPerSec}/s p50 ${p.p50Ms} p99 ${p.p99Ms} ms ${fmtCpu(p)}${Object.keys(p.other).length ? ` other ${JSON.stringify(p.other)}` : ""}`,
          );
        }
        ctx.log(`  c=${c}: runhook webhook ÷ Temporal ${level.webhookVsTemporal}, runhook TriggerRun ÷ Temporal ${level.grpcVsTemporal}`);
      } finally {
        await pool.close();
      }
    }
  } finally {
    client.close();
    temporal.client.close();
  }
  return { temporal: version, database: database.description, levels };
}

export function renderTemporalMarkdown(r: TemporalResult, meta: { date: string; commit: string; dirty: boolean }): string {
  const out = [
    `# runhook against Temporal — ${meta.date}`,
    "",
    `${r.temporal}, \`server start-dev\` on a SQLite file: StartWorkflowExecution with conflict policy FAIL, a distinct workflow id per call, no worker. runhook (commit ${meta.commit}${meta.dirty ? " + uncommitted changes" : ""}, ${r.database}, executors off): the webhook (undici) and TriggerRun (grpc-js), a distinct record per call. One load generator process, grpc-js for both gRPC servers; the three loads of a level in interleaved slices.`,
    "",
    "| conc. | webhook/s | p99 ms | TriggerRun/s | p99 ms | Temporal start/s | p99 ms | webhook ÷ Temporal | TriggerRun ÷ Temporal | CPU ms/call (server) webhook / TriggerRun / Temporal |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const l of r.levels) {
    out.push(
      `| ${l.concurrency} | ${l.webhook.okPerSec} | ${l.webhook.p99Ms} | ${l.grpc.okPerSec} | ${l.grpc.p99Ms} | ${l.temporal.okPerSec} | ${l.temporal.p99Ms} | ${l.webhookVsTemporal ?? "–"} | ${l.grpcVsTemporal ?? "–"} | ${l.webhook.cpuMsPerOk.server ?? "–"} / ${l.grpc.cpuMsPerOk.server ?? "–"} / ${l.temporal.cpuMsPerOk.temporal ?? "–"} |`,
    );
  }
  return `${out.join("\n")}\n`;
}
