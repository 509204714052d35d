// Notes as stored: one document per thread, every change one single-document operation.
import type { Filter } from "mongodb";
import type { Database } from "./connection.js";
import type { CounterStore } from "./counters.js";
import { isDuplicateKey } from "./errors.js";
import type { NoteDoc, NoteMessageDoc } from "./types.js";

/** A note as the API may see it: scoped by project and environment (another's is unknown). */
export interface NoteScopeIds {
  projectId: string;
  environmentId: string;
}

/** A note by its id, or by its number (`seq`). */
export type NoteKey = string | number;

export interface NoteSelection extends NoteScopeIds {
  collection?: string;
  recordId?: string;
  userId?: string;
  userEmail?: string;
  /** Notes of any of these renderings, null naming notes of none (absent: any). */
  renderings?: readonly (string | null)[];
  archived?: boolean;
  from?: Date;
  to?: Date;
  updatedFrom?: Date;
  updatedTo?: Date;
  archivedFrom?: Date;
  archivedTo?: Date;
}

/** `{$gte, $lt}` of a time range, or undefined without bounds. */
function range(from: Date | undefined, to: Date | undefined): Record<string, Date> | undefined {
  if (!from && !to) return undefined;
  return { ...(from ? { $gte: from } : {}), ...(to ? { $lt: to } : {}) };
}

export type NewNoteDoc = Omit<NoteDoc, "seq">;

export interface NoteStore {
  /** Stores a note, numbered after every note stored before it (list order). */
  insert(note: NewNoteDoc): Promise<NoteDoc>;
  get(scope: NoteScopeIds, id: NoteKey): Promise<NoteDoc | null>;
  /** Notes of a selection after (asc) or before (desc) position `pos`, at most `limit`. */
  list(s: NoteSelection, pos: number | undefined, order: 1 | -1, limit: number): Promise<NoteDoc[]>;
  /** Sets `title` and/or `archivedAt` (and `updatedAt`); the note after, or null when unknown. */
  update(scope: NoteScopeIds, id: NoteKey, set: Partial<Pick<NoteDoc, "title" | "archivedAt" | "updatedAt">>): Promise<NoteDoc | null>;
  /** Deletes a note; what was deleted, or null when unknown. */
  remove(scope: NoteScopeIds, id: NoteKey): Promise<NoteDoc | null>;
  /** Appends a message unless the note already holds `max`; the note after, or null (unknown or full). */
  push(scope: NoteScopeIds, id: NoteKey, message: NoteMessageDoc, max: number): Promise<NoteDoc | null>;
}

export const NOTES_COUNTER = "notes";

export function noteStore(d: Database, counters: CounterStore): NoteStore {
  const scoped = (scope: NoteScopeIds, id: NoteKey) => ({
    ...(typeof id === "number" ? { seq: id } : { _id: id }),
    projectId: scope.projectId,
    environmentId: scope.environmentId,
  });
  return {
    async insert(note) {
      const doc: NoteDoc = { ...note, seq: await counters.next(NOTES_COUNTER) };
      try {
        await d.notes.insertOne(doc);
      } catch (err) {
        // A note of a derived id stored already (a retried step): that one, whole; its number is the first's.
        const stored = isDuplicateKey(err) ? await d.notes.findOne({ _id: doc._id }) : null;
        if (!stored) throw err;
        return stored;
      }
      return doc;
    },
    get: (scope, id) => d.notes.findOne(scoped(scope, id)),
    list(s, pos, order, limit) {
      const f: Record<string, unknown> = { environmentId: s.environmentId, projectId: s.projectId };
      if (s.collection) f.collection = s.collection;
      if (s.recordId) f.recordId = s.recordId;
      if (s.userId) f["user.id"] = s.userId;
      if (s.userEmail) f["user.email"] = s.userEmail;
      if (s.renderings) f.renderingId = { $in: [...s.renderings] };
      if (s.archived !== undefined) f.archivedAt = s.archived ? { $ne: null } : null;
      const times = { createdAt: range(s.from, s.to), updatedAt: range(s.updatedFrom, s.updatedTo), archivedAt: range(s.archivedFrom, s.archivedTo) };
      for (const [field, r] of Object.entries(times)) if (r) f[field] = r;
      if (pos !== undefined) f.seq = order === 1 ? { $gt: pos } : { $lt: pos };
      return d.notes
        .find(f as Filter<NoteDoc>)
        .sort({ seq: order })
        .limit(limit)
        .toArray();
    },
    update: (scope, id, set) => d.notes.findOneAndUpdate(scoped(scope, id), { $set: set }, { returnDocument: "after" }),
    remove: (scope, id) => d.notes.findOneAndDelete(scoped(scope, id)),
    push: (scope, id, message, max) =>
      d.notes.findOneAndUpdate(
        { ...scoped(scope, id), [`messages.${max - 1}`]: { $exists: false } },
        { $push: { messages: message }, $set: { updatedAt: message.createdAt } },
        { returnDocument: "after" },
      ),
  };
}
