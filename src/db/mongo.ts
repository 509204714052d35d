// Connection, collection handles and every index, declared in one place.
import { MongoClient, type Collection, type Db, MongoServerError } from "mongodb";
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
  locks: Collection<T.LockDoc>;
  /** Runs that may be claimable (hints; runs/queue.ts). */
  runQueue: Collection<T.RunQueueDoc>;
  /** activeKey → its ongoing run (hints for the 409 answer; runs/queue.ts). */
  activeRuns: Collection<T.ActiveRunDoc>;
  /** Runs an executor has claimed and not finished (hints for the lease sweep; runs/queue.ts). */
  runningRuns: Collection<T.RunningRunDoc>;
  /**
   * True on FerretDB, whose updates are read-modify-write without isolation: concurrent
   * updates of one document can be lost. atomicUpdate() then serializes writers.
   */
  serializedUpdates: boolean;
  /** The database holding an environment's records. */
  dataDb(name: string): Db;
  close(): Promise<void>;
}

/** The database named by the URI's path, or `runhook`. */
export function databaseName(uri: string): string {
  const m = /^mongodb(?:\+srv)?:\/\/[^/]*\/([^?]*)/.exec(uri);
  const name = m?.[1] ? decodeURIComponent(m[1]) : "";
  return name || "runhook";
}

export async function connect(uri: string, opts: { dbName?: string } = {}): Promise<Database> {
  const client = new MongoClient(uri, { maxPoolSize: 50, serverSelectionTimeoutMS: 10_000 });
  await client.connect();
  const name = opts.dbName ?? databaseName(uri);
  const db = client.db(name);
  const buildInfo = await client.db("admin").command({ buildInfo: 1 });
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
    locks: db.collection("locks"),
    runQueue: db.collection("run_queue"),
    activeRuns: db.collection("active_runs"),
    runningRuns: db.collection("running_runs"),
    serializedUpdates: typeof buildInfo.ferretdbVersion === "string",
    dataDb: (dataName) => client.db(dataName),
    close: () => client.close(),
  };
}

/**
 * Every query the service makes has an index here. Only plain and unique
 * indexes: they work on MongoDB and on FerretDB alike (no partial, sparse or TTL).
 */
export async function ensureIndexes(d: Database): Promise<void> {
  await Promise.all([
    d.organizations.createIndex({ name: 1 }, { unique: true }),
    d.users.createIndex({ email: 1 }, { unique: true }),
    d.projects.createIndex({ organizationId: 1, name: 1 }, { unique: true }),
    d.projects.createIndex({ name: 1 }),
    d.projectRoles.createIndex({ projectId: 1, userId: 1 }, { unique: true }),
    d.environments.createIndex({ projectId: 1, name: 1 }, { unique: true }),
    d.teams.createIndex({ projectId: 1, name: 1 }, { unique: true }),
    d.renderings.createIndex({ teamId: 1, environmentId: 1 }, { unique: true }),
    d.collections.createIndex({ environmentId: 1, name: 1 }, { unique: true }),
    d.appTokens.createIndex({ hash: 1 }, { unique: true }),
    d.apiTokens.createIndex({ hash: 1 }, { unique: true }),
    // One ongoing run per (workflow, record): activeKey is `${workflowId}|${recordId}`
    // while ongoing and the run's own id once finished.
    d.runs.createIndex({ activeKey: 1 }, { unique: true }),
    d.runs.createIndex({ state: 1, createdAt: 1 }),
    d.runs.createIndex({ "lease.expiresAt": 1 }),
    // The work queue in arrival order on MongoDB (FerretDB lists it in $natural order).
    d.runQueue.createIndex({ at: 1 }),
    // Logs: unfiltered pages are `_id` (stream key) point lookups; the query path (filters,
    // time range, export) is scope + filter + the list order `seq` (number within the
    // stream). Not on FerretDB: its SQLite backend never uses them for a query, and each
    // costs a JSON parse of the entry on every insert.
    ...(d.serializedUpdates
      ? []
      : [
          d.activityLogs.createIndex({ environmentId: 1, seq: 1 }),
          d.activityLogs.createIndex({ runId: 1, seq: 1 }),
          d.adminLogs.createIndex({ projectId: 1, seq: 1 }),
          // Public API filters (LogService): each filter + the list order.
          d.activityLogs.createIndex({ environmentId: 1, action: 1, seq: 1 }),
          d.activityLogs.createIndex({ environmentId: 1, "user.id": 1, seq: 1 }),
          d.activityLogs.createIndex({ environmentId: 1, collection: 1, recordId: 1, seq: 1 }),
          d.adminLogs.createIndex({ projectId: 1, action: 1, seq: 1 }),
        ]),
    d.notes.createIndex({ environmentId: 1, seq: 1 }),
    d.notes.createIndex({ environmentId: 1, collection: 1, recordId: 1, seq: 1 }),
    d.notes.createIndex({ seq: 1 }, { unique: true }),
    d.rateLimits.createIndex({ expiresAt: 1 }),
    d.locks.createIndex({ expiresAt: 1 }),
  ]);
  // Log indexes of the earlier layout (numeric `_id` as the list order): dropped when present.
  const dropOld = (coll: { dropIndex(name: string): Promise<unknown> }, names: string[]) => Promise.all(names.map((n) => coll.dropIndex(n).catch(() => undefined)));
  await Promise.all([
    dropOld(d.activityLogs, ["environmentId_1__id_1", "runId_1__id_1", "environmentId_1_action_1__id_1", "environmentId_1_user.id_1__id_1", "environmentId_1_collection_1_recordId_1__id_1"]),
    dropOld(d.adminLogs, ["projectId_1__id_1", "projectId_1_action_1__id_1"]),
  ]);
}

export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}
