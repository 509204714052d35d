// Note threads: the rules for creating (one implementation for the Notes API and the
// `add_note` workflow step), changing, deleting and replying. Storage is src/store/notes.ts.
import { randomUUID } from "node:crypto";
import { fail } from "../../errors.js";
import type { Store } from "../../store/index.js";
import type { NoteScopeIds } from "../../store/notes.js";
import type { NoteDoc, NoteMessageDoc, UserRefDoc } from "../../store/types.js";
import { sanitizeNoteContent } from "./sanitize.js";

export const MAX_TITLE_CHARS = 500;
export const MAX_NOTE_MESSAGES = 200;

export interface NewNote extends NoteScopeIds {
  collection: string;
  recordId: string;
  title: string;
  content: string;
  user: UserRefDoc;
}

export function checkTitle(title: string): void {
  if (title.length > MAX_TITLE_CHARS) throw fail.invalid(`title is longer than ${MAX_TITLE_CHARS} characters`);
}

export async function createNote(store: Store, n: NewNote): Promise<NoteDoc> {
  checkTitle(n.title);
  const content = sanitizeNoteContent(n.content);
  const now = new Date();
  return store.notes.insert({
    _id: randomUUID(),
    projectId: n.projectId,
    environmentId: n.environmentId,
    collection: n.collection,
    recordId: n.recordId,
    title: n.title,
    user: n.user,
    messages: [{ id: randomUUID(), content, user: n.user, createdAt: now }],
    createdAt: now,
    updatedAt: now,
    archivedAt: null,
  });
}

/** Changes the title and/or archives (archivedAt = now) or unarchives; one conditional update. Null when unknown. */
export async function updateNote(store: Store, scope: NoteScopeIds, noteId: string, change: { title?: string; archived?: boolean }): Promise<NoteDoc | null> {
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
export async function addNoteMessage(store: Store, scope: NoteScopeIds, noteId: string, content: string, user: UserRefDoc): Promise<{ note: NoteDoc; message: NoteMessageDoc } | null> {
  const message: NoteMessageDoc = { id: randomUUID(), content: sanitizeNoteContent(content), user, createdAt: new Date() };
  const note = await store.notes.push(scope, noteId, message, MAX_NOTE_MESSAGES);
  if (note) return { note, message };
  // Only on failure: tell a full note from an unknown one.
  if (await store.notes.get(scope, noteId)) throw fail.precondition(`a note holds at most ${MAX_NOTE_MESSAGES} messages`);
  return null;
}
