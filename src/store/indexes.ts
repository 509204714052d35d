// Every index, in one place, created at start-up: each query runhook makes has one here.
import { DEFAULT_RETENTION, type Retention } from "../config.js";
import type { Collection } from "mongodb";
import { sleep } from "../lib/sleep.js";
import type { CollectionName, Database } from "./connection.js";

/** How often the fallback sweeps delete what a TTL index would (see sweepExpired). */
export const SWEEP_EVERY_MS = 60_000;

/** A TTL index: MongoDB removes a document once its `field` (a Date) is `expireAfterSeconds` in the past. */
export interface TtlIndex {
  collection: CollectionName;
  field: string;
  expireAfterSeconds: number;
}

const DAY_S = 86_400;
const COMMAND_NOT_FOUND = 59;

/**
 * Every TTL index. Declare a TTL index here, never as a createIndex of its own: the sweep that
 * stands in for MongoDB's TTL monitor on the embedded server reads this list.
 */
export function ttlIndexes(retention: Retention = DEFAULT_RETENTION): TtlIndex[] {
  return [
    // Rate-limit windows, once they have ended.
    { collection: "rateLimits", field: "expiresAt", expireAfterSeconds: 0 },
    // Console sessions (looked up by `_id` only), once they have expired.
    { collection: "consoleSessions", field: "expiresAt", expireAfterSeconds: 0 },
    // Idempotency keys of trigger calls (looked up by `_id` only), once their time is up.
    { collection: "idempotencyKeys", field: "expiresAt", expireAfterSeconds: 0 },
    // Finished runs (their lease and step results with them). An ongoing run's finishedAt is
    // null, which a TTL index never expires and `$lt` never matches.
    { collection: "runs", field: "finishedAt", expireAfterSeconds: retention.runDays * DAY_S },
    // Run batches, once finished, and what they did with each run, as long as runs are kept.
    { collection: "runBatches", field: "finishedAt", expireAfterSeconds: retention.runDays * DAY_S },
    { collection: "runBatchItems", field: "at", expireAfterSeconds: retention.runDays * DAY_S },
    // Log entries and the placeholders of holes, by their time.
    { collection: "activityLogs", field: "timestamp", expireAfterSeconds: retention.logDays * DAY_S },
    { collection: "adminLogs", field: "timestamp", expireAfterSeconds: retention.logDays * DAY_S },
    // Log digests, with the first entry they cover (read by `_id`; this index also finds the newest).
    { collection: "logDigests", field: "timestamp", expireAfterSeconds: retention.logDays * DAY_S },
  ];
}

/** The indexes of `runs`. */
function runIndexes(d: Database): Promise<string>[] {
  return [
    // One ongoing run per (workflow, record): activeKey is `${workflowId}|${recordId}` while
    // the run is ongoing and its finish time and id once it is finished (finishedActiveKey). The 409 answer finds the
    // ongoing run by it.
    d.runs.createIndex({ activeKey: 1 }, { unique: true }),
    // Claiming: RUNNING runs whose lease expired, parked runs that are due, then QUEUED runs
    // organization by organization and project by project (round-robin), oldest first (runs
    // stored without an organization: by project). The ongoing-run quota counts a project's.
    // Queue metrics: the oldest QUEUED run.
    d.runs.createIndex({ state: 1, "lease.expiresAt": 1 }),
    d.runs.createIndex({ state: 1, waitUntil: 1 }),
    d.runs.createIndex({ state: 1, organizationId: 1, projectId: 1, createdAt: 1 }),
    d.runs.createIndex({ state: 1, projectId: 1, createdAt: 1 }),
    d.runs.createIndex({ state: 1, createdAt: 1 }),
    // The run search (store/run-search.ts): an environment's runs in the list order
    // (createdAt, _id), and the same under each filter, so that the index order serves the
    // sort of every page. A finish range walks its own index and sorts the page.
    d.runs.createIndex({ environmentId: 1, createdAt: 1, _id: 1 }),
    // The runs of a workflow, by age, whatever the environment (operators' and the tests' look-ups).
    d.runs.createIndex({ workflowId: 1, createdAt: 1 }),
    d.runs.createIndex({ environmentId: 1, workflowId: 1, createdAt: 1, _id: 1 }),
    d.runs.createIndex({ environmentId: 1, collection: 1, recordId: 1, createdAt: 1, _id: 1 }),
    // A record id alone: the runs on it in any collection of the environment.
    d.runs.createIndex({ environmentId: 1, recordId: 1, createdAt: 1, _id: 1 }),
    d.runs.createIndex({ environmentId: 1, state: 1, createdAt: 1, _id: 1 }),
    d.runs.createIndex({ environmentId: 1, via: 1, createdAt: 1, _id: 1 }),
    d.runs.createIndex({ environmentId: 1, userId: 1, createdAt: 1, _id: 1 }),
    d.runs.createIndex({ environmentId: 1, finishedAt: 1, createdAt: 1, _id: 1 }),
    // A run's retries (GetRun): only runs that retry another have an entry.
    d.runs.createIndex({ retryOf: 1 }, { sparse: true }),
    // The activity entries of runs' changes not yet cleared (RunDoc.pendingLog): a reader resolving
    // a position finds the run holding it, a sweep finds what a dead process left. Only those runs have an entry.
    d.runs.createIndex({ "pendingLog.key": 1 }, { sparse: true }),
  ];
}

/** The indexes of run batches (store/run-batches.ts); their items are read by `_id` alone. */
function runBatchIndexes(d: Database): Promise<string>[] {
  return [
    // A batch's ongoing runs (its pace: it reads at most RUNHOOK_BATCH_ONGOING_RUNS of them); only runs a batch started have an entry.
    d.runs.createIndex({ batchId: 1, state: 1 }, { partialFilterExpression: { batchId: { $exists: true } } }),
    // Claiming: the RUNNING batch whose lease expired first.
    d.runBatches.createIndex({ state: 1, "lease.expiresAt": 1 }),
    // ListRunBatches, newest first: an environment's batches, or those one user created.
    d.runBatches.createIndex({ environmentId: 1, createdAt: -1, _id: -1 }),
    d.runBatches.createIndex({ environmentId: 1, "createdBy.id": 1, createdAt: -1, _id: -1 }),
  ];
}

/** The directory's indexes: its unique names, and the lookups and lists of the AdminService and the rules. */
function directoryIndexes(d: Database): Promise<string>[] {
  return [
    d.organizations.createIndex({ name: 1 }, { unique: true }),
    // An address is unique within its organization only (another organization learns nothing).
    d.users.createIndex({ organizationId: 1, email: 1 }, { unique: true }),
    d.projects.createIndex({ organizationId: 1, name: 1 }, { unique: true }),
    d.projectRoles.createIndex({ projectId: 1, userId: 1 }, { unique: true }),
    // The projects of a user: where entries about the user's tokens and account are logged,
    // WhoAmI, and ListProjects of a user who is no organization admin (by project id).
    d.projectRoles.createIndex({ userId: 1, projectId: 1 }),
    d.environments.createIndex({ projectId: 1, name: 1 }, { unique: true }),
    // No two environments (of one tenant or two) ever share a data database.
    d.environments.createIndex({ dataDatabase: 1 }, { unique: true }),
    d.teams.createIndex({ projectId: 1, name: 1 }, { unique: true }),
    d.renderings.createIndex({ teamId: 1, environmentId: 1 }, { unique: true }),
    d.collections.createIndex({ environmentId: 1, name: 1 }, { unique: true }),
    d.workflows.createIndex({ renderingId: 1, name: 1 }),
    d.appTokens.createIndex({ hash: 1 }, { unique: true }),
    // A user's own application tokens (account settings, ListApplicationTokens).
    d.appTokens.createIndex({ userId: 1, _id: 1 }),
    d.apiTokens.createIndex({ hash: 1 }, { unique: true }),
    d.orgApiTokens.createIndex({ hash: 1 }, { unique: true }),
    // The AdminService lists: a parent's documents page by id (store/directory.ts pageOf).
    d.users.createIndex({ organizationId: 1, _id: 1 }),
    // A user by number (the public API's user ids), and the users not numbered yet (user-numbers.ts).
    d.users.createIndex({ organizationId: 1, number: 1 }),
    d.users.createIndex({ number: 1, _id: 1 }),
    d.projects.createIndex({ organizationId: 1, _id: 1 }),
    d.environments.createIndex({ projectId: 1, _id: 1 }),
    d.teams.createIndex({ projectId: 1, _id: 1 }),
    d.renderings.createIndex({ projectId: 1, _id: 1 }),
    d.renderings.createIndex({ environmentId: 1, _id: 1 }),
    d.collections.createIndex({ environmentId: 1, _id: 1 }),
    d.permissions.createIndex({ renderingId: 1, _id: 1 }),
    d.workflows.createIndex({ renderingId: 1, _id: 1 }),
    d.apiTokens.createIndex({ projectId: 1, _id: 1 }),
    // SSO API tokens not yet bound to the SSO token that made them (sso-tokens.ts, at each start).
    d.apiTokens.createIndex({ sso: 1, ssoTokenId: 1 }),
    d.orgApiTokens.createIndex({ organizationId: 1, _id: 1 }),
  ];
}

export async function ensureIndexes(d: Database, retention: Retention = DEFAULT_RETENTION): Promise<void> {
  const ttl = ttlIndexes(retention);
  await Promise.all(ttl.map((t) => changeExpiry(d, t)));
  // Before e-mail addresses were unique per organization they were unique everywhere: that index goes.
  await dropIfThere(d.users, "email_1");
  // A user's roles and application tokens were indexed by user alone; the lists page by (user, id): those serve both.
  await dropIfThere(d.projectRoles, "userId_1");
  await dropIfThere(d.appTokens, "userId_1");
  // A stream's time index did not hold the microseconds and the number: the longer ones serve both.
  await dropIfThere(d.activityLogs, "environmentId_1_timestamp_1");
  await dropIfThere(d.adminLogs, "projectId_1_timestamp_1");
  await dropIfThere(d.adminLogs, "organizationId_1_projectId_1_timestamp_1");
  await Promise.all([
    ...ttl.map((t) => d[t.collection].createIndex({ [t.field]: 1 }, { expireAfterSeconds: t.expireAfterSeconds })),
    ...directoryIndexes(d),
    ...runIndexes(d),
    ...runBatchIndexes(d),
    // Logs: unfiltered pages are `_id` (stream key) lookups and ranges; filtered pages, time
    // ranges and the export are scope + filter + the list order `seq`.
    d.activityLogs.createIndex({ environmentId: 1, seq: 1 }),
    d.activityLogs.createIndex({ runId: 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, action: 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, "user.id": 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, "user.email": 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, collection: 1, recordId: 1, seq: 1 }),
    // A team's entries (the rendering they were made in; null: none).
    d.activityLogs.createIndex({ environmentId: 1, rendering: 1, seq: 1 }),
    // A time range of a stream: the first entry at or after each end, whose number splits the
    // stream (its times rise with its numbers; store/logs.ts timeBounds). In number order, older
    // entries (no micros) included.
    d.activityLogs.createIndex({ environmentId: 1, timestamp: 1, micros: 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, action: 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, "actor.id": 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, "actor.email": 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, timestamp: 1, micros: 1, seq: 1 }),
    // An organization's own stream (entries without a project): the same, under (organizationId, projectId: null).
    d.adminLogs.createIndex({ organizationId: 1, projectId: 1, seq: 1 }),
    d.adminLogs.createIndex({ organizationId: 1, projectId: 1, action: 1, seq: 1 }),
    d.adminLogs.createIndex({ organizationId: 1, projectId: 1, "actor.id": 1, seq: 1 }),
    d.adminLogs.createIndex({ organizationId: 1, projectId: 1, "actor.email": 1, seq: 1 }),
    d.adminLogs.createIndex({ organizationId: 1, projectId: 1, timestamp: 1, micros: 1, seq: 1 }),
    d.notes.createIndex({ environmentId: 1, seq: 1 }),
    d.notes.createIndex({ environmentId: 1, collection: 1, recordId: 1, seq: 1 }),
    d.notes.createIndex({ seq: 1 }, { unique: true }),
  ]);
  // The records of every collection already defined (a new one gets its index when created).
  for await (const c of d.collections.find({}, { sort: { _id: 1 }, projection: { environmentId: 1, name: 1, primaryKey: 1 } })) {
    const environment = await d.environments.findOne({ _id: c.environmentId }, { projection: { dataDatabase: 1 } });
    if (environment) await ensureRecordIndex(d, environment.dataDatabase, c.name, c.primaryKey);
  }
}

/** Drops an index that is no longer declared, when it is there. */
async function dropIfThere(coll: { dropIndex(name: string): Promise<unknown> }, name: string): Promise<void> {
  await coll.dropIndex(name).catch((err: { code?: number }) => {
    if (err.code !== 26 && err.code !== 27) throw err; // NamespaceNotFound, IndexNotFound: nothing to drop
  });
}

/**
 * The index of an environment's collection of records: its primary key, which every data step
 * looks a record up by (one index in the environment's data database, not unique: the records
 * are their owner's, and runhook does not refuse what their systems stored).
 */
export async function ensureRecordIndex(d: Database, dataDatabase: string, collection: string, primaryKey: string[]): Promise<void> {
  await d
    .dataDb(dataDatabase)
    .collection(collection)
    .createIndex(Object.fromEntries(primaryKey.map((f) => [f, 1])));
}

/**
 * Brings an existing TTL index to the declared expiry (a changed retention setting), before
 * createIndex, which MongoDB refuses for the same keys with other options (and the embedded
 * server would list twice): collMod on MongoDB; where collMod is missing (the embedded
 * server), the index is dropped and created again.
 */
async function changeExpiry(d: Database, t: TtlIndex): Promise<void> {
  const coll = d[t.collection];
  const existing = (
    await coll
      .listIndexes()
      .toArray()
      .catch(() => [])
  ).find((i) => {
    const keys = Object.keys(i.key as object);
    return keys.length === 1 && keys[0] === t.field && i.expireAfterSeconds !== undefined;
  });
  if (!existing || existing.expireAfterSeconds === t.expireAfterSeconds) return;
  try {
    await d.db.command({ collMod: coll.collectionName, index: { name: existing.name, expireAfterSeconds: t.expireAfterSeconds } });
  } catch (err) {
    if ((err as { code?: unknown }).code !== COMMAND_NOT_FOUND) throw err;
    await coll.dropIndex(existing.name as string);
  }
}

/**
 * How often a TTL index is swept: every 1 % of its expiry, at least every SWEEP_EVERY_MS (rate-limit
 * windows: a minute; 30 days of runs: 7.2 h).
 */
export function sweepEveryMs(t: TtlIndex): number {
  return Math.max(SWEEP_EVERY_MS, t.expireAfterSeconds * 10);
}

/**
 * How many expired documents one delete of a sweep removes: few, because every write that
 * arrives meanwhile waits for the commit that holds the batch (on the embedded file backend a
 * batch of 100 runs with their indexes made commits of ~70 ms).
 */
export const SWEEP_BATCH = 10;

/**
 * What MongoDB's TTL monitor does, for servers that accept TTL indexes but never apply them
 * (the embedded mongo-java-server): deletes what the TTL indexes of ttlIndexes() (those `due`
 * picks, default all) have expired as of `now`, in batches: the oldest SWEEP_BATCH by the TTL
 * field's index, then those by `_id` (still expired: a document whose time moved since is
 * kept), until a batch comes back short. After each batch it rests as long as the batch took,
 * so a sweep uses at most half of the database's time for writes: other writes wait for one
 * small batch at most, never for the sweep. Harmless on MongoDB (the same deletions, a little
 * earlier). Returns how many documents it removed, by collection.
 */
export async function sweepExpired(
  d: Database,
  retention: Retention = DEFAULT_RETENTION,
  now = new Date(),
  due: (t: TtlIndex) => boolean = () => true,
): Promise<Partial<Record<CollectionName, number>>> {
  const removed: Partial<Record<CollectionName, number>> = {};
  for (const t of ttlIndexes(retention).filter(due)) {
    const expired = { [t.field]: { $lt: new Date(now.getTime() - t.expireAfterSeconds * 1000) } };
    const coll = d[t.collection] as unknown as Collection<{ _id: string }>;
    for (;;) {
      const started = performance.now();
      const ids = (await coll.find(expired, { sort: { [t.field]: 1 }, limit: SWEEP_BATCH, projection: { _id: 1 } }).toArray()).map((doc) => doc._id);
      if (ids.length === 0) break;
      const { deletedCount } = await coll.deleteMany({ _id: { $in: ids }, ...expired });
      if (deletedCount > 0) removed[t.collection] = (removed[t.collection] ?? 0) + deletedCount;
      if (ids.length < SWEEP_BATCH) break;
      await sleep(performance.now() - started);
    }
  }
  return removed;
}
