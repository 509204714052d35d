// What every scenario shares: the database server, env for the runhook processes, and the
// fixtures, which are made through the AdminService (in process, on the scenario's own
// database) the way an operator makes them, not written into the collections by hand.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type Config } from "../../src/config.js";
import { ensureIndexes, openStore as openStoreAt, storeFixtures, type Store } from "../../src/store/index.js";
import { createWorld, inProcessApp, type World, type WorldOptions } from "../../fixtures/world.js";
import { LIMITS_OUT_OF_REACH, WEBHOOK_RATE_LIMIT_PER_MINUTE } from "./limits.js";
import { spawnRunhook, type Proc } from "./procs.js";

export interface BenchContext {
  quick: boolean;
  /** Base URI of the database server (no database path). */
  uri: string;
  /** Prefix of every database this run creates (all dropped at the end). */
  runTag: string;
  /** Directory for CPU profiles, when --profile. */
  profileDir?: string;
  /** Which scenario's server is profiled ("all" or a scenario name). */
  profile?: string;
  signingKeys: string;
  /** pid of the embedded Java database server (absent with MONGODB_URI). */
  javaPid?: number;
  log(msg: string): void;
  /** Registered cleanups (databases to drop, clients to close), run at the end. */
  cleanups: (() => Promise<void>)[];
}

export const BOOTSTRAP_SECRET = "bench-bootstrap-secret-0123456789";

export function newSigningKeys(): string {
  return `k1:${randomBytes(32).toString("base64url")}`;
}

/** `uri` with its path set to `dbName` (and `query` appended to its options). */
export function uriFor(base: string, dbName: string, query = ""): string {
  const m = /^(mongodb(?:\+srv)?:\/\/[^/?]*)(\/[^?]*)?(\?.*)?$/.exec(base);
  if (!m) throw new Error(`bad MONGODB_URI ${base}`);
  const q = [m[3]?.slice(1), query].filter(Boolean).join("&");
  return `${m[1]}/${dbName}${q ? `?${q}` : ""}`;
}

/**
 * The runhook processes' scratch directories (a few KB each), removed when this process exits
 * (a signal's cleanup ends in an exit too), not by the scenarios' cleanups, which a snapshot
 * skips to keep its tenants.
 */
const scratchDirs = new Set<string>();
process.once("exit", () => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Env of a runhook process on `dbName`: ports 0, loopback, the run's signing keys, no demo,
 * 100 ms executor poll, every limit out of reach (limits.ts).
 */
export function serverEnv(ctx: BenchContext, dbName: string, extra: Record<string, string> = {}): Record<string, string> {
  const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-srv-"));
  scratchDirs.add(dataDir);
  return {
    MONGODB_URI: uriFor(ctx.uri, dbName),
    PORT: "0",
    GRPC_PORT: "0",
    HOST: "127.0.0.1",
    RUNHOOK_DATA_DIR: dataDir,
    RUNHOOK_SIGNING_KEYS: ctx.signingKeys,
    RUNHOOK_BOOTSTRAP_SECRET: BOOTSTRAP_SECRET,
    RUNHOOK_DEMO: "false",
    RUNHOOK_EXECUTOR_POLL_MS: "100",
    LOG_LEVEL: "info",
    ...LIMITS_OUT_OF_REACH,
    ...extra,
  };
}

/** The Config a runhook process on `dbName` would load (for in-process servers and services). */
export function serverConfig(ctx: BenchContext, dbName: string, extra: Record<string, string> = {}): Config {
  return loadConfig({ ...process.env, ...serverEnv(ctx, dbName, extra) });
}

/** Spawns a server (or worker), CPU-profiled when --profile names this scenario. */
export function spawnFor(ctx: BenchContext, scenario: string, mode: "start" | "worker", dbName: string, extra: Record<string, string> = {}): Promise<Proc> {
  const profiled = ctx.profileDir && (ctx.profile === "all" || ctx.profile === scenario) && mode === "start";
  return spawnRunhook({ mode, env: serverEnv(ctx, dbName, extra), cpuProfDir: profiled ? join(ctx.profileDir!, scenario) : undefined });
}

/** The store on `dbName`, with every runhook index; the database is dropped at the end. */
export async function openStore(ctx: BenchContext, dbName: string, query = ""): Promise<Store> {
  const store = await openStoreAt(uriFor(ctx.uri, dbName, query), { dbName });
  await ensureIndexes(store);
  ctx.cleanups.push(async () => {
    await storeFixtures(store)
      .dropDatabase()
      .catch(() => {});
    await store.close().catch(() => {});
  });
  return store;
}

/** A tenant of the benchmark: the tests' world (fixtures/world.ts). */
export type BenchWorld = World;

/** Deps of an in-process service set on `store` (no servers): what the AdminService needs. */
export function servicesOn(ctx: BenchContext, store: Store): ReturnType<typeof inProcessApp> {
  const app = inProcessApp(store, serverConfig(ctx, store.databaseName));
  app.stop(); // no database monitor for a benchmark's fixtures
  return app;
}

/**
 * A tenant made through the AdminService (fixtures/world.ts) on `store`, with a webhook rate
 * limit of 10,000,000 a minute unless given: above the API's maximum, so that the limiter never
 * refuses during a load phase (it still runs: its cost is part of every accept). Its data
 * database is dropped at the end.
 */
export async function benchWorld(ctx: BenchContext, store: Store, opts: WorldOptions = {}): Promise<BenchWorld> {
  const w = await createWorld(servicesOn(ctx, store), { rateLimitPerMinute: WEBHOOK_RATE_LIMIT_PER_MINUTE, ...opts });
  ctx.cleanups.push(() =>
    storeFixtures(store)
      .dropDataDatabase(w.dataDatabase)
      .catch(() => undefined),
  );
  return w;
}
