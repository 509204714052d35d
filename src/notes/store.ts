// Creating notes: one implementation for the Notes API and the `add_note` workflow step.
import { randomUUID } from "node:crypto";
import type { Database } from "../db/mongo.js";
import type { NoteDoc, UserRefDoc } from "../db/types.js";
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
  await db.notes.insertOne(doc);
  return doc;
}
