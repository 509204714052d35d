// LogService: the activity log (per environment) and the admin log (per project) of the
// public API, as pages (List*) and as complete streams (Export*).
//
// Order is the sequence number (`seq`) within the log's stream (store/logs.ts): an
// environment's activity log, a project's admin log. Ascending pages never pass an
// unresolved position (see domain/logs/reader.ts), so a consumer polling `next_cursor` receives every
// entry exactly once, in order, while any number of instances write.
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ActivityLogEntrySchema,
  AdminLogEntrySchema,
  ExportActivityLogsResponseSchema,
  ExportAdminLogsResponseSchema,
  type ActivityLogEntry,
  type ActivityLogFilter,
  type AdminLogEntry,
  type AdminLogFilter,
  type LogService,
} from "../../gen/runhook/v1/log_pb.js";
import { authorization } from "./context.js";
import { apiScope } from "../domain/auth/api-scope.js";
import type { Deps } from "../deps.js";
import type { Store } from "../store/index.js";
import { activityStream, adminStream, isFiltered, type LogDocOf, type LogKind, type LogSelection } from "../store/logs.js";
import type { ActivityLogDoc, AdminLogDoc } from "../store/types.js";
import { bindingHash, cursorCodec, paging, type CursorCodec, type Paging } from "../domain/logs/cursor.js";
import { createLogReader, type LogReader } from "../domain/logs/reader.js";

/** Makes stored details JSON-safe for google.protobuf.Struct (dates → RFC 3339, …). */
export function toJsonValue(v: unknown): JsonValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.toISOString();
  if (Array.isArray(v)) return v.map(toJsonValue);
  if (typeof v === "object") {
    const proto = Object.getPrototypeOf(v) as object | null;
    if (proto !== Object.prototype && proto !== null) return String(v); // ObjectId, Decimal128, …
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) if (x !== undefined) out[k] = toJsonValue(x);
    return out;
  }
  return String(v);
}

export function toJsonObject(v: Record<string, unknown> | null | undefined): JsonObject {
  const j = toJsonValue(v ?? {});
  return j && typeof j === "object" && !Array.isArray(j) ? j : {};
}

export function activityEntry(d: ActivityLogDoc): ActivityLogEntry {
  return create(ActivityLogEntrySchema, {
    id: String(d.seq),
    timestamp: timestampFromDate(d.timestamp),
    environment: d.environment,
    rendering: d.rendering ?? undefined,
    user: { id: d.user?.id ?? "", email: d.user?.email ?? "" },
    action: d.action,
    via: d.via,
    collection: d.collection ?? undefined,
    recordId: d.recordId ?? undefined,
    runId: d.runId ?? undefined,
    details: toJsonObject(d.details),
  });
}

export function adminEntry(d: AdminLogDoc): AdminLogEntry {
  return create(AdminLogEntrySchema, {
    id: String(d.seq),
    timestamp: timestampFromDate(d.timestamp),
    environment: d.environment ?? undefined,
    actor: { id: d.actor?.id ?? "", email: d.actor?.email ?? "" },
    action: d.action,
    target: d.target,
    details: toJsonObject(d.details),
  });
}

/**
 * What a cursor is bound to, besides the filters. `pos` names what the position counts:
 * sequence numbers within the scope's stream (cursors of the earlier global numbering
 * are refused, not misread).
 */
function pagingBinding(list: string, scope: string, p: Paging) {
  return { list, scope, pos: "stream-seq", order: p.order, from: p.from?.toISOString(), to: p.to?.toISOString() };
}

/** A list request resolved: its stream, its selection and the cursor binding. */
export interface LogQuery {
  stream: string;
  selection: LogSelection;
  hash: string;
}

function activityQuery(environmentId: string, f: ActivityLogFilter | undefined, p: Paging, list: string): LogQuery {
  const filters = { userId: f?.userId, userEmail: f?.userEmail, action: f?.action, collection: f?.collection, recordId: f?.recordId, runId: f?.runId };
  const selection: LogSelection = { scopeId: environmentId, ...filters, from: p.from, to: p.to };
  const hash = bindingHash({ ...pagingBinding(list, environmentId, p), ...filters });
  return { stream: activityStream(environmentId), selection, hash };
}

function adminQuery(organizationId: string, projectId: string, f: AdminLogFilter | undefined, p: Paging, list: string): LogQuery {
  const selection: LogSelection = { scopeId: projectId, userId: f?.userId, userEmail: f?.userEmail, action: f?.action, from: p.from, to: p.to };
  const hash = bindingHash({ ...pagingBinding(list, projectId, p), userId: f?.userId, userEmail: f?.userEmail, action: f?.action });
  return { stream: adminStream(organizationId, projectId), selection, hash };
}

export interface LogPage<T> {
  docs: T[];
  hasMore: boolean;
  nextCursor: string | undefined;
}

/** Drops the look-ahead entry of a `limit + 1` read. */
function page<T extends { seq: number }>(docs: T[], limit: number): { docs: T[]; hasMore: boolean } {
  return docs.length > limit ? { docs: docs.slice(0, limit), hasMore: true } : { docs, hasMore: false };
}

/** The position of the request's cursor (undefined without one); an ascending one into entries retention removed is refused. */
async function cursorPosition(reader: LogReader, codec: CursorCodec, kind: LogKind, q: LogQuery, p: Paging): Promise<number | undefined> {
  if (!p.cursor) return undefined;
  const pos = codec.decode(p.cursor, q.hash);
  if (p.order === "asc") await reader.checkCursor(kind, q.stream, pos);
  return pos;
}

/**
 * One page of a log. Ascending: entries after the cursor, never past an unresolved
 * position; descending: before it, starting at the watermark. The cursor position is the
 * sequence number within the stream.
 *
 * Without filters, ascending: a forward walk of the stream (ranges below the watermark,
 * position look-ups above it), O(limit). With filters: a query on (scope, filter…, seq)
 * bounded by the watermark, O(limit) through the indexes. Descending: one range query
 * below the watermark (every position there is resolved).
 */
export async function readPage<K extends LogKind>(
  store: Store,
  reader: LogReader,
  codec: CursorCodec,
  kind: K,
  q: LogQuery,
  p: Paging,
): Promise<LogPage<LogDocOf<K>>> {
  const logs = store.logs;
  const pos = await cursorPosition(reader, codec, kind, q, p);
  const filtered = isFiltered(q.selection);
  if (p.order === "desc") {
    const range = pos !== undefined ? { before: pos } : { upTo: await reader.advance(kind, q.stream) };
    const read = filtered ? logs.select(kind, q.selection, range, -1, p.limit + 1) : logs.entries(kind, q.stream, range, -1, p.limit + 1);
    const { docs, hasMore } = page(await read, p.limit);
    return { docs, hasMore, nextCursor: hasMore ? codec.encode(docs[docs.length - 1]!.seq, q.hash) : undefined };
  }
  const after = pos ?? 0;
  if (!filtered) {
    const docs: LogDocOf<K>[] = [];
    let hasMore = false;
    let last = after;
    for await (const r of reader.forward(kind, q.stream, after, { batch: p.limit + 1 })) {
      if (r.doc) {
        if (docs.length === p.limit) {
          hasMore = true;
          break;
        }
        docs.push(r.doc);
      }
      last = r.seq;
    }
    // Caught up: every position up to `last` is resolved, so the cursor moves there.
    return { docs, hasMore, nextCursor: codec.encode(last, q.hash) };
  }
  // Serve from the stored watermark when that fills the page; advance only otherwise.
  let wm = await reader.stored(q.stream);
  let docs = wm > after ? await logs.select(kind, q.selection, { after, upTo: wm }, 1, p.limit + 1) : [];
  if (docs.length <= p.limit) {
    const wm2 = await reader.advance(kind, q.stream);
    const from = Math.max(wm, after);
    if (wm2 > from) docs = docs.concat(await logs.select(kind, q.selection, { after: from, upTo: wm2 }, 1, p.limit + 1 - docs.length));
    wm = Math.max(wm, wm2);
  }
  const r = page(docs, p.limit);
  // Caught up: everything up to the watermark has been considered, so the cursor moves there.
  const nextPos = r.hasMore ? r.docs[r.docs.length - 1]!.seq : Math.max(after, wm);
  return { ...r, nextCursor: codec.encode(nextPos, q.hash) };
}

/**
 * Every matching entry from the cursor up to the watermark as of the start, in one pass
 * and constant memory: the watermark advance, then one indexed scan sorted by seq.
 */
export async function* streamLog<K extends LogKind>(
  store: Store,
  reader: LogReader,
  codec: CursorCodec,
  kind: K,
  q: LogQuery,
  p: Paging,
): AsyncGenerator<LogDocOf<K>> {
  const pos = await cursorPosition(reader, codec, kind, q, p);
  const wm = await reader.advance(kind, q.stream);
  const range = p.order === "asc" ? { after: pos ?? 0, upTo: wm } : pos !== undefined ? { before: pos } : { upTo: wm };
  yield* store.logs.scan(kind, q.selection, range, p.order === "asc" ? 1 : -1);
}

export function createLogService(deps: Deps, opts: { reader?: LogReader } = {}): ServiceImpl<typeof LogService> {
  const { directory } = deps.store;
  const reader = opts.reader ?? createLogReader(deps.store, { retentionDays: deps.config.retention.logDays });
  const codec = cursorCodec(deps.config);
  return {
    async listActivityLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await apiScope(directory, authorization(ctx), req.projectName, req.environmentName);
      const q = activityQuery(scope.environment!._id, req.filter, p, "activity");
      const page = await readPage(deps.store, reader, codec, "activity", q, p);
      return { activityLogs: page.docs.map(activityEntry), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
    async listAdminLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await apiScope(directory, authorization(ctx), req.projectName);
      const q = adminQuery(scope.project.organizationId, scope.project._id, req.filter, p, "admin");
      const page = await readPage(deps.store, reader, codec, "admin", q, p);
      return { adminLogs: page.docs.map(adminEntry), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
    async *exportActivityLogs(req, ctx) {
      const p = paging(req.options, { ignoreLimit: true });
      const scope = await apiScope(directory, authorization(ctx), req.projectName, req.environmentName);
      const q = activityQuery(scope.environment!._id, req.filter, p, "activity");
      for await (const d of streamLog(deps.store, reader, codec, "activity", q, p)) {
        yield create(ExportActivityLogsResponseSchema, { entry: activityEntry(d) });
      }
    },
    async *exportAdminLogs(req, ctx) {
      const p = paging(req.options, { ignoreLimit: true });
      const scope = await apiScope(directory, authorization(ctx), req.projectName);
      const q = adminQuery(scope.project.organizationId, scope.project._id, req.filter, p, "admin");
      for await (const d of streamLog(deps.store, reader, codec, "admin", q, p)) {
        yield create(ExportAdminLogsResponseSchema, { entry: adminEntry(d) });
      }
    },
  };
}
