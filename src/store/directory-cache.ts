// The directory documents every call reads (its token, user, project, role, team, workflow…),
// kept per process while their organization's version stays the same (directory-version.ts). A
// call takes a view: the first lookup of an organization's document reads that organization's
// version — one command, shared by the calls that arrive together — and every lookup then serves
// from the cache when its entry was filled under that version, or reads the database (and fills
// the cache) when it was not. So a revoked token, a removed role or a disabled webhook is refused
// from the very next call on, on every instance; the documents a call reads are never older than
// the call; and one organization's changes leave every other organization's entries in place.
//
// Which organization a document belongs to never changes (a token's user, a user's or a
// project's organization, the project of a workflow, rendering, team, environment or API token),
// so each process learns it once per document, reading the database, and keeps it.
import { BSON } from "mongodb";
import { batched, ok } from "../lib/batch.js";
import { deepFreeze } from "../lib/freeze.js";
import { compareStamps, type DirectoryVersion, type Stamp } from "./directory-version.js";
import { STORE_BATCHING } from "./group-commit.js";
import type { TokenUseRecorder } from "./last-used.js";
import type { Role } from "./types.js";
import type * as T from "./types.js";

/** The lookups the rules make to decide what a caller may do. */
export interface DirectoryReads {
  workflows: { get(id: string): Promise<T.WorkflowDoc | null> };
  appTokens: { get(id: string): Promise<T.AppTokenDoc | null> };
  apiTokens: { get(id: string): Promise<T.ApiTokenDoc | null> };
  orgApiTokens: { get(id: string): Promise<T.OrgApiTokenDoc | null> };
  consoleSessions: { get(id: string): Promise<T.ConsoleSessionDoc | null> };
  users: { get(id: string): Promise<T.UserDoc | null> };
  projects: { get(id: string): Promise<T.ProjectDoc | null>; byName(organizationId: string, name: string): Promise<T.ProjectDoc | null> };
  renderings: { get(id: string): Promise<T.RenderingDoc | null> };
  environments: { byName(projectId: string, name: string): Promise<T.EnvironmentDoc | null> };
  roles: { get(projectId: string, userId: string): Promise<Role | null> };
  teams: { memberIds(id: string): Promise<string[] | null>; get(id: string): Promise<T.TeamDoc | null> };
  permissions: { get(renderingId: string, collectionId: string): Promise<T.PermissionDoc | null> };
  /** Records that a token authenticated a call (a write, never awaited: last-used.ts); absent where nothing records it. */
  tokenUsed?: TokenUseRecorder;
}

/**
 * What the cache may hold, per process, whatever callers make it read: documents are counted by
 * their BSON size, one larger than MAX_CACHED_DOC_BYTES is never kept, and beyond MAX_CACHE_BYTES
 * (or MAX_ENTRIES) the cache starts over.
 */
export const MAX_CACHE_BYTES = 64 * 2 ** 20;
export const MAX_CACHED_DOC_BYTES = 2 ** 20;
const MAX_ENTRIES = 50_000;
/** Documents whose organization a process knows (about 200 bytes each); beyond, it learns them again. */
const MAX_KNOWN_OWNERS = 100_000;
/** Every entry's key and bookkeeping, beyond its document. */
const ENTRY_OVERHEAD_BYTES = 200;

/** How often a process looks for directory changes while a long call (a watch, a wait, an export) listens. */
export const CHANGE_POLL_MS = 500;

/** The versions a call's lookups were exact for, per organization they read (null: a change was under way). */
export type DirectoryStamp = ReadonlyMap<string, Stamp | null>;

/** A call's lookups, and the versions they are exact for. */
export interface DirectoryView extends DirectoryReads {
  /** The versions of the organizations read so far (after the call's lookups: those it depends on). */
  version(): Promise<DirectoryStamp>;
  /**
   * The earliest expiry (epoch ms) of the tokens and console sessions read so far that have not
   * expired yet (undefined: none): what authenticated the call stops doing so then, with no
   * version raised.
   */
  expiresAt(): number | undefined;
}

export interface DirectoryCache {
  /** The lookups of one call: each organization's version is read once, shared with the calls that arrive together. */
  view(): DirectoryView;
  /** What the cache holds now (bytes, as counted against MAX_CACHE_BYTES). */
  cachedBytes(): number;
  /**
   * Calls `listener` once any organization of `since` is no longer at its version there (a
   * later version, or a change under way), within CHANGE_POLL_MS: one read of the versions per
   * process and interval while anyone listens. Long calls re-check their caller's access then (a
   * revoked token ends its watch). Returns the unsubscribe.
   */
  onChange(since: DirectoryStamp, listener: () => void): () => void;
}

const unchanged = (since: DirectoryStamp, now: Map<string, Stamp | null>) =>
  [...since].every(([org, was]) => {
    const is = now.get(org);
    return was && is && compareStamps(was, is) === 0;
  });

/** DirectoryCache.onChange over `version`: one poll every CHANGE_POLL_MS for all listeners, while there are some. */
function changeListeners(version: DirectoryVersion): DirectoryCache["onChange"] {
  /** Each listener with the versions it is exact for; told once, then forgotten. */
  const listeners = new Map<() => void, DirectoryStamp>();
  let polling = false;
  async function poll(): Promise<void> {
    try {
      const now = await version.read([...new Set([...listeners.values()].flatMap((since) => [...since.keys()]))]);
      for (const [listener, since] of [...listeners]) {
        if (!unchanged(since, now)) {
          listeners.delete(listener);
          listener();
        }
      }
    } catch {
      // the database is away: the next poll looks again (the calls themselves fail meanwhile)
    }
    polling = listeners.size > 0;
    if (polling) setTimeout(poll, CHANGE_POLL_MS).unref();
  }

  return (since, listener) => {
    listeners.set(listener, since);
    if (!polling) {
      polling = true;
      setTimeout(poll, CHANGE_POLL_MS).unref();
    }
    return () => void listeners.delete(listener);
  };
}

/** The reads that tell a document's organization (uncached: each process keeps only the answer). */
type OwnerReads = DirectoryReads;

/**
 * Per kind of lookup, its document's organization from the lookup's first argument (the
 * document's own id, or its project's), learned once per document (null: no such document).
 */
function ownerReads(dir: OwnerReads, known: (key: string, find: () => Promise<string | null>) => Promise<string | null>) {
  const ofProject = (projectId: string | undefined): Promise<string | null> | null =>
    projectId === undefined ? null : known(`project\u0000${projectId}`, async () => (await dir.projects.get(projectId))?.organizationId ?? null);
  const ofUser = (userId: string | undefined): Promise<string | null> | null =>
    userId === undefined ? null : known(`user\u0000${userId}`, async () => (await dir.users.get(userId))?.organizationId ?? null);
  const ofRendering = (id: string) => known(`rendering\u0000${id}`, async () => ofProject((await dir.renderings.get(id))?.projectId));
  return {
    workflow: (id: string) => known(`workflow\u0000${id}`, async () => ofProject((await dir.workflows.get(id))?.projectId)),
    appToken: (id: string) => known(`appToken\u0000${id}`, async () => ofUser((await dir.appTokens.get(id))?.userId)),
    apiToken: (id: string) => known(`apiToken\u0000${id}`, async () => ofProject((await dir.apiTokens.get(id))?.projectId)),
    orgApiToken: (id: string) => known(`orgApiToken\u0000${id}`, async () => (await dir.orgApiTokens.get(id))?.organizationId ?? null),
    user: ofUser,
    project: ofProject,
    // Named within an organization: the lookup's first argument is the organization.
    projectByName: async (organizationId: string) => organizationId,
    rendering: ofRendering,
    environmentByName: ofProject,
    role: ofProject,
    teamMembers: (id: string) => known(`team\u0000${id}`, async () => ofProject((await dir.teams.get(id))?.projectId)),
    team: (id: string) => known(`team\u0000${id}`, async () => ofProject((await dir.teams.get(id))?.projectId)),
    permission: ofRendering,
  };
}

interface Entry {
  stamp: Stamp;
  value: unknown;
  size: number;
}

/** The documents kept, each with the versions it was read under, bounded in entries and bytes. */
function keptEntries() {
  const entries = new Map<string, Entry>();
  let bytes = 0;
  function keep(key: string, stamp: Stamp, found: object | string[] | string) {
    const size = ENTRY_OVERHEAD_BYTES + (typeof found === "object" ? BSON.calculateObjectSize(found as object) : 8);
    if (size > MAX_CACHED_DOC_BYTES) return;
    const before = entries.get(key);
    if (before && compareStamps(before.stamp, stamp) > 0) return; // a later call's entry stays
    if (before) bytes -= before.size;
    else if (entries.size >= MAX_ENTRIES || bytes + size > MAX_CACHE_BYTES) {
      entries.clear();
      bytes = 0;
    }
    // Frozen: calls share it.
    entries.set(key, { stamp, value: deepFreeze(found), size });
    bytes += size;
  }
  return {
    bytes: () => bytes,
    /** `read`, through the cache, for a call that read `stamp` for the document's organization. */
    async lookup<R>(stamp: Stamp | null, key: string, read: () => Promise<R | null>): Promise<R | null> {
      if (stamp === null) return read(); // a change under way: the database itself
      const entry = entries.get(key);
      if (entry && compareStamps(entry.stamp, stamp) === 0) return entry.value as R;
      const found = await read();
      // Not found stays uncached: a document made later must be found then.
      if (found !== null) keep(key, stamp, found as object);
      return found;
    },
  };
}

export function directoryCache(dir: OwnerReads, version: DirectoryVersion): DirectoryCache {
  const entries = keptEntries();
  const owners = new Map<string, string>();
  /** The organization of the document a key names: known, or learned now (and kept unless there is none). */
  async function known(key: string, find: () => Promise<string | null>): Promise<string | null> {
    const org = owners.get(key);
    if (org !== undefined) return org;
    const found = await find();
    if (found !== null) {
      if (owners.size >= MAX_KNOWN_OWNERS) owners.clear();
      owners.set(key, found);
    }
    return found;
  }
  const ownerOf = ownerReads(dir, known);
  const readStamp = batched<string, Stamp | null>(async (orgs) => {
    const stamps = await version.read(orgs);
    return orgs.map((org) => ok(stamps.get(org) ?? null));
  }, STORE_BATCHING);

  return {
    cachedBytes: entries.bytes,
    onChange: changeListeners(version),
    view() {
      const stamps = new Map<string, Promise<Stamp | null>>();
      const stampOf = (org: string) => {
        const stamp = stamps.get(org) ?? readStamp(org);
        stamps.set(org, stamp);
        return stamp;
      };
      const through =
        <A extends string[], R>(kind: keyof typeof ownerOf, read: (...args: A) => Promise<R | null>) =>
        async (...args: A): Promise<R | null> => {
          const org = await ownerOf[kind](args[0] as string);
          // No such document (or its project is gone): nothing to cache, and this read is the call's own.
          if (org === null) return read(...args);
          return entries.lookup(await stampOf(org), `${kind}\u0000${args.join("\u0000")}`, () => read(...args));
        };
      let expiresAt: number | undefined;
      const expiring =
        <D extends { expiresAt: Date }>(read: (id: string) => Promise<D | null>) =>
        async (id: string): Promise<D | null> => {
          const doc = await read(id);
          const at = doc?.expiresAt.getTime();
          // One already expired authenticates nothing: no time to check again at.
          if (at !== undefined && at > Date.now() && (expiresAt === undefined || at < expiresAt)) expiresAt = at;
          return doc;
        };
      return {
        async version() {
          const now = new Map<string, Stamp | null>();
          for (const [org, stamp] of stamps) now.set(org, await stamp);
          return now;
        },
        expiresAt: () => expiresAt,
        workflows: { get: through("workflow", dir.workflows.get) },
        appTokens: { get: expiring(through("appToken", dir.appTokens.get)) },
        apiTokens: { get: expiring(through("apiToken", dir.apiTokens.get)) },
        orgApiTokens: { get: expiring(through("orgApiToken", dir.orgApiTokens.get)) },
        // Read each time, never kept: a session is read by its own browser's calls only.
        consoleSessions: { get: expiring(dir.consoleSessions.get) },
        users: { get: through("user", dir.users.get) },
        projects: { get: through("project", dir.projects.get), byName: through("projectByName", dir.projects.byName) },
        renderings: { get: through("rendering", dir.renderings.get) },
        environments: { byName: through("environmentByName", dir.environments.byName) },
        roles: { get: through("role", dir.roles.get) },
        teams: { memberIds: through("teamMembers", dir.teams.memberIds), get: through("team", dir.teams.get) },
        permissions: { get: through("permission", dir.permissions.get) },
        tokenUsed: dir.tokenUsed,
      };
    },
  };
}
