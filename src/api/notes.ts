// NoteService: collaboration notes (threads of messages on one record) of the public API.
// Every note operation is scoped by the token's project and the named environment: a note
// of another project or environment is NOT_FOUND, never shown. Every write is recorded in
// the activity log, naming the admin who generated the token.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { NoteMessageSchema, NoteSchema, NoteService, type Note, type NoteMessage, type NoteScope } from "../../gen/runhook/v1/note_pb.js";
import { apiScope, type ApiScope } from "../domain/auth/api-scope.js";
import type { NoteScopeIds } from "../store/notes.js";
import type { NoteDoc, NoteMessageDoc, UserRefDoc } from "../store/types.js";
import type { Deps } from "../deps.js";
import { authorization, viaOf } from "./context.js";
import { fail } from "../errors.js";
import { isUuid } from "../domain/ids.js";
import { bindingHash, cursorCodec, paging } from "../domain/logs/cursor.js";
import { addNoteMessage, checkTitle, createNote, updateNote } from "../domain/notes/threads.js";

export function noteMessage(m: NoteMessageDoc): NoteMessage {
  return create(NoteMessageSchema, { id: m.id, content: m.content, user: { id: m.user.id, email: m.user.email }, createdAt: timestampFromDate(m.createdAt) });
}

export function noteOf(d: NoteDoc): Note {
  return create(NoteSchema, {
    id: d._id,
    collection: d.collection,
    recordId: d.recordId,
    title: d.title,
    user: { id: d.user.id, email: d.user.email },
    messages: (d.messages ?? []).map(noteMessage),
    createdAt: timestampFromDate(d.createdAt),
    updatedAt: timestampFromDate(d.updatedAt),
    archivedAt: d.archivedAt ? timestampFromDate(d.archivedAt) : undefined,
  });
}

export function createNoteService(deps: Deps): ServiceImpl<typeof NoteService> {
  const { db, store } = deps;
  const codec = cursorCodec(deps.config);

  async function scopeOf(ctx: HandlerContext, s: NoteScope | undefined): Promise<ApiScope & { ids: NoteScopeIds; author: UserRefDoc }> {
    const scope = await apiScope(db, authorization(ctx), s?.projectName ?? "", s?.environmentName ?? "");
    return { ...scope, ids: { projectId: scope.project._id, environmentId: scope.environment!._id }, author: { id: scope.user._id, email: scope.user.email } };
  }

  function noteIdOf(id: string): string {
    if (!id) throw fail.invalid("note id is required");
    // Not an id this service ever issues: unknown, like any other.
    if (!isUuid(id)) throw fail.notFound("unknown note");
    return id.toLowerCase();
  }

  function activity(ctx: HandlerContext, scope: ApiScope & { ids: NoteScopeIds; author: UserRefDoc }, action: string, note: Pick<NoteDoc, "_id" | "collection" | "recordId">, details: Record<string, unknown> = {}) {
    return store.logs.appendActivity({
      projectId: scope.ids.projectId,
      environmentId: scope.ids.environmentId,
      environment: scope.environment!.name,
      rendering: null,
      user: scope.author,
      action,
      via: viaOf(ctx),
      collection: note.collection,
      recordId: note.recordId,
      runId: null,
      details: { noteId: note._id, ...details },
    });
  }

  return {
    async createNote(req, ctx) {
      const scope = await scopeOf(ctx, req.scope);
      if (!req.collection) throw fail.invalid("collection is required");
      if (!req.recordId) throw fail.invalid("recordId is required");
      if (!req.content) throw fail.invalid("content is required");
      checkTitle(req.title);
      const coll = await db.collections.findOne({ environmentId: scope.ids.environmentId, name: req.collection }, { projection: { _id: 1 } });
      if (!coll) throw fail.invalid(`unknown collection "${req.collection}" in this environment`);
      const doc = await createNote(store, { ...scope.ids, collection: req.collection, recordId: req.recordId, title: req.title, content: req.content, user: scope.author });
      await activity(ctx, scope, "note.created", doc, { messageId: doc.messages[0]!.id, title: doc.title });
      return { note: noteOf(doc) };
    },

    async getNote(req, ctx) {
      const scope = await scopeOf(ctx, req.scope);
      const doc = await store.notes.get(scope.ids, noteIdOf(req.noteId));
      if (!doc) throw fail.notFound("unknown note");
      return { note: noteOf(doc) };
    },

    async listNotes(req, ctx) {
      const p = paging(req.options);
      const scope = await scopeOf(ctx, req.scope);
      const f = req.filter;
      const archived = f?.archived;
      const hash = bindingHash({
        list: "notes", scope: scope.ids.environmentId, order: p.order, from: p.from?.toISOString(), to: p.to?.toISOString(),
        collection: f?.collection, recordId: f?.recordId, userId: f?.userId, archived: archived === undefined ? undefined : String(archived),
      });
      const pos = p.cursor ? codec.decode(p.cursor, hash) : undefined;
      const asc = p.order === "asc";
      const selection = { ...scope.ids, collection: f?.collection, recordId: f?.recordId, userId: f?.userId, archived, from: p.from, to: p.to };
      let docs = await store.notes.list(selection, pos, asc ? 1 : -1, p.limit + 1);
      const hasMore = docs.length > p.limit;
      if (hasMore) docs = docs.slice(0, p.limit);
      const last = docs[docs.length - 1]?.seq;
      // Ascending always answers a cursor (where the next poll continues); descending only while more remain.
      const nextCursor = asc ? codec.encode(last ?? pos ?? 0, hash) : hasMore ? codec.encode(last!, hash) : undefined;
      return { notes: docs.map(noteOf), hasMore, nextCursor };
    },

    async updateNote(req, ctx) {
      const scope = await scopeOf(ctx, req.scope);
      const noteId = noteIdOf(req.noteId);
      if (req.title === undefined && req.archived === undefined) {
        const doc = await store.notes.get(scope.ids, noteId);
        if (!doc) throw fail.notFound("unknown note");
        return { note: noteOf(doc) }; // nothing to change
      }
      const doc = await updateNote(store, scope.ids, noteId, { title: req.title, archived: req.archived });
      if (!doc) throw fail.notFound("unknown note");
      const details: Record<string, unknown> = {};
      if (req.title !== undefined) details.title = req.title;
      if (req.archived !== undefined) details.archived = req.archived;
      await activity(ctx, scope, "note.updated", doc, details);
      return { note: noteOf(doc) };
    },

    async deleteNote(req, ctx) {
      const scope = await scopeOf(ctx, req.scope);
      const doc = await store.notes.remove(scope.ids, noteIdOf(req.noteId));
      if (!doc) throw fail.notFound("unknown note");
      await activity(ctx, scope, "note.deleted", doc);
      return {};
    },

    async addNoteMessage(req, ctx) {
      const scope = await scopeOf(ctx, req.scope);
      if (!req.content) throw fail.invalid("content is required");
      const r = await addNoteMessage(store, scope.ids, noteIdOf(req.noteId), req.content, scope.author);
      if (!r) throw fail.notFound("unknown note");
      await activity(ctx, scope, "note.message.created", r.note, { messageId: r.message.id });
      return { message: noteMessage(r.message) };
    },
  };
}
