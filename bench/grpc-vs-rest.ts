// Where native gRPC's TriggerRun spends more than the REST webhook route: the same accepts,
// REST only, gRPC through @grpc/grpc-js only, then gRPC framed by hand on a plain node:http2
// session only, each on a fresh CPU-profiled server (`node --cpu-prof`), for --rounds rounds.
// Prints, per accepted call, the CPU the server used (/proc) and the profiled self time by
// package, REST against gRPC (grpc-js), largest differences first.
//   node --import tsx bench/grpc-vs-rest.ts [--concurrency=64] [--seconds=6] [--rounds=1]
// Profiles: bench/profiles/<date>-grpc-vs-rest/ (git ignored). Profiled time includes time the
// process waited for a CPU inside a sample on a loaded machine: compare the two columns, not
// the absolute figures; the /proc CPU per call is exact.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { Pool } from "undici";
import { benchWorld, openStore, spawnFor } from "./lib/context.js";
import { ROOT } from "./lib/procs.js";
import { standalone } from "./lib/standalone.js";
import { summarize } from "./profile-summary.js";
import { fmtCpu, grpcTrigger, phase, rawHttp2Trigger, restTrigger } from "./scenarios/webhook.js";

const arg = (name: string, def: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? def);
const c = arg("concurrency", 64);
const seconds = arg("seconds", 6);
const rounds = arg("rounds", 1);
const stamp = new Date().toISOString().slice(0, 19).replace(/:/g, "-");

await standalone("grpc-vs-rest", async (ctx) => {
  ctx.profileDir = join(ROOT, "bench/profiles", `${stamp}-grpc-vs-rest`);
  const kinds = ["rest", "grpc", "http2"] as const;
  const calls: Record<string, number> = { rest: 0, grpc: 0, http2: 0 };
  const cpu: Record<string, number> = { rest: 0, grpc: 0, http2: 0 };
  const rate: Record<string, number[]> = { rest: [], grpc: [], http2: [] };
  const byPlace: Record<string, Map<string, number>> = { rest: new Map(), grpc: new Map(), http2: new Map() };
  for (let r = 0; r < rounds; r++) {
    for (const kind of kinds) {
      const scenario = `${kind}-${r}`;
      ctx.profile = scenario;
      const dbName = `${ctx.runTag}_${kind}_${r}`;
      const store = await openStore(ctx, dbName);
      const w = await benchWorld(ctx, store);
      const server = await spawnFor(ctx, scenario, "start", dbName, { RUNHOOK_EXECUTOR: "false" });
      let fn: (i: number) => Promise<{ ok: boolean; status: string | number }>;
      let close: () => Promise<void>;
      if (kind === "rest") {
        const pool = new Pool(server.baseUrl!, { connections: c, pipelining: 1 });
        const post = restTrigger(pool, w, 202);
        fn = (i) => post(`rest-${i}`);
        close = () => pool.close();
      } else if (kind === "http2") {
        const h2 = rawHttp2Trigger(server.grpcAddr!, w);
        fn = (i) => h2.call(`h2-${i}`);
        close = () => h2.close();
      } else {
        const client = new grpc.Client(server.grpcAddr!, grpc.credentials.createInsecure());
        const call = grpcTrigger(client, w);
        fn = (i) => call(`grpc-${i}`);
        close = async () => client.close();
      }
      const p = await phase({ server: server.pid, java: ctx.javaPid }, { concurrency: c, durationMs: seconds * 1000, warmupPerWorker: 5, fn });
      rate[kind]!.push(p.okPerSec);
      ctx.log(`${kind} c=${c}: ${p.okPerSec}/s p50 ${p.p50Ms} p99 ${p.p99Ms} ms; ${fmtCpu(p)}`);
      await close();
      await server.stop(); // writes the profile
      // The profile covers the whole process life: count the warm-up calls too.
      const n = p.ok + 5 * c;
      calls[kind]! += n;
      cpu[kind]! += p.cpuMs.server ?? 0;
      const dir = join(ctx.profileDir, scenario);
      const file = readdirSync(dir)
        .filter((f) => f.endsWith(".cpuprofile"))
        .sort()[0];
      if (file) for (const row of summarize(join(dir, file), 10_000).byPlace) byPlace[kind]!.set(row.place, (byPlace[kind]!.get(row.place) ?? 0) + row.ms);
      calls[`${kind}Measured`] = (calls[`${kind}Measured`] ?? 0) + p.ok;
    }
  }
  const per = (k: string) => (cpu[k]! / calls[`${k}Measured`]!).toFixed(3);
  const mean = (k: string) => (rate[k]!.reduce((a, b) => a + b, 0) / rate[k]!.length).toFixed(1);
  ctx.log(
    `\nserver CPU per accepted call (/proc, measured periods): REST ${per("rest")} ms, gRPC (grpc-js) ${per("grpc")} ms, gRPC (node:http2) ${per("http2")} ms`,
  );
  ctx.log(`accepts/s (mean of rounds): REST ${mean("rest")}, gRPC (grpc-js) ${mean("grpc")}, gRPC (node:http2) ${mean("http2")}`);
  ctx.log(`\nprofiled self time per call (ms), by package, largest differences first (profiles in ${ctx.profileDir}):\n`);
  ctx.log("| gRPC (grpc-js) − REST | REST | gRPC (grpc-js) | gRPC (node:http2) | where |\n|---:|---:|---:|---:|---|");
  const places = new Set(kinds.flatMap((k) => [...byPlace[k]!.keys()]));
  const perCall = (kind: string, place: string) => (byPlace[kind]!.get(place) ?? 0) / calls[kind]!;
  const rows = [...places].map((k) => ({ k, rest: perCall("rest", k), grpc: perCall("grpc", k), http2: perCall("http2", k) }));
  for (const r of rows.sort((x, y) => Math.abs(y.grpc - y.rest) - Math.abs(x.grpc - x.rest)).slice(0, 25)) {
    ctx.log(`| ${(r.grpc - r.rest).toFixed(3)} | ${r.rest.toFixed(3)} | ${r.grpc.toFixed(3)} | ${r.http2.toFixed(3)} | ${r.k} |`);
  }
});
process.exit(0);
