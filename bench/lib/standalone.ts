// Runs one scenario on its own (bench/pickup.ts, bench/logs.ts): the database server of
// bench/lib/database.ts in a temp dir, a context, and every cleanup at the end.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newSigningKeys, type BenchContext } from "./context.js";
import { openBenchDatabase } from "./database.js";
import { liveProcs } from "./procs.js";

export async function standalone<T>(name: string, fn: (ctx: BenchContext) => Promise<T>): Promise<T> {
  const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-"));
  const log = (m: string) => process.stdout.write(`${m}\n`);
  const ctx: BenchContext = {
    quick: process.argv.includes("--quick"),
    uri: "",
    runTag: `bench_${randomBytes(3).toString("hex")}`,
    signingKeys: newSigningKeys(),
    log,
    cleanups: [],
  };
  const database = await openBenchDatabase(dataDir, log);
  ctx.uri = database.uri;
  ctx.javaPid = database.javaPid;
  log(`${name}: ${database.description}`);
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      await Promise.allSettled(liveProcs().map((p) => p.stop()));
      for (const c of ctx.cleanups.splice(0).reverse()) await c().catch(() => {});
      await database.stop();
      rmSync(dataDir, { recursive: true, force: true });
    })());
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => void cleanup().finally(() => process.exit(130)));
  try {
    return await fn(ctx);
  } finally {
    await cleanup();
  }
}
