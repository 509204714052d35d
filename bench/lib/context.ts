// What every scenario shares: the database server, env for the runhook processes, fixtures.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, ensureIndexes, type Database } from "../../src/db/mongo.js";
import { signWebhookKey } from "../../src/trigger/keys.js";
import type { StepDoc } from "../../src/db/types.js";
import { createWorld, type World } from "../../test/helpers/world.js";
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
  log(msg: string): void;
  /** Registered cleanups (databases to drop, clients to close), run at the end. */
  cleanups: (() => Promise<void>)[];
}

export function newSigningKeys(): string {
  return `k1:${randomBytes(32).toString("base64url")}`;
}

/** `uri` with its path set to `dbName`. */
export function uriFor(base: string, dbName: string): string {
  const m = /^(mongodb(?:\+srv)?:\/\/[^/?]*)(\/[^?]*)?(\?.*)?$/.exec(base);
  if (!m) throw new Error(`bad MONGODB_URI ${base}`);
  return `${m[1]}/${dbName}${m[3] ?? ""}`;
}

/** Env of a runhook process on `dbName`, like test/helpers/server.ts testEnv. */
export function serverEnv(ctx: BenchContext, dbName: string, extra: Record<string, string> = {}): Record<string, string> {
  const dataDir = mkdtempSync(join(tmpdir(), "runhook-bench-srv-"));
  ctx.cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  return {
    MONGODB_URI: uriFor(ctx.uri, dbName),
    PORT: "0",
    GRPC_PORT: "0",
    HOST: "127.0.0.1",
    RUNHOOK_DATA_DIR: dataDir,
    RUNHOOK_SIGNING_KEYS: ctx.signingKeys,
    RUNHOOK_BOOTSTRAP_SECRET: "bench-bootstrap-secret-0123456789",
    RUNHOOK_DEMO: "false",
    RUNHOOK_EXECUTOR_POLL_MS: "100",
    LOG_LEVEL: "info",
    ...extra,
  };
}

/** Spawns a server (or worker), CPU-profiled when --profile names this scenario. */
export function spawnFor(ctx: BenchContext, scenario: string, mode: "start" | "worker", dbName: string, extra: Record<string, string> = {}): Promise<Proc> {
  const profiled = ctx.profileDir && (ctx.profile === "all" || ctx.profile === scenario) && mode === "start";
  return spawnRunhook({ mode, env: serverEnv(ctx, dbName, extra), cpuProfDir: profiled ? join(ctx.profileDir!, scenario) : undefined });
}

/** A connection to `dbName` with every runhook index; the database is dropped at the end. */
export async function openDb(ctx: BenchContext, dbName: string): Promise<Database> {
  const db = await connect(uriFor(ctx.uri, dbName), { dbName });
  await ensureIndexes(db);
  ctx.cleanups.push(async () => {
    await db.db.dropDatabase().catch(() => {});
    await db.close().catch(() => {});
  });
  return db;
}

export interface BenchWorld extends World {
  /** The webhook URL path (`/hooks/{key}`), to be put after a server's base URL. */
  hookPath: string;
}

/**
 * createWorld (direct inserts) with the webhook's rate limit raised so the limiter never
 * refuses (it still runs: its cost is part of every accept).
 */
export async function benchWorld(ctx: BenchContext, db: Database, opts: { steps?: StepDoc[]; rateLimitPerMinute?: number } = {}): Promise<BenchWorld> {
  const w = await createWorld(db, { steps: opts.steps });
  await db.workflows.updateOne({ _id: w.workflowId }, { $set: { "webhook.rateLimitPerMinute": opts.rateLimitPerMinute ?? 10_000_000 } });
  const [kid, secret] = ctx.signingKeys.split(":") as [string, string];
  const key = signWebhookKey({ signingKeys: new Map([[kid, Buffer.from(secret, "base64url")]]), signingKeyId: kid }, { workflowId: w.workflowId, renderingId: w.renderingId, generation: 1 });
  ctx.cleanups.push(() => db.client.db(w.dataDatabase).dropDatabase().then(() => undefined, () => undefined));
  return { ...w, hookPath: `/hooks/${key}` };
}
