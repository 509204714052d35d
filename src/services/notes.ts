// NoteService: collaboration notes (threads of messages on one record) of the public API.
// Every note operation is scoped by the token's project and the named environment: a note
// of another project or environment is NOT_FOUND, never shown. Every write is recorded in
// the activity log, naming the admin who generated the token.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  NoteMessageSchema,
  NoteSchema,
  type AddNoteMessageRequest,
  type CreateNoteRequest,
  type ListNotesRequest,
  type Note,
  type NoteMessage,
  type NoteScope,
  type NoteService,
  type UpdateNoteRequest,
} from "../../gen/runhook/v1/note_pb.js";
import { apiScope, type ApiScope } from "../domain/auth/api-scope.js";
import type { NoteKey, NoteScopeIds, NoteSelection } from "../store/notes.js";
import type { NoteDoc, NoteMessageDoc, UserRefDoc } from "../store/types.js";
import type { Deps } from "../deps.js";
import { authorization, directoryOf, viaOf } from "./context.js";
import { fail } from "../domain/errors.js";
import { isUuid } from "../domain/ids.js";
import { bindingHash, cursorCodec, paging, type CursorCodec, type Paging } from "../domain/logs/cursor.js";
import { entryNames, type EntryNames } from "./logs.js";
import { renderingsOf, userOf } from "./filters.js";
import { addNoteMessage, checkTitle, createNote, updateNote } from "../domain/notes/threads.js";

export async function noteMessage(m: NoteMessageDoc, names: EntryNames): Promise<NoteMessage> {
  return create(NoteMessageSchema, { id: m.id, content: m.content, user: await names.user(m.user), createdAt: timestampFromDate(m.createdAt) });
}

export async function noteOf(d: NoteDoc, names: EntryNames): Promise<Note> {
  const [user, messages, team] = await Promise.all([
    names.user(d.user),
    Promise.all((d.messages ?? []).map((m) => noteMessage(m, names))),
    names.team(d.renderingId ?? null),
  ]);
  return create(NoteSchema, {
    id: d._id,
    number: BigInt(d.seq),
    collection: d.collection,
    recordId: d.recordId,
    title: d.title,
    user,
    messages,
    createdAt: timestampFromDate(d.createdAt),
    updatedAt: timestampFromDate(d.updatedAt),
    archivedAt: d.archivedAt ? timestampFromDate(d.archivedAt) : undefined,
    team,
  });
}

/** A call's place: the token's project and environment, the token's admin as the author, and how users are named. */
type NoteCallScope = ApiScope & { ids: NoteScopeIds; author: UserRefDoc; names: EntryNames };

async function scopeOf(deps: Deps, ctx: HandlerContext, s: NoteScope | undefined): Promise<NoteCallScope> {
  const directory = directoryOf(deps, ctx.values);
  const scope = await apiScope(directory, authorization(ctx), s?.projectName ?? "", s?.environmentName ?? "");
  return {
    ...scope,
    ids: { projectId: scope.project._id, environmentId: scope.environment!._id },
    author: { id: scope.user._id, email: scope.user.email },
    names: entryNames(deps, directory),
  };
}

/** A note's id (UUID) or number, as a store key. */
function noteIdOf(id: string): NoteKey {
  if (!id) throw fail.invalid("note id is required");
  if (/^[0-9]{1,15}$/.test(id)) return Number(id);
  // Not an id this service ever issues: unknown, like any other.
  if (!isUuid(id)) throw fail.notFound("unknown note");
  return id.toLowerCase();
}

function activity(
  deps: Deps,
  ctx: HandlerContext,
  scope: NoteCallScope,
  action: string,
  note: Pick<NoteDoc, "_id" | "collection" | "recordId" | "renderingId">,
  details: Record<string, unknown> = {},
) {
  return deps.store.logs.appendActivity({
    projectId: scope.ids.projectId,
    environmentId: scope.ids.environmentId,
    environment: scope.environment!.name,
    rendering: note.renderingId ?? null,
    user: scope.author,
    action,
    via: viaOf(ctx),
    collection: note.collection,
    recordId: note.recordId,
    runId: null,
    details: { noteId: note._id, ...details },
  });
}

async function createNoteCall(deps: Deps, req: CreateNoteRequest, ctx: HandlerContext) {
  const scope = await scopeOf(deps, ctx, req.scope);
  if (!req.collection) throw fail.invalid("collection is required");
  if (!req.recordId) throw fail.invalid("recordId is required");
  if (!req.content) throw fail.invalid("content is required");
  checkTitle(req.title);
  const coll = await deps.store.directory.collections.byName(scope.ids.environmentId, req.collection);
  if (!coll) throw fail.invalid(`unknown collection "${req.collection}" in this environment`);
  const doc = await createNote(deps.store, {
    ...scope.ids,
    collection: req.collection,
    recordId: req.recordId,
    title: req.title,
    content: req.content,
    user: scope.author,
  });
  await activity(deps, ctx, scope, "note.created", doc, { messageId: doc.messages[0]!.id, title: doc.title });
  return { note: await noteOf(doc, scope.names) };
}

/** The note selection of a list request (NOTHING when it names a user who is no one). */
async function noteSelection(deps: Deps, scope: NoteCallScope, f: ListNotesRequest["filter"], p: Paging): Promise<NoteSelection> {
  const archived = f?.archived;
  const updated = paging({ limit: 1, cursor: "", order: "", fromTime: f?.updatedFrom, toTime: f?.updatedTo });
  const archivedAt = paging({ limit: 1, cursor: "", order: "", fromTime: f?.archivedFrom, toTime: f?.archivedTo });
  if (archived === false && (archivedAt.from || archivedAt.to))
    throw fail.invalid("archived=false selects notes with no archiving time: a range of archiving times selects none");
  const [userId, renderings] = await Promise.all([userOf(deps, scope.project.organizationId, f), renderingsOf(deps, scope, f)]);
  return {
    ...scope.ids,
    collection: f?.collection,
    recordId: f?.recordId,
    userId,
    userEmail: f?.userEmail || undefined,
    renderings,
    archived,
    from: p.from,
    to: p.to,
    updatedFrom: updated.from,
    updatedTo: updated.to,
    archivedFrom: archivedAt.from,
    archivedTo: archivedAt.to,
  };
}

const iso = (d: Date | undefined) => d?.toISOString();

async function listNotes(deps: Deps, codec: CursorCodec, req: ListNotesRequest, ctx: HandlerContext) {
  const p = paging(req.options);
  const scope = await scopeOf(deps, ctx, req.scope);
  const s = await noteSelection(deps, scope, req.filter, p);
  const hash = bindingHash({
    list: "notes",
    scope: scope.ids.environmentId,
    order: p.order,
    from: iso(s.from),
    to: iso(s.to),
    updatedFrom: iso(s.updatedFrom),
    updatedTo: iso(s.updatedTo),
    archivedFrom: iso(s.archivedFrom),
    archivedTo: iso(s.archivedTo),
    collection: s.collection,
    recordId: s.recordId,
    userId: s.userId,
    userEmail: s.userEmail,
    renderings: s.renderings?.join(","),
    archived: s.archived === undefined ? undefined : String(s.archived),
  });
  const pos = p.cursor ? codec.decode(p.cursor, hash) : undefined;
  const asc = p.order === "asc";
  let docs = await deps.store.notes.list(s, pos, asc ? 1 : -1, p.limit + 1);
  const hasMore = docs.length > p.limit;
  if (hasMore) docs = docs.slice(0, p.limit);
  const last = docs[docs.length - 1]?.seq;
  // Ascending always answers a cursor (where the next poll continues); descending only while more remain.
  const nextCursor = asc ? codec.encode(last ?? pos ?? 0, hash) : hasMore ? codec.encode(last!, hash) : undefined;
  return { notes: await Promise.all(docs.map((d) => noteOf(d, scope.names))), hasMore, nextCursor };
}

async function updateNoteCall(deps: Deps, req: UpdateNoteRequest, ctx: HandlerContext) {
  const scope = await scopeOf(deps, ctx, req.scope);
  const noteId = noteIdOf(req.noteId);
  if (req.title === undefined && req.archived === undefined) {
    const doc = await deps.store.notes.get(scope.ids, noteId);
    if (!doc) throw fail.notFound("unknown note");
    return { note: await noteOf(doc, scope.names) }; // nothing to change
  }
  const doc = await updateNote(deps.store, scope.ids, noteId, { title: req.title, archived: req.archived });
  if (!doc) throw fail.notFound("unknown note");
  const details: Record<string, unknown> = {};
  if (req.title !== undefined) details.title = req.title;
  if (req.archived !== undefined) details.archived = req.archived;
  await activity(deps, ctx, scope, "note.updated", doc, details);
  return { note: await noteOf(doc, scope.names) };
}

async function addNoteMessageCall(deps: Deps, req: AddNoteMessageRequest, ctx: HandlerContext) {
  const scope = await scopeOf(deps, ctx, req.scope);
  if (!req.content) throw fail.invalid("content is required");
  const r = await addNoteMessage(deps.store, scope.ids, noteIdOf(req.noteId), req.content, scope.author);
  if (!r) throw fail.notFound("unknown note");
  await activity(deps, ctx, scope, "note.message.created", r.note, { messageId: r.message.id });
  return { message: await noteMessage(r.message, scope.names) };
}

export function createNoteService(deps: Deps): ServiceImpl<typeof NoteService> {
  const codec = cursorCodec(deps.config);
  return {
    createNote: (req, ctx) => createNoteCall(deps, req, ctx),
    async getNote(req, ctx) {
      const scope = await scopeOf(deps, ctx, req.scope);
      const doc = await deps.store.notes.get(scope.ids, noteIdOf(req.noteId));
      if (!doc) throw fail.notFound("unknown note");
      return { note: await noteOf(doc, scope.names) };
    },
    listNotes: (req, ctx) => listNotes(deps, codec, req, ctx),
    updateNote: (req, ctx) => updateNoteCall(deps, req, ctx),
    async deleteNote(req, ctx) {
      const scope = await scopeOf(deps, ctx, req.scope);
      const doc = await deps.store.notes.remove(scope.ids, noteIdOf(req.noteId));
      if (!doc) throw fail.notFound("unknown note");
      await activity(deps, ctx, scope, "note.deleted", doc);
      return {};
    },
    addNoteMessage: (req, ctx) => addNoteMessageCall(deps, req, ctx),
  };
}
