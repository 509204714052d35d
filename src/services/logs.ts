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
  ListLogKeysResponseSchema,
  LogDigestSchema,
  type ActivityLogEntry,
  type ActivityLogFilter,
  type AdminLogEntry,
  type AdminLogFilter,
  type LogDigest,
  type LogService,
} from "../../gen/runhook/v1/log_pb.js";
import { UserRefSchema, type UserRef } from "../../gen/runhook/v1/common_pb.js";
import { authorization, directoryOf, whileAllowed } from "./context.js";
import { renderingsOf, userOf } from "./filters.js";
import type { DirectoryView } from "../store/directory-cache.js";
import { apiScope, organizationApiScope, type ApiScope } from "../domain/auth/api-scope.js";
import type { Deps } from "../deps.js";
import { activityStream, adminStream, type LogDocOf, type LogSelection } from "../store/logs.js";
import type { ActivityLogDoc, AdminLogDoc, UserRefDoc } from "../store/types.js";
import { bindingHash, cursorCodec, paging, type Paging } from "../domain/logs/cursor.js";
import { fail } from "../domain/errors.js";
import { createLogReader, type LogReader } from "../domain/logs/reader.js";
import { exportLog, readPage, type LogQuery, type LogSource } from "../domain/logs/paging.js";
import { isRunhookActivityAction, RUNHOOK_ACTIVITY_ACTIONS } from "../lib/activity-actions.js";
import type { DigestLine } from "../domain/logs/digest-format.js";
import { logSigner } from "../domain/logs/digest-keys.js";
import type { ExportItem } from "../domain/logs/digests.js";

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

/** A stored time as a Timestamp: its microseconds when it has them, else its millisecond. */
function entryTime(d: { timestamp: Date; micros?: number }) {
  if (d.micros === undefined) return timestampFromDate(d.timestamp);
  return { seconds: BigInt(Math.floor(d.micros / 1_000_000)), nanos: (d.micros % 1_000_000) * 1000 };
}

/** The names an entry's references are shown with, looked up once per page (the directory's cache first). */
export interface EntryNames {
  user(ref: UserRefDoc): Promise<UserRef>;
  team(renderingId: string | null): Promise<string | undefined>;
  workflow(id: string | undefined): Promise<string | undefined>;
  /** The workflow of a run (older entries name only their run), while the run is kept. */
  workflowOfRun(runId: string | null): Promise<string | undefined>;
}

const MAX_NAMES = 10_000;

export function entryNames(deps: Deps, directory: DirectoryView): EntryNames {
  // Bounded: an export of a long stream names many runs; past the bound, it looks them up again.
  const memo = <T>(read: (key: string) => Promise<T>) => {
    const seen = new Map<string, Promise<T>>();
    return (key: string) => {
      let v = seen.get(key);
      if (!v) {
        if (seen.size >= MAX_NAMES) seen.clear();
        v = read(key);
        seen.set(key, v);
      }
      return v;
    };
  };
  const user = memo((id) => directory.users.get(id));
  const team = memo(async (renderingId) => {
    const rendering = await directory.renderings.get(renderingId);
    return rendering ? (await directory.teams.get(rendering.teamId))?.name : undefined;
  });
  const workflow = memo(async (id) => (await directory.workflows.get(id))?.name);
  const runWorkflow = memo(async (runId) => (await deps.store.runs.get(runId))?.workflowId);
  return {
    async user(ref) {
      const doc = ref.id ? await user(ref.id) : null;
      return create(UserRefSchema, { id: ref.id, email: ref.email, number: BigInt(doc?.number ?? 0), name: doc?.name ?? "" });
    },
    team: async (renderingId) => (renderingId ? team(renderingId) : undefined),
    workflow: async (id) => (id ? workflow(id) : undefined),
    workflowOfRun: async (runId) => (runId ? runWorkflow(runId) : undefined),
  };
}

/**
 * The names an entry's references have in the stored entry itself (the user's id and e-mail),
 * none looked up: what a log digest hashes (domain/logs/digest-format.ts leaves out of the
 * hash what the lookups add).
 */
export const STORED_NAMES: EntryNames = {
  user: async (ref) => create(UserRefSchema, { id: ref.id, email: ref.email }),
  team: async () => undefined,
  workflow: async () => undefined,
  workflowOfRun: async () => undefined,
};

/** A digest of an export as LogDigest. */
function digestMessage(l: DigestLine): LogDigest {
  return create(LogDigestSchema, {
    version: l.version,
    stream: l.stream,
    fromPosition: BigInt(l.from),
    toPosition: BigInt(l.to),
    entryCount: BigInt(l.entries),
    hash: l.hash,
    previousDigest: l.previous,
    createdAt: l.createdAt,
    keyId: l.keyId,
    signature: l.signature,
    leaves: l.leaves.map(([position, hash]) => ({ position: BigInt(position), hash })),
  });
}

/** The step a run's entry was written by (`2. update_record`), when it says. */
const STEP_TYPES: Record<string, string> = { "record.updated": "update_record", "note.created": "add_note" };
function stepName(d: ActivityLogDoc): string | undefined {
  const step = d.details?.step;
  return typeof step === "number" && STEP_TYPES[d.action] ? `${step}. ${STEP_TYPES[d.action]}` : undefined;
}

export async function activityEntry(d: ActivityLogDoc, names: EntryNames): Promise<ActivityLogEntry> {
  const recorded = typeof d.details?.workflowId === "string" ? d.details.workflowId : undefined;
  const workflowId = d.workflowId ?? recorded ?? (await names.workflowOfRun(d.runId));
  const recordedName = typeof d.details?.workflowName === "string" ? d.details.workflowName : undefined;
  const [user, team, workflowName] = await Promise.all([names.user(d.user ?? { id: "", email: "" }), names.team(d.rendering), names.workflow(workflowId)]);
  return create(ActivityLogEntrySchema, {
    id: String(d.seq),
    timestamp: entryTime(d),
    environment: d.environment,
    rendering: d.rendering ?? undefined,
    user,
    action: d.action,
    via: d.via,
    collection: d.collection ?? undefined,
    recordId: d.recordId ?? undefined,
    runId: d.runId ?? undefined,
    details: toJsonObject(d.details),
    team,
    workflowId,
    workflowName: workflowName ?? recordedName ?? (workflowId ? workflowId : undefined),
    stepName: stepName(d),
  });
}

/** The user an admin entry is about: its target when that is a user (`user/<id>`), or its details' `userId`. */
function subjectOf(d: AdminLogDoc): string | undefined {
  if (d.target.startsWith("user/")) return d.target.slice("user/".length);
  return typeof d.details?.userId === "string" ? d.details.userId : undefined;
}

export async function adminEntry(d: AdminLogDoc, names: EntryNames): Promise<AdminLogEntry> {
  const subject = subjectOf(d);
  const [actor, subjectRef] = await Promise.all([
    names.user(d.actor ?? { id: "", email: "" }),
    subject ? names.user({ id: subject, email: typeof d.details?.email === "string" ? d.details.email : "" }) : undefined,
  ]);
  return create(AdminLogEntrySchema, {
    id: String(d.seq),
    timestamp: entryTime(d),
    environment: d.environment ?? undefined,
    actor,
    action: d.action,
    target: d.target,
    details: toJsonObject(d.details),
    subject: subjectRef,
  });
}

/**
 * What a cursor is bound to, besides the filters. `pos` names what the position counts:
 * sequence numbers within the scope's stream (cursors of the earlier global numbering
 * are refused, not misread).
 */
function pagingBinding(list: string, scope: string, p: Paging) {
  return { list, scope, pos: "stream-seq", order: p.order, from: p.fromMicros, to: p.toMicros };
}

/** A filter's actions: `action` and `actions` together (undefined: any). */
function actionsOf(f: { action: string; actions: string[] } | undefined): string[] | undefined {
  const all = [...(f?.action ? [f.action] : []), ...(f?.actions ?? [])];
  return all.length > 0 ? [...new Set(all)].sort() : undefined;
}

/**
 * An activity filter's actions, each one that runhook writes, else INVALID_ARGUMENT (an empty one,
 * which the public API's list sends for an action of the document that runhook never writes, selects nothing).
 */
function activityActionsOf(f: ActivityLogFilter | undefined): string[] | undefined {
  const actions = actionsOf(f);
  const unknown = actions?.find((a) => a !== "" && !isRunhookActivityAction(a));
  if (unknown !== undefined) throw fail.invalid(`action must be one of ${RUNHOOK_ACTIVITY_ACTIONS.join(", ")}, got "${unknown}"`);
  return actions;
}

async function activityQuery(deps: Deps, scope: ApiScope, f: ActivityLogFilter | undefined, p: Paging, list: string): Promise<LogQuery> {
  const environmentId = scope.environment!._id;
  const [userId, renderings] = await Promise.all([userOf(deps, scope.project.organizationId, f), renderingsOf(deps, scope, f)]);
  const actions = activityActionsOf(f);
  const filters = { userId, userEmail: f?.userEmail, collection: f?.collection, recordId: f?.recordId, runId: f?.runId };
  const selection: LogSelection = { scopeId: environmentId, ...filters, actions, renderings, fromMicros: p.fromMicros, toMicros: p.toMicros };
  const hash = bindingHash({ ...pagingBinding(list, environmentId, p), ...filters, actions: actions?.join(","), renderings: renderings?.join(",") });
  return { stream: activityStream(environmentId), selection, hash };
}

/** Where an admin log is read: a project's, or (projectId null) the organization's own stream. */
interface AdminScope {
  organizationId: string;
  projectId: string | null;
}

async function adminQuery(deps: Deps, { organizationId, projectId }: AdminScope, f: AdminLogFilter | undefined, p: Paging, list: string): Promise<LogQuery> {
  const scopeId = projectId ?? organizationId;
  const actions = actionsOf(f);
  const filters = { userId: await userOf(deps, organizationId, f), userEmail: f?.userEmail };
  const selection: LogSelection = {
    scopeId,
    ...(projectId ? {} : { organization: true }),
    ...filters,
    actions,
    fromMicros: p.fromMicros,
    toMicros: p.toMicros,
  };
  const hash = bindingHash({ ...pagingBinding(list, scopeId, p), ...filters, actions: actions?.join(",") });
  return { stream: adminStream(organizationId, projectId), selection, hash };
}

/** The cursor binding's list name of each admin log: a cursor of one is refused by the other. */
const PROJECT_ADMIN = "admin";
const ORGANIZATION_ADMIN = "organization-admin";

/** An admin log request, whichever the scope: its paging options and filters. */
interface AdminRequest {
  options?: Parameters<typeof paging>[0];
  filter?: AdminLogFilter;
  includeDigests?: boolean;
}

/** One page of an admin log of `scope`. */
async function adminPage(deps: Deps, ctx: HandlerContext, source: LogSource, req: AdminRequest, p: Paging, scope: AdminScope, list: string) {
  const page = await readPage(source, "admin", await adminQuery(deps, scope, req.filter, p, list), p);
  const names = entryNames(deps, directoryOf(deps, ctx.values));
  return { adminLogs: await Promise.all(page.docs.map((d) => adminEntry(d, names))), hasMore: page.hasMore, nextCursor: page.nextCursor };
}

/** Every matching entry of an admin log (and its digests, if asked), for as long as `allowed` (which gives the scope) keeps granting it. */
async function* adminExport(
  deps: Deps,
  source: LogSource,
  ctx: HandlerContext,
  req: AdminRequest,
  allowed: (directory: DirectoryView) => Promise<AdminScope>,
  list: string,
): AsyncGenerator<{ entry?: AdminLogEntry; digest?: LogDigest }> {
  const p = paging(req.options, { ignoreLimit: true });
  const directory = directoryOf(deps, ctx.values);
  const scope = await allowed(directory);
  const q = await adminQuery(deps, scope, req.filter, p, list);
  const names = entryNames(deps, directory);
  const items = exportLog(source, "admin", q, p, req.includeDigests ?? false);
  for await (const item of whileAllowed(deps, ctx.values, allowed, items)) yield await exportMessage(item, (d) => adminEntry(d, names));
}

/** An export's item as the fields of its response message: `entry` or `digest`. */
async function exportMessage<K extends "activity" | "admin", E>(item: ExportItem<K>, entry: (d: LogDocOf<K>) => Promise<E>) {
  return item.digest === undefined ? { entry: await entry(item.doc) } : { digest: digestMessage(item.digest) };
}

const projectScope = (s: { project: { organizationId: string; _id: string } }): AdminScope => ({
  organizationId: s.project.organizationId,
  projectId: s.project._id,
});
const organizationScope = (s: { token: { organizationId: string } }): AdminScope => ({ organizationId: s.token.organizationId, projectId: null });

export function createLogService(deps: Deps, opts: { reader?: LogReader } = {}): ServiceImpl<typeof LogService> {
  const reader = opts.reader ?? createLogReader(deps.store, { retentionDays: deps.config.retention.logDays });
  const source: LogSource = { store: deps.store, reader, codec: cursorCodec(deps.config) };
  const signer = logSigner(deps.config);
  return {
    async listActivityLogs(req, ctx) {
      const p = paging(req.options);
      const directory = directoryOf(deps, ctx.values);
      const scope = await apiScope(directory, authorization(ctx), req.projectName, req.environmentName);
      const page = await readPage(source, "activity", await activityQuery(deps, scope, req.filter, p, "activity"), p);
      const names = entryNames(deps, directory);
      return { activityLogs: await Promise.all(page.docs.map((d) => activityEntry(d, names))), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
    async listAdminLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await apiScope(directoryOf(deps, ctx.values), authorization(ctx), req.projectName);
      return adminPage(deps, ctx, source, req, p, projectScope(scope), PROJECT_ADMIN);
    },
    async listOrganizationAdminLogs(req, ctx) {
      const p = paging(req.options);
      const scope = await organizationApiScope(directoryOf(deps, ctx.values), authorization(ctx));
      return adminPage(deps, ctx, source, req, p, organizationScope(scope), ORGANIZATION_ADMIN);
    },
    async *exportActivityLogs(req, ctx) {
      const p = paging(req.options, { ignoreLimit: true });
      const allowed = (directory: DirectoryView) => apiScope(directory, authorization(ctx), req.projectName, req.environmentName);
      const directory = directoryOf(deps, ctx.values);
      const scope = await allowed(directory);
      const q = await activityQuery(deps, scope, req.filter, p, "activity");
      const names = entryNames(deps, directory);
      const items = exportLog(source, "activity", q, p, req.includeDigests);
      for await (const item of whileAllowed(deps, ctx.values, allowed, items)) {
        yield create(ExportActivityLogsResponseSchema, await exportMessage(item, (d) => activityEntry(d, names)));
      }
    },
    async *exportAdminLogs(req, ctx) {
      const allowed = async (directory: DirectoryView) => projectScope(await apiScope(directory, authorization(ctx), req.projectName));
      for await (const item of adminExport(deps, source, ctx, req, allowed, PROJECT_ADMIN)) yield create(ExportAdminLogsResponseSchema, item);
    },
    async *exportOrganizationAdminLogs(req, ctx) {
      const allowed = async (directory: DirectoryView) => organizationScope(await organizationApiScope(directory, authorization(ctx)));
      for await (const item of adminExport(deps, source, ctx, req, allowed, ORGANIZATION_ADMIN)) yield create(ExportOrganizationAdminLogsResponseSchema, item);
    },
    async listLogKeys(req, ctx) {
      // The keys are the server's, the same for every log: the scope only authenticates the call.
      const directory = directoryOf(deps, ctx.values);
      if (req.projectName) await apiScope(directory, authorization(ctx), req.projectName, req.environmentName || undefined);
      else if (req.environmentName) throw fail.invalid("an environment name needs its project name");
      else await organizationApiScope(directory, authorization(ctx));
      return create(ListLogKeysResponseSchema, { keys: signer.publicKeys });
    },
  };
}
