// The directory's version, by which every instance's cache of directory documents stays exact
// (see directory-cache.ts). A change of a document that grants or revokes access runs in three
// single-document writes: its intent is recorded in the version document, the change is made,
// and the intent is removed while the version is raised. A reader that sees no intent and the
// version its cache was filled under may serve from the cache: no change has been made since.
// One that sees an intent reads the database itself, so a change is never hidden, not even
// while it is being made; one that sees a new version starts its cache over. An intent left by
// a writer that died is removed (and the version raised) once it is STALE_INTENT_MS old.
import { randomUUID } from "node:crypto";
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";

const VERSION_ID = "directory";
/** Longer than any change takes; instances' clocks must agree to well within it. */
export const STALE_INTENT_MS = 60_000;

export interface DirectoryVersion {
  /** Runs `apply`, a change of directory documents, under the protocol above. */
  change<T>(apply: () => Promise<T>): Promise<T>;
  /** The first two steps only, as a writer that died after its change leaves them (tests: its intent dated `at`). */
  changeAndDie(apply: () => Promise<unknown>, at?: Date): Promise<void>;
  /** The version, or null while a change is under way (then no cache may be used). */
  read(): Promise<number | null>;
  /** Removes the intents dated before `cutoff` and raises the version (what a reader does with stale ones). */
  clearIntents(cutoff: Date): Promise<void>;
}

export function directoryVersion(d: Database): DirectoryVersion {
  const coll = () => d.directoryVersion;
  async function announce(id: string, at = new Date()): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await coll().updateOne({ _id: VERSION_ID }, { $push: { pending: { id, at } }, $setOnInsert: { version: 0 } }, { upsert: true });
        return;
      } catch (err) {
        if (!isDuplicateKey(err) || attempt >= 3) throw err; // two first upserts raced: the loser updates
      }
    }
  }
  async function clearIntents(cutoff: Date): Promise<void> {
    await coll().updateOne({ _id: VERSION_ID, "pending.at": { $lt: cutoff } }, { $pull: { pending: { at: { $lt: cutoff } } }, $inc: { version: 1 } });
  }
  return {
    async change(apply) {
      const id = randomUUID();
      await announce(id);
      try {
        return await apply();
      } finally {
        // Also after a failed change: it may have been made all the same (a timeout after the server applied it).
        await coll().updateOne({ _id: VERSION_ID }, { $pull: { pending: { id } }, $inc: { version: 1 } });
      }
    },
    async changeAndDie(apply, at) {
      await announce(randomUUID(), at);
      await apply();
    },
    async read() {
      const doc = await coll().findOne({ _id: VERSION_ID });
      if (!doc) return 0;
      if (doc.pending.length === 0) return doc.version;
      const cutoff = new Date(Date.now() - STALE_INTENT_MS);
      if (doc.pending.some((p) => p.at < cutoff)) await clearIntents(cutoff);
      return null;
    },
    clearIntents,
  };
}
