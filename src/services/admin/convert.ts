// Documents ↔ AdminService messages, and validation of workflow steps.
import type { JsonObject, JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { WorkflowSchema, WorkflowVersionSchema, WebhookSchema } from "../../../gen/runhook/v1/admin_pb.js";
import type { Step, StepSchema } from "../../../gen/runhook/v1/common_pb.js";
import type { Config } from "../../config.js";
import type * as T from "../../store/types.js";
import { fail } from "../../domain/errors.js";
import { MAX_WAIT_STEP_SECONDS } from "../../domain/runs/model.js";
import { signWebhookKey, webhookUrl } from "../../domain/webhook-keys.js";
import { checkTitle } from "../../domain/notes/threads.js";
import { MAX_NOTE_CONTENT_BYTES } from "../../domain/notes/sanitize.js";

export const MAX_STEPS = 100;
const FIELD = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** A field name usable as a key part, a scope key or an update target. */
export function isFieldName(s: string): boolean {
  return FIELD.test(s);
}

function assertNoOperators(value: JsonValue, where: string): void {
  if (Array.isArray(value)) for (const v of value) assertNoOperators(v, where);
  else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (k.startsWith("$") || k.includes(".") || k.includes("\0")) throw fail.invalid(`${where}: field name "${k}" may not start with '$' or contain '.'`);
      assertNoOperators(v as JsonValue, where);
    }
  }
}

/** A version's steps, stored (as JSON): at most this many bytes. */
export const MAX_VERSION_BYTES = 64 * 1024;
/** Versions a workflow keeps; a publish beyond them is refused (a new workflow starts afresh). */
export const MAX_KEPT_VERSIONS = 100;
/**
 * The steps of all a workflow's versions (as JSON): at most this many bytes, so that a workflow
 * with every version's steps (GetWorkflow, PublishWorkflow) stays one bounded answer; a publish
 * beyond is refused (a new workflow starts afresh).
 */
export const MAX_WORKFLOW_BYTES = 1024 * 1024;

/** What steps weigh, as the limits above count them: their JSON. */
export const stepsBytes = (steps: T.StepDoc[]) => Buffer.byteLength(JSON.stringify(steps));

/** Proto steps → documents, validated against the collection's primary key, with their size (stepsBytes). */
export function stepsFromProto(steps: Step[], primaryKey: string[]): { steps: T.StepDoc[]; bytes: number } {
  if (steps.length === 0) throw fail.invalid("steps: a workflow needs at least one step");
  if (steps.length > MAX_STEPS) throw fail.invalid(`steps: at most ${MAX_STEPS} steps`);
  const docs = steps.map((s, i) => stepFromProto(s, `steps[${i}]`, primaryKey));
  const bytes = stepsBytes(docs);
  if (bytes > MAX_VERSION_BYTES) throw fail.invalid(`steps: at most ${MAX_VERSION_BYTES / 1024} KiB in all (these are ${Math.ceil(bytes / 1024)} KiB)`);
  return { steps: docs, bytes };
}

function stepFromProto(s: Step, at: string, primaryKey: string[]): T.StepDoc {
  switch (s.kind.case) {
    case "loadRecord":
      return { type: "load_record" };
    case "wait": {
      const n = s.kind.value.seconds;
      if (n > MAX_WAIT_STEP_SECONDS) throw fail.invalid(`${at}.wait.seconds: must be 0 to ${MAX_WAIT_STEP_SECONDS}`);
      return { type: "wait", seconds: n };
    }
    case "updateRecord": {
      const set = (s.kind.value.set ?? {}) as JsonObject;
      const fields = Object.keys(set);
      if (fields.length === 0) throw fail.invalid(`${at}.update_record.set: must name at least one field`);
      for (const f of fields) {
        if (!isFieldName(f)) throw fail.invalid(`${at}.update_record.set: "${f}" is not a valid field name (letters, digits, '_')`);
        if (f === "_id" || primaryKey.includes(f)) throw fail.invalid(`${at}.update_record.set: "${f}" is a primary key field and cannot be set`);
        assertNoOperators(set[f] as JsonValue, `${at}.update_record.set.${f}`);
      }
      return { type: "update_record", set: { ...set } };
    }
    case "addNote": {
      const { content, title } = s.kind.value;
      if (content.trim() === "") throw fail.invalid(`${at}.add_note.content: must not be empty`);
      if (Buffer.byteLength(content) > MAX_NOTE_CONTENT_BYTES) throw fail.invalid(`${at}.add_note.content: at most ${MAX_NOTE_CONTENT_BYTES / 1024} KiB`);
      checkTitle(title, `${at}.add_note.title`);
      return { type: "add_note", content, title };
    }
    default:
      throw fail.invalid(`${at}: no step kind set (load_record, update_record, add_note or wait)`);
  }
}

export function stepToProto(s: T.StepDoc): MessageInitShape<typeof StepSchema> {
  switch (s.type) {
    case "load_record":
      return { kind: { case: "loadRecord", value: {} } };
    case "wait":
      return { kind: { case: "wait", value: { seconds: s.seconds } } };
    case "update_record":
      return { kind: { case: "updateRecord", value: { set: s.set as JsonObject } } };
    case "add_note":
      return { kind: { case: "addNote", value: { content: s.content, title: s.title } } };
  }
}

/** The webhook; its URL (a credential) only `withUrl`: for those who may copy it (workflowAccess). */
export function webhookToProto(config: Config, w: T.WorkflowDoc, withUrl = true): MessageInitShape<typeof WebhookSchema> {
  const key =
    withUrl && w.webhook.everEnabled ? signWebhookKey(config, { workflowId: w._id, renderingId: w.renderingId, generation: w.webhook.generation }) : "";
  return {
    enabled: w.webhook.enabled,
    url: key ? webhookUrl(config, key) : "",
    rateLimitPerMinute: w.webhook.rateLimitPerMinute,
    generation: w.webhook.generation,
  };
}

/** A version, with its steps when given. */
export const versionToProto = (v: T.WorkflowVersionDoc, steps: T.StepDoc[] = []): MessageInitShape<typeof WorkflowVersionSchema> => ({
  version: v.version,
  active: v.active,
  steps: steps.map(stepToProto),
  publishedAt: timestampFromDate(v.publishedAt),
});

/**
 * The workflow; its webhook's URL only `withUrl` (webhookToProto); each version's steps from
 * `steps` (by version number), none without.
 */
export function workflowToProto(config: Config, w: T.WorkflowDoc, withUrl = true, steps?: Map<number, T.StepDoc[]>): MessageInitShape<typeof WorkflowSchema> {
  return {
    id: w._id,
    renderingId: w.renderingId,
    collectionId: w.collectionId,
    name: w.name,
    triggerRoles: w.triggerRoles,
    versions: w.versions.map((v) => versionToProto(v, steps?.get(v.version))),
    webhook: webhookToProto(config, w, withUrl),
  };
}

export const projectToProto = (p: T.ProjectDoc) => ({ id: p._id, organizationId: p.organizationId, name: p.name, requiresSso: p.requiresSso });
export const environmentToProto = (e: T.EnvironmentDoc) => ({ id: e._id, projectId: e.projectId, name: e.name, dataDatabase: e.dataDatabase });
export const teamToProto = (t: T.TeamDoc) => ({ id: t._id, projectId: t.projectId, name: t.name, memberIds: t.memberIds });
export const renderingToProto = (r: T.RenderingDoc) => ({ id: r._id, projectId: r.projectId, teamId: r.teamId, environmentId: r.environmentId });
export const collectionToProto = (c: T.CollectionDoc) => ({ id: c._id, environmentId: c.environmentId, name: c.name, primaryKey: c.primaryKey });
export const permissionToProto = (p: T.PermissionDoc) => ({
  renderingId: p.renderingId,
  collectionId: p.collectionId,
  readRoles: p.readRoles,
  editRoles: p.editRoles,
  scope: p.scope as JsonObject,
});

type Owner = { _id: string; email: string };

/** A token as AdminService shows it: what every kind has (never its hash), with what its kind adds. */
function tokenToProto<Own extends object>(t: T.TokenDocBase, user: Owner, own: Own) {
  return {
    id: t._id,
    user: { id: user._id, email: user.email },
    name: t.name,
    expiresAt: timestampFromDate(t.expiresAt),
    revokedAt: t.revokedAt ? timestampFromDate(t.revokedAt) : undefined,
    createdAt: timestampFromDate(t.createdAt),
    lastUsedAt: t.lastUsedAt ? timestampFromDate(t.lastUsedAt) : undefined,
    ...own,
  };
}

export const apiTokenToProto = (t: T.ApiTokenDoc, user: Owner) => tokenToProto(t, user, { projectId: t.projectId, sso: t.sso === true });
export const orgApiTokenToProto = (t: T.OrgApiTokenDoc, user: Owner) => tokenToProto(t, user, { organizationId: t.organizationId });
export const appTokenToProto = (t: T.AppTokenDoc, user: Owner) => tokenToProto(t, user, { sso: t.sso });

export function userToProto(u: T.UserDoc) {
  return { id: u._id, organizationId: u.organizationId, email: u.email, name: u.name, organizationAdmin: u.organizationAdmin };
}
