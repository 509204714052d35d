// The connection and every collection handle. Only src/store/ touches the driver.
import { MongoClient, type Collection, type Db } from "mongodb";
import type * as T from "./types.js";

export interface Database {
  client: MongoClient;
  db: Db;
  name: string;
  organizations: Collection<T.OrganizationDoc>;
  users: Collection<T.UserDoc>;
  projects: Collection<T.ProjectDoc>;
  projectRoles: Collection<T.ProjectRoleDoc>;
  environments: Collection<T.EnvironmentDoc>;
  teams: Collection<T.TeamDoc>;
  renderings: Collection<T.RenderingDoc>;
  collections: Collection<T.CollectionDoc>;
  permissions: Collection<T.PermissionDoc>;
  workflows: Collection<T.WorkflowDoc>;
  appTokens: Collection<T.AppTokenDoc>;
  apiTokens: Collection<T.ApiTokenDoc>;
  runs: Collection<T.RunDoc>;
  activityLogs: Collection<T.ActivityLogDoc>;
  adminLogs: Collection<T.AdminLogDoc>;
  notes: Collection<T.NoteDoc>;
  counters: Collection<T.CounterDoc>;
  rateLimits: Collection<T.RateLimitDoc>;
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
  /** How long an operation waits for a reachable server before it fails (driver's serverSelectionTimeoutMS). */
  serverSelectionTimeoutMs?: number;
}

export async function connect(uri: string, opts: ConnectOptions = {}): Promise<Database> {
  const client = new MongoClient(uri, { maxPoolSize: 50, serverSelectionTimeoutMS: opts.serverSelectionTimeoutMs ?? 10_000, monitorCommands: true });
  await client.connect();
  const name = opts.dbName ?? databaseName(uri);
  const db = client.db(name);
  return {
    client,
    db,
    name,
    organizations: db.collection("organizations"),
    users: db.collection("users"),
    projects: db.collection("projects"),
    projectRoles: db.collection("project_roles"),
    environments: db.collection("environments"),
    teams: db.collection("teams"),
    renderings: db.collection("renderings"),
    collections: db.collection("collections"),
    permissions: db.collection("permissions"),
    workflows: db.collection("workflows"),
    appTokens: db.collection("app_tokens"),
    apiTokens: db.collection("api_tokens"),
    runs: db.collection("runs"),
    activityLogs: db.collection("activity_logs"),
    adminLogs: db.collection("admin_logs"),
    notes: db.collection("notes"),
    counters: db.collection("counters"),
    rateLimits: db.collection("rate_limits"),
    dataDb: (dataName) => client.db(dataName),
    onCommandFailed: (listener) => {
      client.on("commandFailed", (e) => {
        if ((e.failure as { code?: unknown }).code !== 11000) listener(e.commandName);
      });
    },
    ping: async () => {
      await db.command({ ping: 1 });
    },
    close: () => client.close(),
  };
}
