// LogService: the activity log (per environment) and the admin log (per project, and the
// organization's own) of the public API, as pages (List*) and as complete streams (Export*).
//
// Order is the sequence number (`seq`) within the log's stream (store/logs.ts): an
// environment's activity log, a project's admin log, an organization's admin log. The paging
// itself is domain/logs/paging.ts (one implementation for every stream); this file turns
// requests into queries and entries into messages.
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  ActivityLogEntrySchema,
  AdminLogEntrySchema,
  ExportActivityLogsResponseSchema,
  ExportAdminLogsResponseSchema,
  ExportOrganizationAdminLogsResponseSchema,
  type ActivityLogEntry,
  type ActivityLogFilter,
  type AdminLogEntry,
  type AdminLogFilter,
  type LogService,
} from "../../gen/runhook/v1/log_pb.js";
import { authorization, directoryOf, whileAllowed } from "./context.js";
import type { DirectoryView } from "../store/directory-cache.js";
import { apiScope, organizationApiScope } from "../domain/auth/api-scope.js";
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

/** Where an admin log is read: a project's, or (projectId null) the organization's own stream. */
interface AdminScope {
  organizationId: string;
  projectId: string | null;
}

function adminQuery({ organizationId, projectId }: AdminScope, f: AdminLogFilter | undefined, p: Paging, list: string): LogQuery {
  const scopeId = projectId ?? organizationId;
  const filters = { userId: f?.userId, userEmail: f?.userEmail, action: f?.action };
  const selection: LogSelection = { scopeId, ...(projectId ? {} : { organization: true }), ...filters, from: p.from, to: p.to };
  const hash = bindingHash({ ...pagingBinding(list, scopeId, p), ...filters });
  return { stream: adminStream(organizationId, projectId), selection, hash };
}

/** The cursor binding's list name of each admin log: a cursor of one is refused by the other. */
const PROJECT_ADMIN = "admin";
const ORGANIZATION_ADMIN = "organization-admin";

/** An admin log request, whichever the scope: its paging options and filters. */
interface AdminRequest {
  options?: Parameters<typeof paging>[0];
  filter?: AdminLogFilter;
}

/** One page of an admin log of `scope`. */
async function adminPage(source: LogSource, req: AdminRequest, p: Paging, scope: AdminScope, list: string) {
  const page = await readPage(source, "admin", adminQuery(scope, req.filter, p, list), p);
  return { adminLogs: page.docs.map(adminEntry), hasMore: page.hasMore, nextCursor: page.nextCursor };
}

/** Every matching entry of an admin log, for as long as `allowed` (which gives the scope) keeps granting it. */
async function* adminExport(
  deps: Deps,
  source: LogSource,
  ctx: HandlerContext,
  req: AdminRequest,
  allowed: (directory: DirectoryView) => Promise<AdminScope>,
  list: string,
): AsyncGenerator<AdminLogEntry> {
  const p = paging(req.options, { ignoreLimit: true });
  const scope = await allowed(directoryOf(deps, ctx.values));
  for await (const d of whileAllowed(deps, ctx.values, allowed, streamLog(source, "admin", adminQuery(scope, req.filter, p, list), p))) yield adminEntry(d);
}

const projectScope = (s: { project: { organizationId: string; _id: string } }): AdminScope => ({
  organizationId: s.project.organizationId,
  projectId: s.project._id,
});
const organizationScope = (s: { token: { organizationId: string } }): AdminScope => ({ organizationId: s.token.organizationId, projectId: null });

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
      return adminPage(source, req, p, projectScope(scope), PROJECT_ADMIN);
    },
    async listOrganizationAdminLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await organizationApiScope(directoryOf(deps, ctx.values), authorization(ctx));
      return adminPage(source, req, p, organizationScope(scope), ORGANIZATION_ADMIN);
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
      const allowed = async (directory: DirectoryView) => projectScope(await apiScope(directory, authorization(ctx), req.projectName));
      for await (const entry of adminExport(deps, source, ctx, req, allowed, PROJECT_ADMIN)) yield create(ExportAdminLogsResponseSchema, { entry });
    },
    async *exportOrganizationAdminLogs(req, ctx) {
      const allowed = async (directory: DirectoryView) => organizationScope(await organizationApiScope(directory, authorization(ctx)));
      for await (const entry of adminExport(deps, source, ctx, req, allowed, ORGANIZATION_ADMIN))
        yield create(ExportOrganizationAdminLogsResponseSchema, { entry });
    },
  };
}
