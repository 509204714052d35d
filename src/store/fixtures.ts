// What only tests and benchmarks do with the store: read any collection (read-only views, for
// assertions), and put documents into states that time, a crash or an administrator would
// otherwise produce, so that a test need not wait for them. runhook itself never calls them;
// they live here because only the store writes queries and updates.
import type { Collection, Document } from "mongodb";
import type { CollectionName, Database } from "./connection.js";
import { directoryVersion, EVERY_ORGANIZATION_VERSION_ID, organizationVersionId } from "./directory-version.js";
import { databaseOf } from "./handle.js";
import { finishedActiveKey } from "./runs.js";
import type { Store } from "./index.js";
import type { ActivityLogDoc, Role, RunDoc, RunState, WorkflowDoc, WorkflowVersionWithSteps } from "./types.js";

/** The reads of a collection, and nothing that changes it. */
export type ReadView<T extends Document> = Pick<
  Collection<T>,
  "find" | "findOne" | "countDocuments" | "estimatedDocumentCount" | "indexes" | "listIndexes" | "aggregate"
>;

const READS = ["find", "findOne", "countDocuments", "estimatedDocumentCount", "indexes", "listIndexes", "aggregate"] as const;

/** A read-only view of the collection `handle()` names at each call (after a reconnection, the new client's). */
function readView<T extends Document>(handle: () => Collection<T>): ReadView<T> {
  // biome-ignore lint/suspicious/noExplicitAny: each method is forwarded with its own overloads
  return Object.fromEntries(READS.map((m) => [m, (...args: unknown[]) => (handle()[m] as any)(...args)])) as unknown as ReadView<T>;
}

type Views = { readonly [K in CollectionName]: ReadView<Database[K] extends Collection<infer D> ? D : never> };

function readViews(d: Database): Views {
  const names: CollectionName[] = [
    "organizations",
    "users",
    "projects",
    "projectRoles",
    "environments",
    "teams",
    "renderings",
    "collections",
    "permissions",
    "workflows",
    "workflowSteps",
    "appTokens",
    "apiTokens",
    "orgApiTokens",
    "consoleSessions",
    "runs",
    "activityLogs",
    "adminLogs",
    "logDigests",
    "notes",
    "counters",
    "rateLimits",
    "idempotencyKeys",
    "directoryVersion",
    "runBatches",
    "runBatchItems",
  ];
  return Object.fromEntries(names.map((n) => [n, readView(() => d[n] as unknown as Collection<Document>)])) as unknown as Views;
}

/** A finished run's state fields but its final state: finished now, its record's slot freed. */
function finished(runId: string) {
  const finishedAt = new Date();
  return { finishedAt, activeKey: finishedActiveKey(runId, finishedAt) };
}

/** Changes of runs that only an executor, a crash or time would make. */
function runFixtures(d: Database) {
  return {
    /** Runs stored as they are (a plain insert: a second ongoing run on a record fails with the unique index's error). */
    insertRuns: async (runs: RunDoc[]) => void (await d.runs.insertMany(runs)),
    /** A run gone, as the retention would remove it. */
    removeRun: async (runId: string) => void (await d.runs.deleteOne({ _id: runId })),
    /** Every queued run of a project gone (a benchmark's backlog cleared). */
    removeQueuedRuns: async (projectId: string) => void (await d.runs.deleteMany({ projectId, state: "QUEUED" })),
    /** A run finished as if its executor had succeeded: its record's slot is free again. */
    finishRun: async (runId: string) => void (await d.runs.updateOne({ _id: runId }, { $set: { state: "SUCCEEDED", ...finished(runId) } })),
    /** A run's state forced (its slot kept): what an executor's claim leaves, without one. */
    setRunState: async (runId: string, state: RunState) => void (await d.runs.updateOne({ _id: runId }, { $set: { state } })),
    /** Every run of a workflow cancelled at once, so that executors let them go. */
    cancelRunsOf: async (workflowId: string) => void (await d.runs.updateMany({ workflowId }, { $set: { state: "CANCELLED" } })),
    /** A run claimed by an executor that died at once: RUNNING, its lease already expired. */
    strandRun: async (runId: string, expiredMsAgo = 1000) =>
      void (await d.runs.updateOne(
        { _id: runId },
        { $set: { state: "RUNNING", startedAt: new Date(), lease: { owner: "dead#1", expiresAt: new Date(Date.now() - expiredMsAgo) } } },
      )),
    /** The reference point of the end-to-end benchmark: one run's cycle written by hand (insert, claim, read and update the record, finish). */
    async rawRunCycle(run: RunDoc, data: { database: string; collection: string; recordId: string }): Promise<"ok" | "claim-lost" | "record-missing"> {
      const records = d.dataDb(data.database).collection<{ id: string; status: string }>(data.collection);
      await d.runs.insertOne(run);
      const lease = { owner: "raw", expiresAt: new Date(Date.now() + 10_000) };
      const claimed = await d.runs.findOneAndUpdate({ _id: run._id, state: "QUEUED" }, { $set: { state: "RUNNING", startedAt: new Date(), lease } });
      if (!claimed) return "claim-lost";
      if (!(await records.findOne({ id: data.recordId }))) return "record-missing";
      await records.updateOne({ id: data.recordId }, { $set: { status: "done" } });
      await d.runs.updateOne({ _id: run._id }, { $set: { state: "SUCCEEDED", ...finished(run._id), lease: null } });
      return "ok";
    },
  };
}

/** Changes an administrator (or a hostile one, past the API's checks) would make: under the organization's directory version, as every directory change. */
function directoryFixtures(d: Database) {
  const version = directoryVersion(d);
  const { changeAndDie } = version;
  // The organization a change is under, found the way a test knows nothing of it.
  const orgOfUser = async (userId: string) => (await d.users.findOne({ _id: userId }))!.organizationId;
  const orgOfProject = async (projectId: string) => (await d.projects.findOne({ _id: projectId }))!.organizationId;
  const orgOfToken = async (tokenId: string) => orgOfUser((await d.appTokens.findOne({ _id: tokenId }))!.userId);
  const orgOfTeam = async (teamId: string) => orgOfProject((await d.teams.findOne({ _id: teamId }))!.projectId);
  const orgOfRendering = async (id: string) => orgOfProject((await d.renderings.findOne({ _id: id }))!.projectId);
  const orgOfWorkflow = async (id: string) => orgOfProject((await d.workflows.findOne({ _id: id }))!.projectId);
  const change = async (org: Promise<string>, apply: () => Promise<unknown>) => void (await version.change(await org, apply));
  return {
    /**
     * An application token revoked by a writer that died between its change and the raise of
     * its organization's version (its intent left behind, dated `intentAt`).
     */
    revokeAppTokenAndDie: async (tokenId: string, intentAt?: Date) =>
      changeAndDie(await orgOfToken(tokenId), () => d.appTokens.updateOne({ _id: tokenId }, { $set: { revokedAt: new Date() } }), intentAt),
    /** Every intent of a change of the user's organization removed and the version raised: what readers do with stale intents, without the wait. */
    removeDirectoryIntents: async (userId: string) => version.clearIntents([organizationVersionId(await orgOfUser(userId))], new Date(Date.now() + 1000)),
    /** The version document of the user's organization. */
    organizationVersion: async (userId: string) => d.directoryVersion.findOne({ _id: organizationVersionId(await orgOfUser(userId)) }),
    /**
     * A workflow as runhook stored workflows before a version's steps had a document of their
     * own: each version holds its steps (an upgraded database keeps such workflows).
     */
    insertEmbeddedStepsWorkflow: async (doc: Omit<WorkflowDoc, "versions"> & { versions: WorkflowVersionWithSteps[] }) =>
      void (await d.workflows.insertOne(doc as WorkflowDoc)),
    /** A user taken out of a team's members. */
    removeTeamMember: (teamId: string, userId: string) => change(orgOfTeam(teamId), () => d.teams.updateOne({ _id: teamId }, { $pull: { memberIds: userId } })),
    /** A user gone from the database (its tokens stay). */
    removeUser: (userId: string) => change(orgOfUser(userId), () => d.users.deleteOne({ _id: userId })),
    /** The roles that may edit a collection through a rendering. */
    setEditRoles: (renderingId: string, collectionId: string, roles: Role[]) =>
      change(orgOfRendering(renderingId), () => d.permissions.updateOne({ _id: `${renderingId}:${collectionId}` }, { $set: { editRoles: roles } })),
    /** The roles that may trigger a workflow. */
    setTriggerRoles: (workflowId: string, roles: Role[]) =>
      change(orgOfWorkflow(workflowId), () => d.workflows.updateOne({ _id: workflowId }, { $set: { triggerRoles: roles } })),
    /** An application token's expiry moved. */
    setAppTokenExpiry: (tokenId: string, expiresAt: Date) =>
      change(orgOfToken(tokenId), () => d.appTokens.updateOne({ _id: tokenId }, { $set: { expiresAt } })),
    /** A console session's expiry moved (sessions are never cached, so no version is raised). */
    setConsoleSessionExpiry: async (sessionId: string, expiresAt: Date) =>
      void (await d.consoleSessions.updateOne({ _id: sessionId }, { $set: { expiresAt } })),
    /** An application token revoked straight in the database, as an operator's script would: under no version. */
    revokeAppTokenBehindTheCaches: async (tokenId: string) => void (await d.appTokens.updateOne({ _id: tokenId }, { $set: { revokedAt: new Date() } })),
    /** What operators are told to run after such an edit: the version of every organization raised. */
    raiseEveryOrganizationVersion: async () =>
      void (await d.directoryVersion.updateOne(
        { _id: EVERY_ORGANIZATION_VERSION_ID },
        { $inc: { version: 1 }, $setOnInsert: { pending: [] } },
        { upsert: true },
      )),
  };
}

/** Log entries and counters written in bulk, or lost. */
function logFixtures(d: Database) {
  return {
    /** Activity entries stored as they are (positions a test chose; with `ordered: false`, duplicates are skipped and reported). */
    insertActivityEntries: async (entries: ActivityLogDoc[], opts: { ordered?: boolean } = {}) => void (await d.activityLogs.insertMany(entries, opts)),
    /** Activity entries (or the placeholders of holes) gone, by `_id`. */
    removeActivityEntries: async (ids: string[]) => void (await d.activityLogs.deleteMany({ _id: { $in: ids } })),
    /** A log stream's counter set to `seq` (entries written in bulk by a test). */
    setCounter: async (stream: string, seq: number) => void (await d.counters.updateOne({ _id: stream }, { $set: { seq } }, { upsert: true })),
    /** An idempotency key's expiry or reservation time moved (by its `_id`: domain/idempotency.ts idempotencyKeyId). */
    setIdempotencyKeyTimes: async (keyId: string, times: { expiresAt?: Date; reservedAt?: Date }) =>
      void (await d.idempotencyKeys.updateOne({ _id: keyId }, { $set: times })),
  };
}

/** The databases themselves: an environment's records, the names and indexes, and collections that are not runhook's. */
function databaseFixtures(d: Database) {
  return {
    /** The records of an environment's collection, read-only. */
    records: (database: string, collection: string) => readView(() => d.dataDb(database).collection(collection)),
    /** Records stored into an environment's collection (as its owner's own systems would). */
    insertRecords: async (database: string, collection: string, records: Document[]) => {
      for (let i = 0; i < records.length; i += 5000)
        await d
          .dataDb(database)
          .collection(collection)
          .insertMany(records.slice(i, i + 5000).map((r) => ({ ...r })));
    },
    /** The name in the database of the collection a handle (`runs`, `activityLogs`, …) addresses. */
    collectionNameOf: (handle: CollectionName) => d[handle].collectionName,
    /** Every index of every collection of runhook's database, by collection name. */
    async indexesByCollection(): Promise<Map<string, Document[]>> {
      const out = new Map<string, Document[]>();
      for (const c of await d.db.listCollections().toArray()) out.set(c.name, await d.db.collection(c.name).listIndexes().toArray());
      return out;
    },
    /**
     * A collection that is none of runhook's, with every operation (a benchmark's baseline, a
     * test of the database's own guarantees): runhook's own collections are refused.
     */
    scratch<T extends Document = Document>(name: string): Collection<T> {
      if (Object.values(d).some((h) => (h as { collectionName?: string })?.collectionName === name)) throw new Error(`${name} is one of runhook's collections`);
      return d.db.collection<T>(name);
    },
    /**
     * How the server would run a command (find, findAndModify, update, delete, aggregate, count)
     * in `database` (runhook's when omitted): its explain, with the plan's stages (and, with
     * "executionStats", what running it examined).
     */
    explain: (command: Document, database?: string, verbosity: "queryPlanner" | "executionStats" = "queryPlanner") =>
      (database ? d.dataDb(database) : d.db).command({ explain: command, verbosity }),
    /** The server's check of a collection of runhook's database (by its name): its documents, and the entries of each index (`keysPerIndex`). */
    validate: (name: string) => d.db.command({ validate: name }) as Promise<{ nrecords: number; keysPerIndex: Record<string, number> }>,
    /** A command to the server itself (the admin database): hello, serverStatus… */
    serverCommand: (command: Document) => d.db.admin().command(command),
    /** Runhook's database dropped. */
    dropDatabase: async () => void (await d.db.dropDatabase()),
    /** An environment's data database dropped. */
    dropDataDatabase: async (name: string) => void (await d.dataDb(name).dropDatabase()),
    /** The driver's command events (commandStarted, commandSucceeded, commandFailed) of the client in use. */
    /** Where reads go: runhook's database and a data database (a standalone server is never sent a read preference, so this is how a test sees it). */
    readPreferences: () => ({ service: d.db.readPreference.mode, data: d.dataDb("any").readPreference.mode }),
    commandEvents: () => d.client as Pick<Database["client"], "on" | "off" | "options">,
  };
}

export function storeFixtures(store: Store) {
  const d = databaseOf(store);
  return { ...readViews(d), ...runFixtures(d), ...directoryFixtures(d), ...logFixtures(d), ...databaseFixtures(d) };
}

export type StoreFixtures = ReturnType<typeof storeFixtures>;
