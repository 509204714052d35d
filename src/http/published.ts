// The /v1 list operations as the published public API (Forest Admin's OpenAPI document 1.38.0,
// kept in openapi/forest-public-api-1.38.0.json) has them: their query parameters, read into the
// LogService and NoteService requests, and their answers — the envelope `{hasMore, parameters,
// data}` and the published items — made from the services' messages. The one mapping of
// runhook's actions onto the document's enums is here too (docs/integrators.md shows it).
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { UserRef } from "../../gen/runhook/v1/common_pb.js";
import type { ActivityLogEntry, AdminLogEntry } from "../../gen/runhook/v1/log_pb.js";
import type { Note, NoteMessage } from "../../gen/runhook/v1/note_pb.js";
import { fail } from "../domain/errors.js";
import { isRunhookActivityAction, type RunhookActivityAction } from "../lib/activity-actions.js";
import { NO_TEAM } from "../domain/teams.js";
import { EMAIL } from "../services/admin/common.js";
import { activityEntry, adminEntry, STORED_NAMES } from "../services/logs.js";
import type { StoredItem } from "../domain/logs/digests.js";
import { parseRfc3339, utcSeconds, type Civil, type QueryReader } from "./params.js";

// ---------------------------------------------------------------- actions

/** The document's activity actions (its `action` enum). */
export const ACTIVITY_ACTIONS = [
  "create",
  "read",
  "update",
  "delete",
  "action",
  "search",
  "filter",
  "listRelatedData",
  "describeCollection",
  "index",
  "select",
  "dashboard",
  "workspace",
  "export",
  "createNote",
  "openNote",
  "deleteNote",
  "createMessage",
  "createApproval",
  "approveApproval",
  "rejectApproval",
  "ignoreApprovalWarning",
  "markApprovalAsFailed",
  "startProcessingInboxTask",
  "completeInboxTask",
  "cancelInboxTask",
  "cancelInboxTaskNotTreated",
  "autoCancelInboxTask",
  "assignUserToInboxTask",
  "unassignUserFromInboxTask",
  "sendApprovalBackInReview",
  "triggerWorkflow",
  "abortWorkflow",
  "completeWorkflow",
  "selectWorkflowOption",
  "completeWorkflowStep",
  "reviseWorkflowStep",
  "resumeWorkflow",
] as const;
export type PublishedActivityAction = (typeof ACTIVITY_ACTIONS)[number];

/**
 * Each activity action runhook records, as the document's action and the label shown with it
 * (`workflow` is the run's workflow name, when known). Every runhook entry is a change (type
 * `write`): runhook records no reads. The document has no value for a failed run: it is
 * `abortWorkflow` (the run ended without completing), its label saying it failed.
 */
export const ACTIVITY_MAPPING: Record<RunhookActivityAction, { action: PublishedActivityAction; label: (workflow: string) => string }> = {
  "workflow.run.triggered": { action: "triggerWorkflow", label: (w) => `triggered the workflow "${w}"` },
  "workflow.run.succeeded": { action: "completeWorkflow", label: (w) => `completed the workflow "${w}"` },
  "workflow.run.failed": { action: "abortWorkflow", label: (w) => `the workflow "${w}" failed` },
  "workflow.run.cancelled": { action: "abortWorkflow", label: (w) => `aborted the workflow "${w}"` },
  "record.updated": { action: "update", label: () => "updated" },
  "note.created": { action: "createNote", label: () => "created a note" },
  "note.message.created": { action: "createMessage", label: () => "replied to a note" },
  "note.updated": { action: "update", label: () => "updated a note" },
  "note.deleted": { action: "deleteNote", label: () => "deleted a note" },
};

/** An action runhook may record later and this table does not know yet: still listed, as a generic `action`. */
const UNKNOWN_ACTIVITY = { action: "action" as const, label: () => "acted" };

/** The document's admin-log enums. */
export const ADMIN_TYPES = ["add", "remove", "update", "initial"] as const;
export const ADMIN_RESOURCES = ["user-project", "role", "team", "environment"] as const;
export const ADMIN_INITIATORS = ["administrator", "identityProvider", "forestAdmin"] as const;
type AdminType = (typeof ADMIN_TYPES)[number];
type AdminResource = (typeof ADMIN_RESOURCES)[number];
type AdminInitiator = (typeof ADMIN_INITIATORS)[number];

/**
 * Each admin action runhook records, as the document's type, resource and initiator. The
 * document knows four resources: a user's access to the project (`user-project`: accounts, roles,
 * team memberships and the user's tokens), roles (`role`: the permissions of roles on
 * collections), teams, and the environment (`environment`: everything configured in it or in the
 * project — collections, workflows, webhooks, renderings' environments, the project's settings).
 * The bootstrap that creates an organization is the operator's (`forestAdmin`); everything else
 * is an administrator's.
 */
export const ADMIN_MAPPING: Record<string, { type: AdminType; resource: AdminResource; initiator?: AdminInitiator }> = {
  "user.created": { type: "add", resource: "user-project" },
  "project.role.changed": { type: "update", resource: "user-project" },
  "team.member.added": { type: "update", resource: "user-project" },
  "team.member.removed": { type: "update", resource: "user-project" },
  "token.created": { type: "update", resource: "user-project" },
  "token.revoked": { type: "update", resource: "user-project" },
  "api_token.created": { type: "update", resource: "user-project" },
  "api_token.revoked": { type: "update", resource: "user-project" },
  "org_api_token.created": { type: "update", resource: "user-project" },
  "org_api_token.revoked": { type: "update", resource: "user-project" },
  "permissions.changed": { type: "update", resource: "role" },
  "team.created": { type: "add", resource: "team" },
  "rendering.created": { type: "update", resource: "team" },
  "organization.created": { type: "initial", resource: "environment", initiator: "forestAdmin" },
  "project.created": { type: "initial", resource: "environment" },
  "project.updated": { type: "update", resource: "environment" },
  "environment.created": { type: "add", resource: "environment" },
  "collection.created": { type: "update", resource: "environment" },
  "workflow.created": { type: "update", resource: "environment" },
  "workflow.published": { type: "update", resource: "environment" },
  "workflow.deactivated": { type: "update", resource: "environment" },
  "webhook.enabled": { type: "update", resource: "environment" },
  "webhook.disabled": { type: "update", resource: "environment" },
  "webhook.regenerated": { type: "update", resource: "environment" },
  "webhook.rate_limit.changed": { type: "update", resource: "environment" },
  "run_batch.created": { type: "update", resource: "environment" },
  "run_batch.finished": { type: "update", resource: "environment" },
  "run_batch.cancelled": { type: "update", resource: "environment" },
};

const UNKNOWN_ADMIN = { type: "update" as const, resource: "environment" as const };

const adminMappingOf = (action: string) => ADMIN_MAPPING[action] ?? UNKNOWN_ADMIN;

/** The runhook actions whose published form passes `keep` ([""]: none, an action no entry has). */
function actionsWhere<M>(table: Record<string, M>, keep: (m: M) => boolean): string[] {
  const actions = Object.keys(table).filter((a) => keep(table[a]!));
  return actions.length > 0 ? actions : [""];
}

// ---------------------------------------------------------------- query parameters

const TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?([Zz]|[+-]\d{2}:?\d{2})?$/;

/**
 * A date-time filter value: RFC 3339, or ISO 8601 to the minute as the document allows
 * (`2024-06-04T09:21`; no offset means UTC), to the nanosecond (digits past the ninth are cut).
 */
export function parseDateTime(v: string, name: string): Timestamp {
  const m = TIME.exec(v);
  const bad = () => fail.invalid(`${name} must be a date-time such as 2024-06-04T09:21:26.159Z, got "${v}"`);
  if (!m) throw bad();
  const civil = utcSeconds([m[1], m[2], m[3], m[4], m[5], m[6] ?? "0"].map(Number) as Civil);
  if (civil === undefined) throw bad();
  let offset = 0;
  const zone = m[8];
  if (zone && zone !== "Z" && zone !== "z") {
    const digits = zone.replace(":", "");
    const [h, mm] = [Number(digits.slice(1, 3)), Number(digits.slice(3, 5))];
    if (h > 23 || mm > 59) throw bad();
    offset = (zone[0] === "-" ? -1 : 1) * (h * 60 + mm) * 60;
  }
  const seconds = BigInt(civil - offset);
  const nanos = Number((m[7] ?? "").slice(0, 9).padEnd(9, "0"));
  return { $typeName: "google.protobuf.Timestamp", seconds, nanos } as Timestamp;
}

/** One nanosecond later. */
function plusOne(t: Timestamp): Timestamp {
  return t.nanos === 999_999_999 ? { ...t, seconds: t.seconds + 1n, nanos: 0 } : { ...t, nanos: t.nanos + 1 };
}

/**
 * The furthest time from 1970, either way, that runhook compares (to the microsecond, in a safe
 * integer: the years 1684 to 2255). A bound past it is moved onto it, which selects the same
 * entries and notes (none is that far); unmoved, it would be refused as no valid time.
 */
const FURTHEST_SECONDS = BigInt(Math.floor(Number.MAX_SAFE_INTEGER / 1_000_000) - 1);

function withinReach(t: Timestamp): Timestamp {
  if (t.seconds > FURTHEST_SECONDS) return { ...t, seconds: FURTHEST_SECONDS, nanos: 0 };
  if (t.seconds < -FURTHEST_SECONDS) return { ...t, seconds: -FURTHEST_SECONDS, nanos: 0 };
  return t;
}

const later = (a: Timestamp, b: Timestamp) => a.seconds > b.seconds || (a.seconds === b.seconds && a.nanos > b.nanos);

/**
 * A `<field>.eq|lt|lte|gt|gte` family as one range [from, to): `gt`/`lte` are one nanosecond
 * on, `eq` both ends; several bounds narrow it; bounds that leave nothing give an empty range.
 */
export function timeRange(query: QueryReader, field: string): { from?: Timestamp; to?: Timestamp } {
  const read = (op: string) => {
    const v = query(`${field}.${op}`);
    return v === undefined || v === "" ? undefined : withinReach(parseDateTime(v, `${field}.${op}`));
  };
  const [eq, lt, lte, gt, gte] = ["eq", "lt", "lte", "gt", "gte"].map(read);
  const froms = [gte, gt && plusOne(gt), eq].filter((t): t is Timestamp => t !== undefined);
  const tos = [lt, lte && plusOne(lte), eq && plusOne(eq)].filter((t): t is Timestamp => t !== undefined);
  const from = froms.reduce<Timestamp | undefined>((a, b) => (!a || later(b, a) ? b : a), undefined);
  let to = tos.reduce<Timestamp | undefined>((a, b) => (!a || later(a, b) ? b : a), undefined);
  if (from && to && later(from, to)) to = from;
  return { from, to };
}

export const TIME_OPS = ["eq", "lt", "lte", "gt", "gte"] as const;
export const timeParams = (field: string) => TIME_OPS.map((op) => `${field}.${op}`);

/**
 * Refuses a document parameter given empty: the document's schemas allow no empty value (a
 * minimum length, a format, an enum or a number), so `teamName=` is a 400 naming it rather than
 * a filter silently left out. runhook's own (`cursor`, `order`, `runId`) may be empty.
 */
export function refuseEmpty(query: QueryReader, names: readonly string[]): void {
  for (const name of names) if (query(name) === "") throw fail.invalid(`${name} must not be empty`);
}

/** `limit`, 1 to 100, 10 by default. */
export const PUBLISHED_MAX_LIMIT = 100;
export const PUBLISHED_DEFAULT_LIMIT = 10;

function limitOf(query: QueryReader): number {
  const raw = query("limit");
  if (raw === undefined || raw === "") return PUBLISHED_DEFAULT_LIMIT;
  if (!/^\d{1,7}$/.test(raw) || Number(raw) < 1 || Number(raw) > PUBLISHED_MAX_LIMIT)
    throw fail.invalid(`limit must be a whole number from 1 to ${PUBLISHED_MAX_LIMIT}, got "${raw}"`);
  return Number(raw);
}

/** A user id of the document: a positive integer (runhook's user number). */
function userNumberOf(query: QueryReader): bigint {
  const raw = query("userId");
  if (raw === undefined || raw === "") return 0n;
  if (!/^[0-9]{1,15}$/.test(raw) || Number(raw) < 1) throw fail.invalid(`userId must be a whole number of at least 1, got "${raw}"`);
  return BigInt(raw);
}

function oneOf<T extends string>(query: QueryReader, name: string, allowed: readonly T[]): T | undefined {
  const v = query(name);
  if (v === undefined || v === "") return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw fail.invalid(`${name} must be one of ${allowed.join(", ")}, got "${v}"`);
  return v as T;
}

/** `order` (runhook's addition): `desc` (the document's order, newest first) unless `asc`. */
function orderOf(query: QueryReader): "asc" | "desc" {
  const v = query("order");
  if (v === undefined || v === "" || v === "desc") return "desc";
  if (v === "asc") return "asc";
  throw fail.invalid(`order must be "asc" or "desc", got "${v}"`);
}

/** The paging of a published list: its limit, runhook's cursor and order, and the createdAt range. */
export function publishedOptions(query: QueryReader) {
  const { from, to } = timeRange(query, "createdAt");
  return { limit: limitOf(query), cursor: query("cursor") ?? "", order: orderOf(query), fromTime: from, toTime: to };
}

const text = (query: QueryReader, name: string) => query(name) ?? "";

/** `userEmail` (the document's `format: email`): an address a runhook user can have, or none. */
function userEmailOf(query: QueryReader): string {
  const email = text(query, "userEmail");
  if (email !== "" && !EMAIL.test(email)) throw fail.invalid(`userEmail must be an e-mail address, got "${email}"`);
  return email;
}

/** The team filter: a team's name, or NO_TEAM for entries and notes of none. */
function teamFilter(query: QueryReader): { team: string; withoutTeam: boolean } {
  const name = text(query, "teamName");
  return name === NO_TEAM ? { team: "", withoutTeam: true } : { team: name, withoutTeam: false };
}

/** The filters activity logs and notes share: the user, the team, the record. */
function userTeamRecord(query: QueryReader) {
  return {
    userEmail: userEmailOf(query),
    userNumber: userNumberOf(query),
    ...teamFilter(query),
    collection: text(query, "collectionName"),
    recordId: text(query, "recordId"),
  };
}

/** The activity-log filter of the document's parameters (and runhook's `runId`). */
export function activityFilter(query: QueryReader) {
  const action = oneOf(query, "action", ACTIVITY_ACTIONS);
  const type = oneOf(query, "type", ["read", "write"] as const);
  // runhook records changes only: `type=read` selects nothing.
  const actions = type === "read" ? [""] : action ? actionsWhere(ACTIVITY_MAPPING, (m) => m.action === action) : [];
  return { ...userTeamRecord(query), runId: text(query, "runId"), actions };
}

/** The admin-log filter of the document's parameters. */
export function adminFilter(query: QueryReader) {
  const type = oneOf(query, "type", ADMIN_TYPES);
  const resource = oneOf(query, "resource", ADMIN_RESOURCES);
  const initiator = oneOf(query, "initiator", ADMIN_INITIATORS);
  const narrowed = type || resource || initiator;
  const actions = narrowed
    ? actionsWhere(
        ADMIN_MAPPING,
        (m) => (!type || m.type === type) && (!resource || m.resource === resource) && (!initiator || (m.initiator ?? "administrator") === initiator),
      )
    : [];
  return { userEmail: userEmailOf(query), userNumber: userNumberOf(query), actions };
}

/** The notes filter of the document's parameters. */
export function noteFilter(query: QueryReader) {
  const updated = timeRange(query, "updatedAt");
  const archived = timeRange(query, "archivedAt");
  return {
    ...userTeamRecord(query),
    updatedFrom: updated.from,
    updatedTo: updated.to,
    archivedFrom: archived.from,
    archivedTo: archived.to,
  };
}

/**
 * The envelope's `parameters`: the path's names, `limit`, and each of the document's query
 * parameters the request gave, typed as the document types them (runhook's additions are not
 * among them).
 */
export function parametersOf(path: Record<string, string>, query: QueryReader, names: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...path, limit: limitOf(query) };
  for (const name of names) {
    const v = query(name);
    if (v === undefined || v === "" || name === "limit") continue;
    out[name] = name === "userId" ? Number(v) : TIME_OPS.some((op) => name.endsWith(`.${op}`)) ? echoedTime(v, name) : v;
  }
  return out;
}

/**
 * A date-time filter as the envelope echoes it (the document's `format: date-time`): as given
 * when it is RFC 3339, else the instant it names (`2024-06-04T09:21` and the other ISO 8601 forms
 * parseDateTime reads) in RFC 3339, UTC, to the nanosecond given.
 */
function echoedTime(v: string, name: string): string {
  if (parseRfc3339(v)) return v;
  const t = parseDateTime(v, name);
  const nanos = t.nanos % 1000;
  return nanos === 0 ? publishedTime(t) : `${publishedTime(t).slice(0, -1)}${String(nanos).padStart(3, "0")}Z`;
}

// ---------------------------------------------------------------- items

/** A time as the document shows it: RFC 3339 in UTC, to the microsecond. */
export function publishedTime(t: Timestamp | undefined): string {
  const { seconds, nanos } = t ?? { seconds: 0n, nanos: 0 };
  // The millisecond the time falls in (timestampDate rounds to the nearest: .999999 would read as the next one).
  const iso = new Date(Number(seconds) * 1000 + Math.floor(nanos / 1_000_000)).toISOString();
  const micros = String(Math.floor(nanos / 1000) % 1000).padStart(3, "0");
  return `${iso.slice(0, -1)}${micros}Z`;
}

export function publishedUser(u: UserRef | undefined) {
  const email = u?.email ?? "";
  return { object: "user", id: Number(u?.number ?? 0n), username: u?.name || email || "unknown", email };
}

const named = (object: string, name: string) => ({ object, name });

export function activityItem(e: ActivityLogEntry) {
  const mapped = isRunhookActivityAction(e.action) ? ACTIVITY_MAPPING[e.action] : UNKNOWN_ACTIVITY;
  const workflow = e.workflowName ?? e.workflowId ?? "";
  return {
    object: "activityLog",
    id: e.id,
    type: "write",
    action: mapped.action,
    label: mapped.label(workflow),
    recordIds: e.recordId ? [e.recordId] : [],
    createdAt: publishedTime(e.timestamp),
    user: publishedUser(e.user),
    environment: named("environment", e.environment || "unknown"),
    ...(e.collection ? { collection: named("collection", e.collection) } : {}),
    team: named("team", e.team || NO_TEAM),
    ...(e.runId && workflow ? { workflow: { object: "workflow", name: workflow, runId: e.runId, ...(e.stepName ? { stepName: e.stepName } : {}) } } : {}),
  };
}

/** What an admin entry changed to, where the document can say it: the user and role of a user-project entry, a team's name. */
function newValueOf(e: AdminLogEntry, resource: AdminResource): Record<string, unknown> | undefined {
  const details = e.details ?? {};
  if (resource === "user-project" && e.subject?.id) {
    const role = typeof details.role === "string" && ["admin", "editor", "user"].includes(details.role) ? { permissionLevel: details.role } : {};
    return { user: publishedUser(e.subject), ...role };
  }
  if (resource === "team" && e.action === "team.created" && typeof details.name === "string" && details.name) return { name: details.name };
  return undefined;
}

export function adminItem(e: AdminLogEntry) {
  const mapped = adminMappingOf(e.action);
  const newValue = newValueOf(e, mapped.resource);
  return {
    object: "adminLog",
    id: e.id,
    type: mapped.type,
    resource: mapped.resource,
    initiator: "initiator" in mapped && mapped.initiator ? mapped.initiator : "administrator",
    createdAt: publishedTime(e.timestamp),
    ...(e.actor?.id ? { user: publishedUser(e.actor) } : {}),
    ...(newValue ? { newValue } : {}),
  };
}

export function noteMessageItem(m: NoteMessage) {
  return { object: "note-message", content: m.content, createdAt: publishedTime(m.createdAt), user: publishedUser(m.user) };
}

export function noteItem(n: Note, environment: string) {
  return {
    object: "note",
    id: Number(n.number),
    title: n.title,
    recordId: n.recordId,
    createdAt: publishedTime(n.createdAt),
    updatedAt: publishedTime(n.updatedAt),
    ...(n.archivedAt ? { archivedAt: publishedTime(n.archivedAt) } : {}),
    user: publishedUser(n.user),
    environment: named("environment", environment),
    team: named("team", n.team || NO_TEAM),
    collection: named("collection", n.collection),
    messages: n.messages.map(noteMessageItem),
  };
}

/** A stored log entry as the NDJSON export writes it, without looking any name up: what its digest hash covers. */
export const storedItem: StoredItem = async (kind, doc) =>
  kind === "activity"
    ? activityItem(await activityEntry(doc as Parameters<typeof activityEntry>[0], STORED_NAMES))
    : adminItem(await adminEntry(doc as Parameters<typeof adminEntry>[0], STORED_NAMES));
