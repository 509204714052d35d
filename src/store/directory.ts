// Who and what runhook knows: organizations, users, projects and roles, environments, teams,
// renderings, collections and their permissions, workflows and tokens. The administration
// writes them (each change one single-document operation, under its organization's
// version protocol when it can change what a caller may do: directory-version.ts; so each
// such change names the organization); every call reads
// them to decide what a caller may do, through a view of the cache (directory-cache.ts). Each
// lookup here has its index in indexes.ts (or is by `_id`).
import { randomUUID } from "node:crypto";
import type { Collection, Document, Filter, OptionalUnlessRequiredId } from "mongodb";
import type { Role } from "./types.js";
import type { Database } from "./connection.js";
import { directoryCache } from "./directory-cache.js";
import { directoryVersion, type DirectoryVersion } from "./directory-version.js";
import { isDuplicateKey } from "./errors.js";
import { groupedIncrement } from "./group-commit.js";
import { tokenUseRecorder, type TokenKind } from "./last-used.js";
import type * as T from "./types.js";

/** A user's role on a project is stored under this _id, so reading it is one _id lookup. */
export function projectRoleId(projectId: string, userId: string): string {
  return `${projectId}:${userId}`;
}

/** A rendering's permission on a collection is stored under this _id. */
export function permissionId(renderingId: string, collectionId: string): string {
  return `${renderingId}:${collectionId}`;
}

/** What a webhook change does: enable, disable, or a new generation (the old URL stops working). */
export type WebhookChange = "enable" | "disable" | "regenerate";

const WEBHOOK_UPDATES: Record<WebhookChange, Record<string, unknown>> = {
  enable: { $set: { "webhook.enabled": true, "webhook.everEnabled": true } },
  disable: { $set: { "webhook.enabled": false } },
  regenerate: { $inc: { "webhook.generation": 1 } },
};

/** The collections of this store, by their handle's name. */
type Kind =
  | "organizations"
  | "users"
  | "projects"
  | "environments"
  | "teams"
  | "renderings"
  | "collections"
  | "workflows"
  | "appTokens"
  | "apiTokens"
  | "orgApiTokens"
  | "consoleSessions";
type DocOf<K extends Kind> = Database[K] extends Collection<infer D> ? D : never;

/** What every kind has: a lookup by `_id`, and an insert (that a unique index may refuse: isDuplicateKey). */
function documents<K extends Kind>(d: Database, kind: K) {
  // Read the handle at each call: after a reconnection it names the new client's collection.
  const coll = () => d[kind] as unknown as Collection<DocOf<K>>;
  return {
    get: (id: string) => coll().findOne({ _id: id } as Filter<DocOf<K>>),
    insert: async (doc: DocOf<K>) => void (await coll().insertOne(doc as OptionalUnlessRequiredId<DocOf<K>>)),
  };
}

/**
 * One page of a list: the documents of `kind` whose `field` is `value`, by `_id`, after `after`
 * (exclusive; undefined for the first page). Each list has its index `{field: 1, _id: 1}` in
 * indexes.ts: equality on the first key, a range on the second, which also gives the order.
 */
function pageOf<K extends Kind>(
  d: Database,
  kind: K,
  field: string,
  value: string,
  after: string | undefined,
  limit: number,
  projection?: Document,
): Promise<DocOf<K>[]> {
  const coll = d[kind] as unknown as Collection<DocOf<K>>;
  const filter = { [field]: value, ...(after === undefined ? {} : { _id: { $gt: after } }) } as Filter<DocOf<K>>;
  return coll.find(filter, { sort: { _id: 1 }, limit, projection }).toArray() as Promise<DocOf<K>[]>;
}

/** Documents of `kind` by their ids (an `_id` lookup), in the order of their ids. */
async function byIds<K extends Kind>(d: Database, kind: K, ids: string[]): Promise<DocOf<K>[]> {
  if (ids.length === 0) return [];
  const coll = d[kind] as unknown as Collection<DocOf<K>>;
  const docs = (await coll.find({ _id: { $in: ids } } as Filter<DocOf<K>>).toArray()) as unknown as (DocOf<K> & { _id: string })[];
  return docs.sort((a, b) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0));
}

/** The collection of each kind of token. */
const TOKEN_KINDS = { app: "appTokens", api: "apiTokens", org: "orgApiTokens" } as const satisfies Record<TokenKind, Kind>;

function organizationsStore(d: Database, v: DirectoryVersion) {
  return {
    ...documents(d, "organizations"),
    remove: (id: string) => v.change(id, async () => void (await d.organizations.deleteOne({ _id: id }))),
    byName: (name: string) => d.organizations.findOne({ name }),
    /** Whether any organization exists (an empty database gets the demo). */
    // The first by `_id`: a walk of the `_id` index that stops at once (an unsorted count scans).
    any: async () => (await d.organizations.findOne({}, { sort: { _id: 1 }, projection: { _id: 1 } })) !== null,
  };
}

function projectsStore(d: Database, v: DirectoryVersion) {
  return {
    ...documents(d, "projects"),
    byName: (organizationId: string, name: string) => d.projects.findOne({ organizationId, name }),
    /** A page of the organization's projects, by id. */
    list: (organizationId: string, after: string | undefined, limit: number) => pageOf(d, "projects", "organizationId", organizationId, after, limit),
    byIds: (ids: string[]) => byIds(d, "projects", ids),
    /** The project after the change, or null when it is gone. */
    setRequiresSso: (organizationId: string, id: string, requiresSso: boolean) =>
      v.change(organizationId, () => d.projects.findOneAndUpdate({ _id: id }, { $set: { requiresSso } }, { returnDocument: "after" })),
  };
}

/** Sets a user's role on a project: one upsert (two that race: the loser updates). */
async function setRole(d: Database, projectId: string, userId: string, role: Role): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await d.projectRoles.updateOne({ _id: projectRoleId(projectId, userId) }, { $set: { role }, $setOnInsert: { projectId, userId } }, { upsert: true });
      return;
    } catch (err) {
      if (!isDuplicateKey(err) || attempt > 2) throw err;
    }
  }
}

function rolesStore(d: Database, v: DirectoryVersion) {
  return {
    async get(projectId: string, userId: string): Promise<Role | null> {
      const doc = await d.projectRoles.findOne({ _id: projectRoleId(projectId, userId) });
      return doc?.role ?? null;
    },
    set: (organizationId: string, projectId: string, userId: string, role: Role): Promise<void> =>
      v.change(organizationId, () => setRole(d, projectId, userId, role)),
    remove: (organizationId: string, projectId: string, userId: string) =>
      v.change(organizationId, async () => void (await d.projectRoles.deleteOne({ _id: projectRoleId(projectId, userId) }))),
    /** A page of the user's roles, by project id (after `afterProjectId`). */
    ofUser: (userId: string, afterProjectId: string | undefined, limit: number) =>
      d.projectRoles
        .find({ userId, ...(afterProjectId === undefined ? {} : { projectId: { $gt: afterProjectId } }) }, { sort: { projectId: 1 }, limit })
        .toArray(),
    /** The ids of the projects the user has a role on. */
    projectsOf: async (userId: string): Promise<string[]> =>
      (await d.projectRoles.find({ userId }, { projection: { projectId: 1 } }).toArray()).map((r) => r.projectId),
  };
}

function teamsStore(d: Database, v: DirectoryVersion) {
  return {
    ...documents(d, "teams"),
    byName: (projectId: string, name: string) => d.teams.findOne({ projectId, name }),
    /** A page of the project's teams, by id. */
    list: (projectId: string, after: string | undefined, limit: number) => pageOf(d, "teams", "projectId", projectId, after, limit),
    async memberIds(id: string): Promise<string[] | null> {
      return (await d.teams.findOne({ _id: id }, { projection: { memberIds: 1 } }))?.memberIds ?? null;
    },
    /** Adds or removes a member; the team after, or null when it is gone. */
    setMember: (organizationId: string, id: string, userId: string, member: boolean) =>
      v.change(organizationId, () =>
        d.teams.findOneAndUpdate({ _id: id }, member ? { $addToSet: { memberIds: userId } } : { $pull: { memberIds: userId } }, { returnDocument: "after" }),
      ),
  };
}

function permissionsStore(d: Database, v: DirectoryVersion) {
  return {
    get: (renderingId: string, collectionId: string) => d.permissions.findOne({ _id: permissionId(renderingId, collectionId) }),
    /** A page of the rendering's permissions, by id (so by collection id). */
    ofRendering: (renderingId: string, after: string | undefined, limit: number) =>
      d.permissions.find({ renderingId, ...(after === undefined ? {} : { _id: { $gt: after } }) }, { sort: { _id: 1 }, limit }).toArray(),
    /** Stores the rendering's permission on the collection, replacing the one before. */
    put: (organizationId: string, doc: T.PermissionDoc): Promise<void> =>
      v.change(organizationId, async () => {
        await d.permissions.replaceOne({ _id: doc._id }, doc, { upsert: true }).catch(async (err: unknown) => {
          if (!isDuplicateKey(err)) throw err; // two upserts raced: the loser replaces
          await d.permissions.replaceOne({ _id: doc._id }, doc);
        });
      }),
  };
}

/**
 * A workflow as every read gets it: its versions without steps. Versions stored with their steps
 * inside (as runhook once stored them) are read without them too, so a workflow document stays
 * small whatever its history, and the directory cache keeps it; the steps of a version are read
 * on their own (immutable.ts workflowSteps).
 */
const WITHOUT_STEPS = { "versions.steps": 0 } as const;

function workflowsStore(d: Database, v: DirectoryVersion) {
  const after = { returnDocument: "after", projection: WITHOUT_STEPS } as const;
  return {
    get: (id: string) => d.workflows.findOne({ _id: id }, { projection: WITHOUT_STEPS }),
    /** A new workflow: its first version's steps are stored before (putSteps). */
    insert: async (doc: T.WorkflowDoc) => void (await d.workflows.insertOne(doc)),
    byName: (renderingId: string, name: string) => d.workflows.findOne({ renderingId, name }, { projection: WITHOUT_STEPS }),
    /** The ids of the rendering's workflows with this name (names are not unique), at most `limit`. */
    idsNamed: async (renderingId: string, name: string, limit: number) =>
      (
        await d.workflows
          .find({ renderingId, name }, { projection: { _id: 1 } })
          .limit(limit)
          .toArray()
      ).map((w) => w._id),
    /** A page of the rendering's workflows, by id. */
    ofRendering: (renderingId: string, after: string | undefined, limit: number) =>
      pageOf(d, "workflows", "renderingId", renderingId, after, limit, WITHOUT_STEPS),
    /**
     * Stores a version's steps, before the version that names them (pushVersion, insert): a
     * failure in between leaves steps that nothing names, never a version without its steps. The
     * steps document's id, unique: a version names its own steps, whatever publishes run at once.
     */
    async putSteps(workflowId: string, steps: T.StepDoc[], bytes: number): Promise<string> {
      const _id = randomUUID();
      await d.workflowSteps.insertOne({ _id, workflowId, steps, bytes, createdAt: new Date() });
      return _id;
    },
    /**
     * Appends `version` if the workflow still has `count` versions (so two concurrent publishes
     * cannot take one number), also setting the trigger roles when given; the workflow after, or
     * null when it changed meanwhile or is gone.
     */
    pushVersion: (organizationId: string, id: string, count: number, version: T.WorkflowVersionDoc, triggerRoles?: Role[]) =>
      v.change(organizationId, () =>
        d.workflows.findOneAndUpdate(
          { _id: id, versions: { $size: count } },
          { $push: { versions: version }, ...(triggerRoles ? { $set: { triggerRoles } } : {}) },
          after,
        ),
      ),
    /** Deactivates the version at `index` if it is still `version`; the workflow after, or null. */
    deactivateVersion: (organizationId: string, id: string, index: number, version: number) =>
      v.change(organizationId, () =>
        d.workflows.findOneAndUpdate({ _id: id, [`versions.${index}.version`]: version }, { $set: { [`versions.${index}.active`]: false } }, after),
      ),
    /** The workflow after the change, or null when it is gone. */
    changeWebhook: (organizationId: string, id: string, change: WebhookChange) =>
      v.change(organizationId, () => d.workflows.findOneAndUpdate({ _id: id }, WEBHOOK_UPDATES[change], after)),
    /** Sets the webhook's rate limit; the workflow before the change, or null when it is gone. */
    setWebhookRateLimit: (organizationId: string, id: string, limit: number) =>
      v.change(organizationId, () =>
        d.workflows.findOneAndUpdate({ _id: id }, { $set: { "webhook.rateLimitPerMinute": limit } }, { returnDocument: "before", projection: WITHOUT_STEPS }),
      ),
  };
}

function appTokensStore(d: Database, v: DirectoryVersion) {
  return {
    ...documents(d, "appTokens"),
    /** A page of the user's application tokens, by id. */
    ofUser: (userId: string, after: string | undefined, limit: number) => pageOf(d, "appTokens", "userId", userId, after, limit),
    byHash: (hash: string) => d.appTokens.findOne({ hash }),
    /** Revokes the token unless it already is; whether this call revoked it. */
    revoke: (organizationId: string, id: string, at: Date) =>
      v.change(organizationId, async () => (await d.appTokens.updateOne({ _id: id, revokedAt: null }, { $set: { revokedAt: at } })).modifiedCount === 1),
  };
}

// null also matches a missing field, as the index {sso, ssoTokenId} stores it.
const UNBOUND_SSO = { sso: true, ssoTokenId: null } as unknown as Filter<T.ApiTokenDoc>;

function apiTokensStore(d: Database, v: DirectoryVersion) {
  return {
    ...documents(d, "apiTokens"),
    /** A page of the project's API tokens, by id. */
    ofProject: (projectId: string, after: string | undefined, limit: number) => pageOf(d, "apiTokens", "projectId", projectId, after, limit),
    /** Up to `limit` SSO API tokens not yet bound to the SSO token that made them (made before that was recorded). */
    unboundSso: (limit: number) => d.apiTokens.find(UNBOUND_SSO, { limit }).toArray(),
    /**
     * Binds an unbound SSO API token to the SSO token that made it ("" for none found) and
     * brings its expiry forward to `until` if later; whether this call bound it.
     */
    bindToSsoToken: (organizationId: string, id: string, ssoTokenId: string, until: Date) =>
      v.change(
        organizationId,
        async () => (await d.apiTokens.updateOne({ ...UNBOUND_SSO, _id: id }, { $set: { ssoTokenId }, $min: { expiresAt: until } })).modifiedCount === 1,
      ),
    /** Revokes the token unless it already is; whether this call revoked it. */
    revoke: (organizationId: string, id: string, at: Date) =>
      v.change(organizationId, async () => (await d.apiTokens.updateOne({ _id: id, revokedAt: null }, { $set: { revokedAt: at } })).modifiedCount === 1),
  };
}

function orgApiTokensStore(d: Database, v: DirectoryVersion) {
  return {
    ...documents(d, "orgApiTokens"),
    /** A page of the organization's API tokens, by id. */
    ofOrganization: (organizationId: string, after: string | undefined, limit: number) =>
      pageOf(d, "orgApiTokens", "organizationId", organizationId, after, limit),
    /** Revokes the token unless it already is; whether this call revoked it. */
    revoke: (organizationId: string, id: string, at: Date) =>
      v.change(organizationId, async () => (await d.orgApiTokens.updateOne({ _id: id, revokedAt: null }, { $set: { revokedAt: at } })).modifiedCount === 1),
  };
}

/** The counter of an organization's user numbers. */
export const userNumbers = (organizationId: string) => `users:${organizationId}`;

function usersStore(d: Database) {
  const next = groupedIncrement(() => d.counters, "seq");
  const nextNumber = async (organizationId: string) => (await next(userNumbers(organizationId))).value;
  return {
    ...documents(d, "users"),
    /** Stores a new user with the next number of its organization (set on `doc`). */
    async insert(doc: T.UserDoc): Promise<void> {
      doc.number = await nextNumber(doc.organizationId);
      await d.users.insertOne(doc);
    },
    byNumber: (organizationId: string, number: number) => d.users.findOne({ organizationId, number }),
    /** Users stored before runhook numbered them, a batch at a time. */
    unnumbered: (limit: number) => d.users.find({ number: null } as unknown as Filter<T.UserDoc>, { sort: { number: 1, _id: 1 }, limit }).toArray(),
    /** Gives an unnumbered user the next number of its organization; false when another process did first. */
    async number(user: T.UserDoc): Promise<boolean> {
      const number = await nextNumber(user.organizationId);
      return (await d.users.updateOne({ _id: user._id, number: null } as unknown as Filter<T.UserDoc>, { $set: { number } })).modifiedCount === 1;
    },
  };
}

export function directoryStore(d: Database) {
  const v = directoryVersion(d);
  const store = {
    organizations: organizationsStore(d, v),
    users: {
      ...usersStore(d),
      /** E-mail addresses are unique per organization, so a lookup names the organization. */
      byEmail: (organizationId: string, email: string) => d.users.findOne({ organizationId, email }),
      /** A page of the organization's users, by id. */
      list: (organizationId: string, after: string | undefined, limit: number) => pageOf(d, "users", "organizationId", organizationId, after, limit),
      byIds: (ids: string[]) => byIds(d, "users", ids),
    },
    projects: projectsStore(d, v),
    roles: rolesStore(d, v),
    environments: {
      ...documents(d, "environments"),
      byName: (projectId: string, name: string) => d.environments.findOne({ projectId, name }),
      /** A page of the project's environments, by id. */
      list: (projectId: string, after: string | undefined, limit: number) => pageOf(d, "environments", "projectId", projectId, after, limit),
    },
    teams: teamsStore(d, v),
    renderings: {
      ...documents(d, "renderings"),
      of: (teamId: string, environmentId: string) => d.renderings.findOne({ teamId, environmentId }),
      /** A page of the project's renderings, by id. */
      ofProject: (projectId: string, after: string | undefined, limit: number) => pageOf(d, "renderings", "projectId", projectId, after, limit),
      /** A page of the environment's renderings, by id. */
      ofEnvironment: (environmentId: string, after: string | undefined, limit: number) => pageOf(d, "renderings", "environmentId", environmentId, after, limit),
    },
    collections: {
      ...documents(d, "collections"),
      byName: (environmentId: string, name: string) => d.collections.findOne({ environmentId, name }),
      /** A page of the environment's collections, by id. */
      list: (environmentId: string, after: string | undefined, limit: number) => pageOf(d, "collections", "environmentId", environmentId, after, limit),
    },
    permissions: permissionsStore(d, v),
    workflows: workflowsStore(d, v),
    appTokens: appTokensStore(d, v),
    apiTokens: apiTokensStore(d, v),
    orgApiTokens: orgApiTokensStore(d, v),
    consoleSessions: {
      ...documents(d, "consoleSessions"),
      /**
       * Signs the session out. Its organization's version is raised as by a revoke, so that the long
       * calls it holds, on every process, check it again; without an organization (its user is
       * gone, so it authenticates nothing) there is nothing to tell.
       */
      remove: async (organizationId: string | null, id: string) => {
        const remove = async () => void (await d.consoleSessions.deleteOne({ _id: id }));
        await (organizationId === null ? remove() : v.change(organizationId, remove));
      },
    },
    /** Records that a token authenticated a call (last-used.ts): at most one write a minute per token, never awaited. */
    tokenUsed: tokenUseRecorder((kind, id, at) => {
      const coll = d[TOKEN_KINDS[kind]] as unknown as Collection<T.TokenDocBase>;
      return coll.updateOne({ _id: id }, { $max: { lastUsedAt: at } });
    }),
  };
  const cache = directoryCache(store, v);
  return {
    ...store,
    /** The lookups of one call, through the cache (see directory-cache.ts): take one per call. */
    view: cache.view,
    /** Listens for changes of the directory (see directory-cache.ts): what long calls re-check access on. */
    onChange: cache.onChange,
    /** What the cache holds (bytes): bounded by MAX_CACHE_BYTES (directory-cache.ts). */
    cachedBytes: cache.cachedBytes,
  };
}

export type DirectoryStore = ReturnType<typeof directoryStore>;
