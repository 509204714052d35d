// Notes storage: creating (one implementation for the Notes API and the `add_note` workflow
// step), changing, deleting and replying — every change one single-document operation.
import { randomUUID } from "node:crypto";
import { isDuplicateKey, type Database } from "../db/mongo.js";
import type { NoteDoc, NoteMessageDoc, UserRefDoc } from "../db/types.js";
import { fail } from "../errors.js";
import { nextSeq } from "../logs/writer.js";
import { sanitizeNoteContent } from "./sanitize.js";

export const NOTES_COUNTER = "notes";
export const MAX_TITLE_CHARS = 500;

export interface NewNote {
  projectId: string;
  environmentId: string;
  collection: string;
  recordId: string;
  title: string;
  content: string;
  user: UserRefDoc;
}

export async function createNote(db: Database, n: NewNote): Promise<NoteDoc> {
  if (n.title.length > MAX_TITLE_CHARS) throw fail.invalid(`title is longer than ${MAX_TITLE_CHARS} characters`);
  const content = sanitizeNoteContent(n.content);
  const now = new Date();
  const doc: NoteDoc = {
    _id: randomUUID(),
    seq: await nextSeq(db, NOTES_COUNTER),
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
  };
  // FerretDB's $inc can hand out a number twice or move back: a duplicate seq takes a number
  // above both the counter and the one just tried, so every retry makes progress.
  for (let attempt = 0; ; attempt++) {
    try {
      await db.notes.insertOne(doc);
      return doc;
    } catch (err) {
      if (!isDuplicateKey(err) || attempt > 100) throw err;
      doc.seq = Math.max(doc.seq + 1 + attempt, await nextSeq(db, NOTES_COUNTER));
    }
  }
}

/** A note as the API may see it: scoped by project and environment (another's is unknown). */
export interface NoteScopeIds { projectId: string; environmentId: string }

export const MAX_NOTE_MESSAGES = 200;

export function checkTitle(title: string): void {
  if (title.length > MAX_TITLE_CHARS) throw fail.invalid(`title is longer than ${MAX_TITLE_CHARS} characters`);
}

/** Changes the title and/or archives (archivedAt = now) or unarchives; one conditional update. Null when unknown. */
export async function updateNote(db: Database, scope: NoteScopeIds, noteId: string, change: { title?: string; archived?: boolean }): Promise<NoteDoc | null> {
  if (change.title !== undefined) checkTitle(change.title);
  const now = new Date();
  const set: Partial<NoteDoc> = { updatedAt: now };
  if (change.title !== undefined) set.title = change.title;
  if (change.archived !== undefined) set.archivedAt = change.archived ? now : null;
  return db.notes.findOneAndUpdate({ _id: noteId, projectId: scope.projectId, environmentId: scope.environmentId }, { $set: set }, { returnDocument: "after" });
}

/** Deletes a note; returns what was deleted, or null when unknown. */
export async function deleteNote(db: Database, scope: NoteScopeIds, noteId: string): Promise<NoteDoc | null> {
  return db.notes.findOneAndDelete({ _id: noteId, projectId: scope.projectId, environmentId: scope.environmentId });
}

/**
 * Appends a sanitized message with one $push scoped by project and environment. Null when
 * the note is unknown; FAILED_PRECONDITION when it already holds MAX_NOTE_MESSAGES.
 */
export async function addNoteMessage(db: Database, scope: NoteScopeIds, noteId: string, content: string, user: UserRefDoc): Promise<{ note: NoteDoc; message: NoteMessageDoc } | null> {
  const clean = sanitizeNoteContent(content);
  const message: NoteMessageDoc = { id: randomUUID(), content: clean, user, createdAt: new Date() };
  const filter = { _id: noteId, projectId: scope.projectId, environmentId: scope.environmentId };
  const note = await db.notes.findOneAndUpdate(
    { ...filter, [`messages.${MAX_NOTE_MESSAGES - 1}`]: { $exists: false } },
    { $push: { messages: message }, $set: { updatedAt: message.createdAt } },
    { returnDocument: "after" }, // (no projection: FerretDB's findAndModify does not support one)
  );
  if (note) return { note, message };
  // Only on failure: tell a full note from an unknown one.
  if (await db.notes.findOne(filter, { projection: { _id: 1 } })) throw fail.precondition(`a note holds at most ${MAX_NOTE_MESSAGES} messages`);
  return null;
}
