// The connection and every collection handle. Only src/store/ touches the driver.
import { MongoClient, ReadPreference, type Collection, type Db } from "mongodb";
import { DEFAULT_WRITE_CONCERN, type WriteConcernSetting } from "../config.js";
import type * as T from "./types.js";
import { isDatabaseFull, isUnavailable, repliesFull } from "./errors.js";

/** The driver's command events, for tools that time the database's round trips (bench/). */
export type { CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent } from "mongodb";

/** Every collection runhook keeps, by its handle's name: one table for the types and the handles. */
const COLLECTIONS = {
  organizations: "organizations",
  users: "users",
  projects: "projects",
  projectRoles: "project_roles",
  environments: "environments",
  teams: "teams",
  renderings: "renderings",
  collections: "collections",
  permissions: "permissions",
  workflows: "workflows",
  workflowSteps: "workflow_steps",
  appTokens: "app_tokens",
  apiTokens: "api_tokens",
  orgApiTokens: "org_api_tokens",
  consoleSessions: "console_sessions",
  runs: "runs",
  activityLogs: "activity_logs",
  adminLogs: "admin_logs",
  logDigests: "log_digests",
  notes: "notes",
  counters: "counters",
  rateLimits: "rate_limits",
  idempotencyKeys: "idempotency_keys",
  directoryVersion: "directory_version",
  runBatches: "run_batches",
  runBatchItems: "run_batch_items",
} as const;

interface Documents {
  organizations: T.OrganizationDoc;
  users: T.UserDoc;
  projects: T.ProjectDoc;
  projectRoles: T.ProjectRoleDoc;
  environments: T.EnvironmentDoc;
  teams: T.TeamDoc;
  renderings: T.RenderingDoc;
  collections: T.CollectionDoc;
  permissions: T.PermissionDoc;
  workflows: T.WorkflowDoc;
  workflowSteps: T.WorkflowStepsDoc;
  appTokens: T.AppTokenDoc;
  apiTokens: T.ApiTokenDoc;
  orgApiTokens: T.OrgApiTokenDoc;
  consoleSessions: T.ConsoleSessionDoc;
  runs: T.RunDoc;
  activityLogs: T.ActivityLogDoc;
  adminLogs: T.AdminLogDoc;
  logDigests: T.LogDigestDoc;
  notes: T.NoteDoc;
  counters: T.CounterDoc;
  rateLimits: T.RateLimitDoc;
  idempotencyKeys: T.IdempotencyKeyDoc;
  directoryVersion: T.DirectoryVersionDoc;
  runBatches: T.RunBatchDoc;
  runBatchItems: T.RunBatchItemDoc;
}

/** A collection by its handle's name (`runs`, `activityLogs`, …). */
export type CollectionName = keyof typeof COLLECTIONS;

type Handles = { readonly [K in CollectionName]: Collection<Documents[K]> };

/** The write concern the client applies to every write: from the URI where it sets one, else from the configuration. */
export interface WriteConcernInForce {
  w: "majority" | number | undefined;
  journal: boolean | undefined;
  wtimeoutMS: number | undefined;
}

/** Collection handles are getters: after a reconnection (see connect()) they name the new client's. */
export interface Database extends Handles {
  readonly client: MongoClient;
  readonly db: Db;
  name: string;
  readonly writeConcern: WriteConcernInForce;
  /** The database holding an environment's records. */
  dataDb(name: string): Db;
  /** Calls `listener` with the command's name whenever a command fails (not for a unique index's refusal, which is an answer). */
  onCommandFailed(listener: (command: string) => void): void;
  /** Calls `listener` whenever the server refuses a write because it is full. */
  onFull(listener: () => void): void;
  /** Resolves when the server answers a ping. */
  ping(): Promise<void>;
  /** How far the server's clock is ahead of this process's (ms; NaN when it does not say). */
  clockSkewMs(): Promise<number>;
  close(): Promise<void>;
}

/** The database named by the URI's path, or `runhook`. */
export function databaseName(uri: string): string {
  const m = /^mongodb(?:\+srv)?:\/\/[^/]*\/([^?]*)/.exec(uri);
  const name = m?.[1] ? decodeURIComponent(m[1]) : "";
  return name || "runhook";
}

export interface ConnectOptions {
  dbName?: string;
  /**
   * How long an operation waits for a reachable server before it fails: the driver's
   * serverSelectionTimeoutMS (RUNHOOK_DB_TIMEOUT_MS). A URI that sets it keeps its own value.
   */
  timeoutMs?: number;
  /** Told when the client was replaced because the driver's server monitor was stuck (see below). */
  onReplaced?: (info: { stuckMs: number }) => void;
  /** The write concern of every write (RUNHOOK_WRITE_CONCERN, RUNHOOK_WRITE_JOURNAL); `w`, `journal` or `wtimeoutMS` in the URI win. */
  writeConcern?: WriteConcernSetting;
}

export const DEFAULT_DB_TIMEOUT_MS = 3000;
/**
 * How long a write waits for the members its write concern names (wtimeoutMS): a replica set
 * that lost its majority fails writes after this (503) instead of holding every request.
 */
export const WRITE_CONCERN_TIMEOUT_MS = 10_000;

/** The driver's options for `uri`: what the URI itself sets stays as it is (an operator's choice). */
function clientOptions(uri: string, timeoutMs: number, wc: WriteConcernSetting) {
  const inUri = (name: string) => new RegExp(`[?&]${name}=`, "i").test(uri);
  const writeConcern = {
    ...(inUri("w") ? {} : { w: wc.w }),
    ...(inUri("journal") ? {} : { journal: wc.journal }),
    ...(inUri("wtimeoutMS") ? {} : { wtimeoutMS: WRITE_CONCERN_TIMEOUT_MS }),
  };
  return { maxPoolSize: 50, monitorCommands: true, writeConcern, ...(inUri("serverSelectionTimeoutMS") ? {} : { serverSelectionTimeoutMS: timeoutMs }) };
}

/**
 * A heartbeat of the driver's server monitor (polling, not awaited) still running after this
 * long, for a server the driver does not know, means the monitor is stuck (see connect()).
 */
export const STUCK_HEARTBEAT_MS = 2000;
const WATCHDOG_EVERY_MS = 1000;
/** At most one replacement in this time (a member that stays unreachable must not make clients churn). */
const REPLACE_AT_MOST_EVERY_MS = 10_000;
/** Server types the driver can send writes to: while one of them is known, the client works. */
const WRITABLE = new Set(["Standalone", "RSPrimary", "Mongos", "LoadBalancer"]);

type ClientHandles = Handles & { client: MongoClient; db: Db };

/**
 * Every read goes to the primary, whatever the connection string asks (`readPreference=…`): what
 * a caller may do is decided on the directory as it is (a secondary may lag behind a revoke), a
 * record a step wrote is read back by the next step, and a claim reads what it then updates.
 */
const PRIMARY = { readPreference: ReadPreference.PRIMARY };

function handles(client: MongoClient, name: string): ClientHandles {
  const db = client.db(name, PRIMARY);
  const colls = Object.fromEntries(Object.entries(COLLECTIONS).map(([key, coll]) => [key, db.collection(coll)])) as unknown as Handles;
  return { client, db, ...colls };
}

/** What a client's monitor reports, per server address: since when a polling heartbeat has been running; the server's type. */
interface Monitoring {
  heartbeats: Map<string, number>;
  types: Map<string, string>;
}

type FailureListener = (command: string) => void;

/** Who is told of failed commands, and of writes a full database refused. */
interface CommandListeners {
  failed: FailureListener[];
  full: (() => void)[];
}

/** Follows the monitor of client `c`, and tells `listeners` of its failed commands and of its writes refused for a full database. */
function watchClient(c: MongoClient, listeners: CommandListeners): Monitoring {
  const m: Monitoring = { heartbeats: new Map(), types: new Map() };
  c.on("serverHeartbeatStarted", (e) => e.awaited || m.heartbeats.set(e.connectionId, Date.now()));
  c.on("serverHeartbeatSucceeded", (e) => m.heartbeats.delete(e.connectionId));
  c.on("serverHeartbeatFailed", (e) => m.heartbeats.delete(e.connectionId));
  c.on("serverDescriptionChanged", (e) => m.types.set(e.address, e.newDescription.type));
  c.on("serverClosed", (e) => {
    m.heartbeats.delete(e.address);
    m.types.delete(e.address);
  });
  c.on("commandFailed", (e) => {
    if ((e.failure as { code?: unknown }).code !== 11000) for (const l of listeners.failed) l(e.commandName);
    if (isDatabaseFull(e.failure)) for (const l of listeners.full) l();
  });
  // A write refused for room may come as a write error of a command that succeeded.
  c.on("commandSucceeded", (e) => {
    if (listeners.full.length > 0 && repliesFull(e.reply)) for (const l of listeners.full) l();
  });
  return m;
}

/** Since when the monitor has been stuck, or undefined when it is not (or a writable server is known). */
function stuckSince(m: Monitoring, now: number): number | undefined {
  if ([...m.types.values()].some((t) => WRITABLE.has(t))) return undefined;
  // A server the driver does not know (any more) whose heartbeat has been running too long.
  const stuck = [...m.heartbeats].filter(([address, since]) => now - since > STUCK_HEARTBEAT_MS && (m.types.get(address) ?? "Unknown") === "Unknown");
  if (stuck.length === 0) return undefined;
  return Math.min(...stuck.map(([, since]) => since));
}

/** The client in use (replaced by the watchdog), and how to make another one. */
interface Live {
  handles: ClientHandles;
  monitoring: Monitoring;
  closed: boolean;
  name: string;
  newClient(): { client: MongoClient; monitoring: Monitoring };
  onReplaced?: ConnectOptions["onReplaced"];
}

/** Every WATCHDOG_EVERY_MS, replaces a client whose monitor is stuck by a new one, once that one reaches the database. */
function startWatchdog(live: Live): NodeJS.Timeout {
  let replacing = false;
  let replacedAt = 0;
  const watchdog = setInterval(() => {
    const now = Date.now();
    if (replacing || live.closed || now - replacedAt < REPLACE_AT_MOST_EVERY_MS) return;
    const since = stuckSince(live.monitoring, now);
    if (since === undefined) return;
    replacing = true;
    const fresh = live.newClient();
    void fresh.client
      .connect()
      .then(
        () => {
          if (live.closed) return void fresh.client.close().catch(() => {});
          const old = live.handles.client;
          old.removeAllListeners();
          live.monitoring = fresh.monitoring;
          live.handles = handles(fresh.client, live.name);
          replacedAt = Date.now();
          // It knows no server: nothing runs on it, and what waits for one fails at once (as
          // unavailable), so that runners and claims retry on the new client.
          void old.close().catch(() => {});
          live.onReplaced?.({ stuckMs: now - since });
        },
        () => void fresh.client.close().catch(() => {}), // still unreachable: try again at a later tick
      )
      .finally(() => (replacing = false));
  }, WATCHDOG_EVERY_MS);
  watchdog.unref();
  return watchdog;
}

/**
 * Connects, and keeps the connection usable across database outages.
 *
 * The driver's server monitor can get stuck for good when the server goes away: seen with
 * mongodb 6.20 against a stopped and restarted server (test/crash/db-outage.test.ts, in about one
 * run out of five), a heartbeat started while the server was closing its connections never
 * ended — no success, no failure, not even after connectTimeoutMS — and the monitor never
 * checked again: the server stayed Unknown and every operation failed server selection long
 * after the database was back. So the store watches the monitor's public heartbeat events:
 * when a (polling) heartbeat has run for over STUCK_HEARTBEAT_MS for a server the driver has
 * as Unknown, and no writable server is known, it opens a new client with the same options
 * and, once that one reaches the database, uses it instead (collection handles are read
 * through getters, so every later call goes to the new client) and closes the old one, which
 * fails the operations still waiting on it for a server. A database that is really down is
 * never replaced (the new client cannot connect), and a client at most every 10 s.
 */
export async function connect(uri: string, opts: ConnectOptions = {}): Promise<Database> {
  // Every write, on every collection, with one write concern: a write the caller is told
  // succeeded (a 202, a note, a token) survives a crash of the database server.
  const options = clientOptions(uri, opts.timeoutMs ?? DEFAULT_DB_TIMEOUT_MS, opts.writeConcern ?? DEFAULT_WRITE_CONCERN);
  const listeners: CommandListeners = { failed: [], full: [] };
  const name = opts.dbName ?? databaseName(uri);
  const newClient = () => {
    const client = new MongoClient(uri, options);
    return { client, monitoring: watchClient(client, listeners) };
  };
  const first = newClient();
  await first.client.connect();
  const live: Live = { handles: handles(first.client, name), monitoring: first.monitoring, closed: false, name, newClient, onReplaced: opts.onReplaced };
  const watchdog = startWatchdog(live);

  let clockCommand: "hello" | "isMaster" = "hello";
  const wc = first.client.writeConcern;
  const database = {
    name,
    writeConcern: { w: wc?.w as WriteConcernInForce["w"], journal: wc?.journal, wtimeoutMS: wc?.wtimeoutMS },
    dataDb: (dataName: string) => live.handles.client.db(dataName, PRIMARY),
    ping: async () => {
      await live.handles.db.command({ ping: 1 });
    },
    clockSkewMs: async () => {
      // The server's clock (hello's localTime; isMaster on a server without hello, as the
      // embedded one: asked once, so that a refused hello is not a database error every time)
      // against ours at the middle of the round trip.
      const sent = Date.now();
      const answer = await live.handles.db.command({ [clockCommand]: 1 }).catch((err: unknown) => {
        if (clockCommand !== "hello" || isUnavailable(err)) throw err;
        clockCommand = "isMaster";
        return live.handles.db.command({ isMaster: 1 });
      });
      const received = Date.now();
      const theirs = answer.localTime instanceof Date ? answer.localTime.getTime() : Number.NaN;
      return theirs - (sent + received) / 2;
    },
    onCommandFailed: (listener: FailureListener) => void listeners.failed.push(listener),
    onFull: (listener: () => void) => void listeners.full.push(listener),
    close: async () => {
      live.closed = true;
      clearInterval(watchdog);
      await live.handles.client.close();
    },
  };
  // The client and every collection handle are read from the current client at each use.
  for (const key of ["client", "db", ...Object.keys(COLLECTIONS)] as (keyof ClientHandles)[]) {
    Object.defineProperty(database, key, { get: () => live.handles[key], enumerable: true });
  }
  return database as typeof database & Pick<Database, "client" | "db" | keyof Handles>;
}

/** Whether a database server answers a ping at `uri` within `timeoutMs` (its own short-lived client). */
export async function pingServer(uri: string, timeoutMs: number): Promise<boolean> {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: timeoutMs, connectTimeoutMS: timeoutMs, directConnection: true });
  try {
    await client.db("admin").command({ ping: 1 });
    return true;
  } catch {
    return false;
  } finally {
    await client.close().catch(() => {});
  }
}
