// Note threads: the rules for creating (one implementation for the Notes API and the
// `add_note` workflow step), changing, deleting and replying. Storage is src/store/notes.ts.
import { randomUUID } from "node:crypto";
import { fail } from "../errors.js";
import type { Store } from "../../store/index.js";
import type { NoteKey, NoteScopeIds } from "../../store/notes.js";
import type { NoteDoc, NoteMessageDoc, UserRefDoc } from "../../store/types.js";
import { sanitizeNoteContent } from "./sanitize.js";
import { checkedRecordId } from "../runs/records.js";

/** The longest note title, in characters (the Notes API and the `add_note` step). */
export const MAX_NOTE_TITLE_CHARS = 200;
export const MAX_NOTE_MESSAGES = 200;

export interface NewNote extends NoteScopeIds {
  collection: string;
  recordId: string;
  title: string;
  content: string;
  user: UserRefDoc;
  /** The rendering it is written in (a run's); none through the API. */
  renderingId?: string;
  /** Its id, when it must be made once (a run's step: derived from the run and the step); else a fresh one. */
  id?: string;
}

/**
 * A title is plain text: at most MAX_NOTE_TITLE_CHARS characters, no control characters and
 * no HTML tags (it is never sanitized, so whatever shows it cannot be tricked by it).
 */
export function checkTitle(title: string, field = "title"): void {
  if ([...title].length > MAX_NOTE_TITLE_CHARS) throw fail.invalid(`${field} is longer than ${MAX_NOTE_TITLE_CHARS} characters`);
  // Controls, line and paragraph separators, and bidirectional overrides (they reorder what a UI shows).
  if (/[\p{Cc}\p{Cs}\p{Zl}\p{Zp}\u202a-\u202e\u2066-\u2069]/u.test(title))
    throw fail.invalid(`${field} must be plain text on one line (no control characters)`);
  if (/<[A-Za-z!/?]/.test(title)) throw fail.invalid(`${field} must be plain text (no HTML tags)`);
}

/** Stores the note; one of the same `id` stored already is answered as it is. */
export async function createNote(store: Store, n: NewNote): Promise<NoteDoc> {
  checkTitle(n.title);
  checkedRecordId(n.recordId, "recordId");
  const content = sanitizeNoteContent(n.content);
  const now = new Date();
  return store.notes.insert({
    _id: n.id ?? randomUUID(),
    projectId: n.projectId,
    environmentId: n.environmentId,
    collection: n.collection,
    recordId: n.recordId,
    title: n.title,
    user: n.user,
    renderingId: n.renderingId ?? null,
    messages: [{ id: randomUUID(), content, user: n.user, createdAt: now }],
    createdAt: now,
    updatedAt: now,
    archivedAt: null,
  });
}

/** Changes the title and/or archives (archivedAt = now) or unarchives; one conditional update. Null when unknown. */
export async function updateNote(store: Store, scope: NoteScopeIds, noteId: NoteKey, change: { title?: string; archived?: boolean }): Promise<NoteDoc | null> {
  if (change.title !== undefined) checkTitle(change.title);
  const now = new Date();
  const set: Partial<NoteDoc> = { updatedAt: now };
  if (change.title !== undefined) set.title = change.title;
  if (change.archived !== undefined) set.archivedAt = change.archived ? now : null;
  return store.notes.update(scope, noteId, set);
}

/**
 * Appends a sanitized message with one guarded $push. Null when the note is unknown;
 * FAILED_PRECONDITION when it already holds MAX_NOTE_MESSAGES.
 */
export async function addNoteMessage(
  store: Store,
  scope: NoteScopeIds,
  noteId: NoteKey,
  content: string,
  user: UserRefDoc,
): Promise<{ note: NoteDoc; message: NoteMessageDoc } | null> {
  const message: NoteMessageDoc = { id: randomUUID(), content: sanitizeNoteContent(content), user, createdAt: new Date() };
  const note = await store.notes.push(scope, noteId, message, MAX_NOTE_MESSAGES);
  if (note) return { note, message };
  // Only on failure: tell a full note from an unknown one.
  if (await store.notes.get(scope, noteId)) throw fail.precondition(`a note holds at most ${MAX_NOTE_MESSAGES} messages`);
  return null;
}
