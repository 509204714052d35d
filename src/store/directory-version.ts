// The directory's versions, by which every instance's cache of directory documents stays exact
// (see directory-cache.ts). Each organization has its own version document, so one tenant's
// changes never clear another's cache; one more document, raised by operators after an edit
// straight in the database, stands for every organization. A change of a document that grants
// or revokes access runs in three single-document writes on its organization's version: its
// intent is recorded, the change is made, and the intent is removed while the version is raised.
// A reader that sees no intent and the versions its cache entry was filled under may serve it:
// no change has been made since. One that sees an intent reads the database itself, so a change
// is never hidden, not even while it is being made; one that sees a newer version reads again.
// An intent left by a writer that died is removed (and the version raised) once it is
// STALE_INTENT_MS old.
import { randomUUID } from "node:crypto";
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";

/** The version document of every organization (the one operators raise after editing the database by hand). */
export const EVERY_ORGANIZATION_VERSION_ID = "directory";
/** The version document of one organization. */
export const organizationVersionId = (organizationId: string) => `org:${organizationId}`;
/** Longer than any change takes; instances' clocks must agree to well within it. */
export const STALE_INTENT_MS = 60_000;

/** What an organization's documents are exact for: the version of every organization, then its own (both only rise). */
export interface Stamp {
  all: number;
  org: number;
}

/** Orders two stamps read at different times (later reads are never lower in either part). */
export const compareStamps = (a: Stamp, b: Stamp) => a.all - b.all || a.org - b.org;

export interface DirectoryVersion {
  /** Runs `apply`, a change of the organization's directory documents, under the protocol above. */
  change<T>(organizationId: string, apply: () => Promise<T>): Promise<T>;
  /** The first two steps only, as a writer that died after its change leaves them (tests: its intent dated `at`). */
  changeAndDie(organizationId: string, apply: () => Promise<unknown>, at?: Date): Promise<void>;
  /** Each organization's stamp, or null while a change of it (or of every organization) is under way: one read. */
  read(organizationIds: readonly string[]): Promise<Map<string, Stamp | null>>;
  /** Removes the intents dated before `cutoff` from these version documents and raises them (what a reader does with stale ones). */
  clearIntents(versionIds: readonly string[], cutoff: Date): Promise<void>;
}

export function directoryVersion(d: Database): DirectoryVersion {
  const coll = () => d.directoryVersion;
  async function announce(versionId: string, id: string, at = new Date()): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await coll().updateOne({ _id: versionId }, { $push: { pending: { id, at } }, $setOnInsert: { version: 0 } }, { upsert: true });
        return;
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 3) throw err; // two first upserts raced: the loser updates
      }
    }
  }
  async function clearIntents(versionIds: readonly string[], cutoff: Date): Promise<void> {
    for (const _id of versionIds) {
      await coll().updateOne({ _id, "pending.at": { $lt: cutoff } }, { $pull: { pending: { at: { $lt: cutoff } } }, $inc: { version: 1 } });
    }
  }
  return {
    async change(organizationId, apply) {
      const versionId = organizationVersionId(organizationId);
      const id = randomUUID();
      await announce(versionId, id);
      try {
        return await apply();
      } finally {
        // Also after a failed change: it may have been made all the same (a timeout after the server applied it).
        await coll().updateOne({ _id: versionId }, { $pull: { pending: { id } }, $inc: { version: 1 } });
      }
    },
    async changeAndDie(organizationId, apply, at) {
      await announce(organizationVersionId(organizationId), randomUUID(), at);
      await apply();
    },
    async read(organizationIds) {
      const ids = [EVERY_ORGANIZATION_VERSION_ID, ...[...new Set(organizationIds)].map(organizationVersionId)];
      const docs = new Map(
        (
          await coll()
            .find({ _id: { $in: ids } })
            .toArray()
        ).map((doc) => [doc._id, doc]),
      );
      const cutoff = new Date(Date.now() - STALE_INTENT_MS);
      const stale = [...docs.values()].filter((doc) => doc.pending.some((p) => p.at < cutoff)).map((doc) => doc._id);
      if (stale.length > 0) await clearIntents(stale, cutoff);
      const every = docs.get(EVERY_ORGANIZATION_VERSION_ID);
      const stamps = new Map<string, Stamp | null>();
      for (const organizationId of organizationIds) {
        const own = docs.get(organizationVersionId(organizationId));
        const busy = (every?.pending.length ?? 0) > 0 || (own?.pending.length ?? 0) > 0;
        stamps.set(organizationId, busy ? null : { all: every?.version ?? 0, org: own?.version ?? 0 });
      }
      return stamps;
    },
    clearIntents,
  };
}
