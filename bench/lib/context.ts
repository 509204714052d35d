// What every scenario shares: the database server, env for the runhook processes, and the
// fixtures, which are made through the AdminService (in process, on the scenario's own
// database) the way an operator makes them, not written into the collections by hand.
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type Config } from "../../src/config.js";
import type { Deps } from "../../src/deps.js";
import { createLogger } from "../../src/lib/logging.js";
import { callAdmin } from "../../src/cli/demo.js";
import { createDeps } from "../../src/main.js";
import { createServices, type Services } from "../../src/services/index.js";
import { connect, createStore, ensureIndexes, type Store } from "../../src/store/index.js";
import type { StepDoc } from "../../src/store/types.js";
import { keyOfUrl } from "../../src/domain/webhook-keys.js";
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

/** Env of a runhook process on `dbName`: ports 0, loopback, the run's signing keys, no demo, 100 ms executor poll. */
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
    RUNHOOK_BOOTSTRAP_SECRET: BOOTSTRAP_SECRET,
    RUNHOOK_DEMO: "false",
    RUNHOOK_EXECUTOR_POLL_MS: "100",
    LOG_LEVEL: "info",
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
  const db = await connect(uriFor(ctx.uri, dbName, query), { dbName });
  await ensureIndexes(db);
  ctx.cleanups.push(async () => {
    await db.db.dropDatabase().catch(() => {});
    await db.close().catch(() => {});
  });
  return createStore(db);
}

export interface BenchWorld {
  orgId: string;
  projectId: string;
  projectName: string;
  environmentId: string;
  environmentName: string;
  teamId: string;
  renderingId: string;
  collectionId: string;
  collection: string;
  dataDatabase: string;
  workflowId: string;
  /** The organization admin (made by Bootstrap); its API token reads the logs. */
  admin: { id: string; email: string };
  /** The project user whose application token triggers the webhook. */
  user: { id: string; email: string };
  userToken: string;
  apiToken: string;
  /** The webhook URL path (`/hooks/{key}`), to be put after a server's base URL. */
  hookPath: string;
}

function stepToProto(s: StepDoc) {
  switch (s.type) {
    case "load_record":
      return { kind: { case: "loadRecord" as const, value: {} } };
    case "update_record":
      return { kind: { case: "updateRecord" as const, value: { set: s.set } } };
    case "wait":
      return { kind: { case: "wait" as const, value: { seconds: s.seconds } } };
    case "add_note":
      return { kind: { case: "addNote" as const, value: { title: s.title, content: s.content } } };
  }
}

/** Deps of an in-process service set on `store` (no servers): what the AdminService needs. */
export function servicesOn(ctx: BenchContext, store: Store): { deps: Deps; services: Services } {
  const config = serverConfig(ctx, store.db.name);
  const deps = createDeps(store.db, config, createLogger("silent"));
  return { deps, services: createServices(deps) };
}

// biome-ignore lint/suspicious/noExplicitAny: admin answers are read loosely, field by field
type R = Record<string, any>;

/** Calls one AdminService method in process, with `token` as the bearer (the operator secret for Bootstrap). */
async function adminCall(services: Services, method: keyof Services["admin"], token: string, init: R): Promise<R> {
  return (await callAdmin(services.admin, method, token, init as never)) as unknown as R;
}

export interface WorldOptions {
  steps?: StepDoc[];
  /** Records of the collection (primary key `id`); default five. */
  records?: Record<string, unknown>[];
  /**
   * The webhook's rate limit per minute. The API allows up to 100,000; the default, 10,000,000,
   * is written into the workflow document afterwards so that the limiter never refuses during
   * a load phase (it still runs: its cost is part of every accept).
   */
  rateLimitPerMinute?: number;
}

/**
 * A tenant made through the AdminService: organization (Bootstrap), project, environment,
 * team, rendering, collection with read/edit permission, an admin and a `user` member, a
 * workflow with its webhook enabled, the user's application token and a project API token.
 */
export async function benchWorld(ctx: BenchContext, store: Store, opts: WorldOptions = {}): Promise<BenchWorld> {
  const { services } = servicesOn(ctx, store);
  const tag = randomUUID().slice(0, 8);
  const boot = await adminCall(services, "bootstrap", BOOTSTRAP_SECRET, {
    organizationName: `bench-${tag}`,
    adminEmail: `admin-${tag}@bench.example`,
    adminName: "Bench Admin",
  });
  const adminToken = boot.adminToken as string;
  const c = (method: keyof Services["admin"], init: R) => adminCall(services, method, adminToken, init);
  const admin = { id: boot.admin.id as string, email: boot.admin.email as string };
  const project = (await c("createProject", { name: `proj-${tag}` })).project;
  const environment = (await c("createEnvironment", { projectId: project.id, name: "production" })).environment;
  const team = (await c("createTeam", { projectId: project.id, name: "ops" })).team;
  const rendering = (await c("createRendering", { teamId: team.id, environmentId: environment.id })).rendering;
  const collection = (await c("createCollection", { environmentId: environment.id, name: "orders", primaryKey: ["id"] })).collection;
  const userMsg = (await c("createUser", { email: `user-${tag}@bench.example`, name: "Bench User" })).user;
  const user = { id: userMsg.id as string, email: userMsg.email as string };
  // The API token's creator must hold the admin role on the project itself.
  await c("setProjectRole", { projectId: project.id, userId: admin.id, role: "admin" });
  await c("setProjectRole", { projectId: project.id, userId: user.id, role: "user" });
  for (const id of [admin.id, user.id]) await c("setTeamMember", { teamId: team.id, userId: id, member: true });
  const roles = ["admin", "editor", "user"];
  await c("setCollectionPermission", { permission: { renderingId: rendering.id, collectionId: collection.id, readRoles: roles, editRoles: roles, scope: {} } });
  const steps = opts.steps ?? [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }];
  const workflow = (
    await c("createWorkflow", { renderingId: rendering.id, collectionId: collection.id, name: "bench workflow", steps: steps.map(stepToProto) })
  ).workflow;
  const webhook = (await c("enableWebhook", { workflowId: workflow.id })).webhook;
  const limit = opts.rateLimitPerMinute ?? 10_000_000;
  if (limit <= 100_000) await c("setWebhookRateLimit", { workflowId: workflow.id, rateLimitPerMinute: limit });
  else await store.directory.workflows.setWebhookRateLimit(workflow.id, limit);
  const userToken = (await c("createApplicationToken", { userId: user.id, name: "bench webhook" })).plaintext as string;
  const apiToken = (await c("createApiToken", { projectId: project.id, name: "bench logs" })).plaintext as string;

  const dataDatabase = environment.dataDatabase as string;
  const records = opts.records ?? [1, 2, 3, 4, 5].map((i) => ({ id: `r${i}`, status: "new" }));
  const data = store.db.dataDb(dataDatabase).collection("orders");
  for (let i = 0; i < records.length; i += 5000) await data.insertMany(records.slice(i, i + 5000).map((r) => ({ ...r })));
  ctx.cleanups.push(() =>
    store.db
      .dataDb(dataDatabase)
      .dropDatabase()
      .then(
        () => undefined,
        () => undefined,
      ),
  );
  return {
    orgId: boot.organization.id,
    projectId: project.id,
    projectName: project.name,
    environmentId: environment.id,
    environmentName: environment.name,
    teamId: team.id,
    renderingId: rendering.id,
    collectionId: collection.id,
    collection: collection.name,
    dataDatabase,
    workflowId: workflow.id,
    admin,
    user,
    userToken,
    apiToken,
    hookPath: `/hooks/${keyOfUrl(webhook.url as string)}`,
  };
}
