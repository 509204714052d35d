// The connection and every collection handle. Only src/store/ touches the driver.
import { MongoClient, type Collection, type Db } from "mongodb";
import type * as T from "./types.js";

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
  appTokens: "app_tokens",
  apiTokens: "api_tokens",
  runs: "runs",
  activityLogs: "activity_logs",
  adminLogs: "admin_logs",
  notes: "notes",
  counters: "counters",
  rateLimits: "rate_limits",
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
  appTokens: T.AppTokenDoc;
  apiTokens: T.ApiTokenDoc;
  runs: T.RunDoc;
  activityLogs: T.ActivityLogDoc;
  adminLogs: T.AdminLogDoc;
  notes: T.NoteDoc;
  counters: T.CounterDoc;
  rateLimits: T.RateLimitDoc;
}

type Handles = { readonly [K in keyof typeof COLLECTIONS]: Collection<Documents[K]> };

/** Collection handles are getters: after a reconnection (see connect()) they name the new client's. */
export interface Database extends Handles {
  readonly client: MongoClient;
  readonly db: Db;
  name: string;
  /** The database holding an environment's records. */
  dataDb(name: string): Db;
  /** Calls `listener` with the command's name whenever a command fails (not for a unique index's refusal, which is an answer). */
  onCommandFailed(listener: (command: string) => void): void;
  /** Resolves when the server answers a ping. */
  ping(): Promise<void>;
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
}

export const DEFAULT_DB_TIMEOUT_MS = 3000;

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

function handles(client: MongoClient, name: string): Handles & { client: MongoClient; db: Db } {
  const db = client.db(name);
  const colls = Object.fromEntries(Object.entries(COLLECTIONS).map(([key, coll]) => [key, db.collection(coll)])) as unknown as Handles;
  return { client, db, ...colls };
}


/**
 * Connects, and keeps the connection usable across database outages.
 *
 * The driver's server monitor can get stuck for good when the server goes away: seen with
 * mongodb 6.20 against a stopped and restarted server (test/db-outage.test.ts, in about one
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
  const timeoutMs = opts.timeoutMs ?? DEFAULT_DB_TIMEOUT_MS;
  // Options given here win over the URI's: leave an operator's own choice in the URI alone.
  const inUri = /[?&]serverSelectionTimeoutMS=/i.test(uri);
  const options = { maxPoolSize: 50, monitorCommands: true, ...(inUri ? {} : { serverSelectionTimeoutMS: timeoutMs }) };
  const failureListeners: ((command: string) => void)[] = [];
  const name = opts.dbName ?? databaseName(uri);

  /** What a client's monitor reports, per server address: since when a polling heartbeat has been running; the server's type. */
  interface Monitoring {
    heartbeats: Map<string, number>;
    types: Map<string, string>;
  }
  const watch = (c: MongoClient): Monitoring => {
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
      if ((e.failure as { code?: unknown }).code !== 11000) for (const l of failureListeners) l(e.commandName);
    });
    return m;
  };
  const first = new MongoClient(uri, options);
  let monitoring = watch(first);
  await first.connect();
  let h = handles(first, name);
  let closed = false;

  let replacing = false;
  let replacedAt = 0;
  const watchdog = setInterval(() => {
    const now = Date.now();
    if (replacing || closed || now - replacedAt < REPLACE_AT_MOST_EVERY_MS) return;
    if ([...monitoring.types.values()].some((t) => WRITABLE.has(t))) return;
    // A server the driver does not know (any more) whose heartbeat has been running too long.
    const stuck = [...monitoring.heartbeats].filter(([address, since]) => now - since > STUCK_HEARTBEAT_MS && (monitoring.types.get(address) ?? "Unknown") === "Unknown");
    if (stuck.length === 0) return;
    const stuckSince = Math.min(...stuck.map(([, since]) => since));
    replacing = true;
    const fresh = new MongoClient(uri, options);
    const freshMonitoring = watch(fresh);
    void fresh
      .connect()
      .then(
        () => {
          if (closed) return void fresh.close().catch(() => {});
          const old = h.client;
          old.removeAllListeners();
          monitoring = freshMonitoring;
          h = handles(fresh, name);
          replacedAt = Date.now();
          // It knows no server: nothing runs on it, and what waits for one fails at once (as
          // unavailable), so that runners and claims retry on the new client.
          void old.close().catch(() => {});
          opts.onReplaced?.({ stuckMs: now - stuckSince });
        },
        () => void fresh.close().catch(() => {}), // still unreachable: try again at a later tick
      )
      .finally(() => (replacing = false));
  }, WATCHDOG_EVERY_MS);
  watchdog.unref();

  const database = {
    name,
    dataDb: (dataName: string) => h.client.db(dataName),
    ping: async () => {
      await h.db.command({ ping: 1 });
    },
    onCommandFailed: (listener: (command: string) => void) => void failureListeners.push(listener),
    close: async () => {
      closed = true;
      clearInterval(watchdog);
      await h.client.close();
    },
  };
  // The client and every collection handle are read from the current client at each use.
  for (const key of ["client", "db", ...Object.keys(COLLECTIONS)] as (keyof typeof h)[]) {
    Object.defineProperty(database, key, { get: () => h[key], enumerable: true });
  }
  return database as typeof database & Pick<Database, "client" | "db" | keyof Handles>;
}
