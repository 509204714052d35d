// LogService: the activity log (per environment) and the admin log (per project) of the
// public API, as pages (List*) and as complete streams (Export*).
//
// Order is the sequence number (`seq`) within the log's stream (store/logs.ts): an
// environment's activity log, a project's admin log. The paging itself is
// domain/logs/paging.ts; this file turns requests into queries and entries into messages.
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
import { authorization, directoryOf, whileAllowed } from "./context.js";
import type { DirectoryView } from "../store/directory-cache.js";
import { apiScope } from "../domain/auth/api-scope.js";
import type { Deps } from "../deps.js";
import { activityStream, adminStream, type LogSelection } from "../store/logs.js";
import type { ActivityLogDoc, AdminLogDoc } from "../store/types.js";
import { bindingHash, cursorCodec, paging, type Paging } from "../domain/logs/cursor.js";
import { createLogReader, type LogReader } from "../domain/logs/reader.js";
import { readPage, streamLog, type LogQuery, type LogSource } from "../domain/logs/paging.js";

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

export function createLogService(deps: Deps, opts: { reader?: LogReader } = {}): ServiceImpl<typeof LogService> {
  const reader = opts.reader ?? createLogReader(deps.store, { retentionDays: deps.config.retention.logDays });
  const source: LogSource = { store: deps.store, reader, codec: cursorCodec(deps.config) };
  return {
    async listActivityLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await apiScope(directoryOf(deps, ctx.values), authorization(ctx), req.projectName, req.environmentName);
      const q = activityQuery(scope.environment!._id, req.filter, p, "activity");
      const page = await readPage(source, "activity", q, p);
      return { activityLogs: page.docs.map(activityEntry), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
    async listAdminLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await apiScope(directoryOf(deps, ctx.values), authorization(ctx), req.projectName);
      const q = adminQuery(scope.project.organizationId, scope.project._id, req.filter, p, "admin");
      const page = await readPage(source, "admin", q, p);
      return { adminLogs: page.docs.map(adminEntry), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
    async *exportActivityLogs(req, ctx) {
      const p = paging(req.options, { ignoreLimit: true });
      const allowed = (directory: DirectoryView) => apiScope(directory, authorization(ctx), req.projectName, req.environmentName);
      const scope = await allowed(directoryOf(deps, ctx.values));
      const q = activityQuery(scope.environment!._id, req.filter, p, "activity");
      for await (const d of whileAllowed(deps, ctx.values, allowed, streamLog(source, "activity", q, p))) {
        yield create(ExportActivityLogsResponseSchema, { entry: activityEntry(d) });
      }
    },
    async *exportAdminLogs(req, ctx) {
      const p = paging(req.options, { ignoreLimit: true });
      const allowed = (directory: DirectoryView) => apiScope(directory, authorization(ctx), req.projectName);
      const scope = await allowed(directoryOf(deps, ctx.values));
      const q = adminQuery(scope.project.organizationId, scope.project._id, req.filter, p, "admin");
      for await (const d of whileAllowed(deps, ctx.values, allowed, streamLog(source, "admin", q, p))) {
        yield create(ExportAdminLogsResponseSchema, { entry: adminEntry(d) });
      }
    },
  };
}
