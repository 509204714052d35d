// Starts the real runhook server against the test database: in-process (fast) or as a
// separate process (for multi-instance and crash tests).
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, beforeEach, inject } from "vitest";
import { configuredSecrets, loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/lib/logging.js";
import { startRunhook, type Runhook } from "../../src/main.js";
import { seedDemo, type SeedOutput } from "../../src/cli/demo.js";
import { ensureIndexes, openStore, storeFixtures, type Store } from "../../src/store/index.js";
import { inProcessApp, type App } from "../../fixtures/world.js";
import { collectLogs, type Logs } from "./load.js";

export const ROOT = resolve(import.meta.dirname, "../..");
export const BOOTSTRAP_SECRET = "test-bootstrap-secret-0123456789";
const SIGNING_KEYS = `k1:${Buffer.alloc(32, 7).toString("base64url")}`;

/** A fresh database name, so every test file (or test) has its own. */
export function testDbName(): string {
  return `t_${randomBytes(6).toString("hex")}`;
}

/** The test server URI with its path set to `dbName`. */
export function uriFor(dbName: string): string {
  const base = inject("mongoUri");
  const m = /^(mongodb(?:\+srv)?:\/\/[^/?]*)(\/[^?]*)?(\?.*)?$/.exec(base);
  if (!m) throw new Error(`bad MONGODB_URI ${base}`);
  return `${m[1]}/${dbName}${m[3] ?? ""}`;
}

/** Per-token limits of the public API that no test reaches: the highest each variable takes. */
export const API_RATE_LIMITS_OUT_OF_REACH = {
  RUNHOOK_API_RATE_LIMIT: "1000000",
  RUNHOOK_API_RATE_LIMIT_HOURLY: "60000000",
  RUNHOOK_API_RATE_LIMIT_DAILY: "1440000000",
} as const;

export function testEnv(dbName: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    MONGODB_URI: uriFor(dbName),
    PORT: "0",
    GRPC_PORT: "0",
    HOST: "127.0.0.1",
    // Under the run's directory, which the global setup removes at the end.
    RUNHOOK_DATA_DIR: mkdtempSync(join(inject("serversDir"), "srv-")),
    RUNHOOK_SIGNING_KEYS: SIGNING_KEYS,
    RUNHOOK_BOOTSTRAP_SECRET: BOOTSTRAP_SECRET,
    RUNHOOK_DEMO: "false",
    RUNHOOK_EXECUTOR_POLL_MS: "100",
    // A server that starts an embedded database of its own refuses scans there too.
    RUNHOOK_EMBEDDED_NOTABLESCAN: "true",
    // No log digest is signed unless a test asks (its own interval, or a pass it runs): exports
    // then hold exactly the entries the tests expect.
    RUNHOOK_LOG_DIGEST_INTERVAL_MS: "86400000",
    // Tests make many 401s from one address; the throttle's own test sets its limit.
    RUNHOOK_AUTH_FAILURE_LIMIT: "1000000",
    // The public API's per-token limits (60 a minute, 1,000 an hour, 10,000 a day by default) out
    // of reach, organization API tokens' with them; the tests of these limits set their own.
    ...API_RATE_LIMITS_OUT_OF_REACH,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    ...extra,
  };
}

export interface TestServer extends Runhook {
  gateway: NonNullable<Runhook["gateway"]>;
  baseUrl: string;
  grpcAddr: string;
  dbName: string;
}

/** The real server, in this process, on its own database (or `dbName`). */
export async function startServer(opts: { dbName?: string; env?: Record<string, string> } = {}): Promise<TestServer> {
  const dbName = opts.dbName ?? testDbName();
  const env = { ...process.env, ...testEnv(dbName, opts.env) };
  const config = loadConfig(env);
  const rh = await startRunhook(config, { mode: "server", logger: createLogger(env.LOG_LEVEL ?? "silent", { secrets: configuredSecrets(config) }) });
  return { ...rh, gateway: rh.gateway!, baseUrl: rh.baseUrl!, grpcAddr: rh.grpcAddr!, dbName };
}

export interface ChildServer {
  baseUrl: string;
  grpcAddr: string;
  child: ChildProcess;
  /** Everything the process printed, from its first line (pino's JSON lines parsed). */
  logs: Logs;
  /** Graceful stop (SIGTERM) and wait for exit. */
  stop(): Promise<void>;
  /** kill -9. */
  kill(): Promise<void>;
}

/** `runhook start` (or `worker`) as a separate process on database `dbName`. */
export async function spawnServer(dbName: string, opts: { mode?: "start" | "worker"; env?: Record<string, string> } = {}): Promise<ChildServer> {
  const mode = opts.mode ?? "start";
  const child = spawn(process.execPath, [join(ROOT, "bin/runhook.js"), mode], {
    cwd: ROOT,
    env: { ...process.env, ...testEnv(dbName, { LOG_LEVEL: "info", ...opts.env }) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs = collectLogs(child);
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  let out = "";
  const ready = new Promise<{ http?: number; grpc?: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 60_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      for (const line of out.split("\n")) {
        if (line.includes('"runhook listening"') || (mode === "worker" && line.includes('"executors started"'))) {
          clearTimeout(timer);
          const j = JSON.parse(line) as { http?: number; grpc?: number };
          resolve(j);
        }
      }
    });
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
  const ports = await ready;
  return {
    baseUrl: `http://127.0.0.1:${ports.http}`,
    grpcAddr: `127.0.0.1:${ports.grpc}`,
    child,
    logs,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
    async kill() {
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

export const uuid = () => randomUUID();

/** The demo world (as `runhook seed --json` prints it) on `server`'s database. */
export function seed(server: TestServer): Promise<SeedOutput> {
  return seedDemo(server.deps, server.services);
}

/** Runhook's services on `store` in this process (no server, no executor), configured as the tests' servers are. */
export function testAppOn(store: Store): TestApp {
  return inProcessApp(store, loadConfig({ ...process.env, ...testEnv(store.databaseName) }));
}

/** A fresh, indexed database `dbName` and runhook's services on it in this process, with no server and no executor. */
export async function openTestApp(dbName: string): Promise<TestApp> {
  const store = await openStore(uriFor(dbName), { dbName });
  await ensureIndexes(store);
  return testAppOn(store);
}

export type TestApp = ReturnType<typeof inProcessApp>;

/** Runhook's services on a fresh database of their own for the length of `fn` (no executor polls it); the database is dropped after. */
export async function withTestApp<T>(fn: (app: TestApp, store: Store) => Promise<T>): Promise<T> {
  const app = await openTestApp(testDbName());
  try {
    return await fn(app, app.deps.store);
  } finally {
    app.stop();
    await storeFixtures(app.deps.store)
      .dropDatabase()
      .catch(() => {});
    await app.deps.store.close();
  }
}

/** What databasePerTest hands out: the current test's store, services in process on it (for fixtures), and a spawner of server processes on it. */
export interface DatabasePerTest {
  readonly store: Store;
  readonly app: App;
  readonly dbName: string;
  spawn(opts?: { mode?: "start" | "worker"; env?: Record<string, string> }): Promise<ChildServer>;
}

/**
 * For files whose tests each need a database of their own (so that one test's leftovers never
 * queue before another's runs) and server processes on it: registers the hooks (a fresh,
 * indexed database before each test; every spawned process killed and every connection closed
 * after the file).
 */
export function databasePerTest(): DatabasePerTest {
  let current: ReturnType<typeof inProcessApp> | undefined;
  let dbName = "";
  const opened: ReturnType<typeof inProcessApp>[] = [];
  const children: ChildServer[] = [];
  beforeEach(async () => {
    dbName = testDbName();
    current = await openTestApp(dbName);
    opened.push(current);
  });
  afterAll(async () => {
    await Promise.allSettled(children.map((c) => c.kill()));
    for (const app of opened) app.stop();
    await Promise.allSettled(opened.map((app) => app.deps.store.close()));
  });
  return {
    get store() {
      return current!.deps.store;
    },
    get app() {
      return current!;
    },
    get dbName() {
      return dbName;
    },
    async spawn(opts) {
      const c = await spawnServer(dbName, opts);
      children.push(c);
      return c;
    },
  };
}

/** What `made()` returns, read like itself (`server.baseUrl`) once it is there: in a test or a hook. */
function readLater<T extends object>(made: () => T | undefined): T {
  return new Proxy({} as T, {
    get(_, key) {
      const target = made();
      if (!target) throw new Error("the test file's server is read before it started (use it inside a test or a hook)");
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** What `start` makes, for the whole test file (or describe block): made before its tests, ended by `stop` after them. */
export function forFile<T extends object>(start: () => Promise<T>, stop: (made: T) => Promise<unknown>): T {
  let made: T | undefined;
  beforeAll(async () => {
    made = await start();
  });
  afterAll(async () => {
    if (made) await stop(made);
  });
  return readLater(() => made);
}

/** One server for the whole test file: started before its tests, stopped after them. */
export function serverForFile(opts?: Parameters<typeof startServer>[0]): TestServer {
  return forFile(
    () => startServer(opts),
    (server) => server.stop(),
  );
}

/**
 * Two `runhook start` processes with `env` on one fresh database, for the whole test file (or
 * describe block), and runhook's services on that database in this process (`app`, for fixtures).
 */
export function twoServersForFile(env: Record<string, string>): { app: TestApp; a: ChildServer; b: ChildServer } {
  let app: TestApp | undefined;
  let a: ChildServer | undefined;
  let b: ChildServer | undefined;
  beforeAll(async () => {
    const dbName = testDbName();
    app = await openTestApp(dbName);
    [a, b] = await Promise.all([spawnServer(dbName, { env }), spawnServer(dbName, { env })]);
  });
  afterAll(async () => {
    await Promise.allSettled([a?.stop(), b?.stop()]);
    app?.stop();
    await app?.deps.store.close();
  });
  return { app: readLater(() => app), a: readLater(() => a), b: readLater(() => b) };
}
