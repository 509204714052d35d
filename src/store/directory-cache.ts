// The directory documents every call reads (its token, user, project, role, team, workflow…),
// kept per process while the directory's version stays the same (directory-version.ts). A call
// takes a view: its first lookup reads the version — one command, shared by the calls that
// arrive together — and every lookup of the call then serves from the cache when that version
// is the cache's, or reads the database (and fills the cache) when it is not. So a revoked
// token, a removed role or a disabled webhook is refused from the very next call on, on every
// instance; and the documents a call reads are never older than the call.
import { BSON } from "mongodb";
import { batched, ok } from "../lib/batch.js";
import type { DirectoryVersion } from "./directory-version.js";
import { STORE_BATCHING } from "./group-commit.js";
import type { Role } from "./types.js";
import type * as T from "./types.js";

/** The lookups the rules make to decide what a caller may do. */
export interface DirectoryReads {
  workflows: { get(id: string): Promise<T.WorkflowDoc | null> };
  appTokens: { get(id: string): Promise<T.AppTokenDoc | null> };
  apiTokens: { get(id: string): Promise<T.ApiTokenDoc | null> };
  orgApiTokens: { get(id: string): Promise<T.OrgApiTokenDoc | null> };
  users: { get(id: string): Promise<T.UserDoc | null> };
  projects: { get(id: string): Promise<T.ProjectDoc | null> };
  renderings: { get(id: string): Promise<T.RenderingDoc | null> };
  environments: { byName(projectId: string, name: string): Promise<T.EnvironmentDoc | null> };
  roles: { get(projectId: string, userId: string): Promise<Role | null> };
  teams: { memberIds(id: string): Promise<string[] | null> };
  permissions: { get(renderingId: string, collectionId: string): Promise<T.PermissionDoc | null> };
}

/**
 * What the cache may hold, per process, whatever callers make it read: documents are counted by
 * their BSON size, one larger than MAX_CACHED_DOC_BYTES is never kept, and beyond MAX_CACHE_BYTES
 * (or MAX_ENTRIES) the cache starts over.
 */
export const MAX_CACHE_BYTES = 64 * 2 ** 20;
export const MAX_CACHED_DOC_BYTES = 2 ** 20;
const MAX_ENTRIES = 50_000;
/** Every entry's key and bookkeeping, beyond its document. */
const ENTRY_OVERHEAD_BYTES = 200;

function deepFreeze<V>(value: V): V {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** How often a process looks for directory changes while a long call (a watch, a wait, an export) listens. */
export const CHANGE_POLL_MS = 500;

/** A call's lookups, and the version they are exact for (read by the first lookup; null: a change was under way). */
export interface DirectoryView extends DirectoryReads {
  version(): Promise<number | null>;
}

export interface DirectoryCache {
  /** The lookups of one call: the first one reads the version, the others share that read. */
  view(): DirectoryView;
  /** What the cache holds now (bytes, as counted against MAX_CACHE_BYTES). */
  cachedBytes(): number;
  /**
   * Calls `listener` once the directory is no longer at version `since` (a later version, or a
   * change under way), within CHANGE_POLL_MS: one read of the version per process and interval
   * while anyone listens. Long calls re-check their caller's access then (a revoked token ends
   * its watch). Returns the unsubscribe.
   */
  onChange(since: number | null, listener: () => void): () => void;
}

/** DirectoryCache.onChange over `readVersion`: one poll every CHANGE_POLL_MS for all listeners, while there are some. */
function changeListeners(readVersion: () => Promise<number | null>): DirectoryCache["onChange"] {
  /** Each listener with the version it is exact for; told once, then forgotten. */
  const listeners = new Map<() => void, number | null>();
  let polling = false;
  async function poll(): Promise<void> {
    try {
      const v = await readVersion();
      for (const [listener, since] of [...listeners]) {
        if (v === null || since === null || v !== since) {
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

export function directoryCache(dir: DirectoryReads, version: DirectoryVersion): DirectoryCache {
  let cachedVersion = -1;
  const entries = new Map<string, unknown>();
  let bytes = 0;
  const clear = () => {
    entries.clear();
    bytes = 0;
  };
  const readVersion = batched<void, number | null>(async (calls) => {
    const v = await version.read();
    return calls.map(() => ok(v));
  }, STORE_BATCHING);

  /** `read`, through the cache, for a call that read `at`. */
  async function lookup<R>(at: number | null, key: string, read: () => Promise<R | null>): Promise<R | null> {
    if (at === null || at < cachedVersion) return read(); // a change under way, or an older view: the database itself
    if (at > cachedVersion) {
      cachedVersion = at;
      clear();
    }
    if (entries.has(key)) return entries.get(key) as R;
    const found = await read();
    // Not found stays uncached: a document made later must be found then. Frozen: calls share it.
    if (found !== null && cachedVersion === at && !entries.has(key)) {
      const size = ENTRY_OVERHEAD_BYTES + (typeof found === "object" ? BSON.calculateObjectSize(found as object) : 8);
      if (size > MAX_CACHED_DOC_BYTES) return found;
      if (entries.size >= MAX_ENTRIES || bytes + size > MAX_CACHE_BYTES) clear();
      entries.set(key, deepFreeze(found));
      bytes += size;
    }
    return found;
  }

  return {
    cachedBytes: () => bytes,
    onChange: changeListeners(readVersion),
    view() {
      let at: Promise<number | null> | undefined;
      const version = () => {
        at ??= readVersion();
        return at;
      };
      const through =
        <A extends string[], R>(kind: string, read: (...args: A) => Promise<R | null>) =>
        async (...args: A) =>
          lookup(await version(), `${kind}\u0000${args.join("\u0000")}`, () => read(...args));
      return {
        version,
        workflows: { get: through("workflow", dir.workflows.get) },
        appTokens: { get: through("appToken", dir.appTokens.get) },
        apiTokens: { get: through("apiToken", dir.apiTokens.get) },
        orgApiTokens: { get: through("orgApiToken", dir.orgApiTokens.get) },
        users: { get: through("user", dir.users.get) },
        projects: { get: through("project", dir.projects.get) },
        renderings: { get: through("rendering", dir.renderings.get) },
        environments: { byName: through("environmentByName", dir.environments.byName) },
        roles: { get: through("role", dir.roles.get) },
        teams: { memberIds: through("teamMembers", dir.teams.memberIds) },
        permissions: { get: through("permission", dir.permissions.get) },
      };
    },
  };
}
