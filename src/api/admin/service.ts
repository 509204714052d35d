// AdminService: organizations, projects, users, roles, collections, workflows, webhooks, tokens.
import { randomUUID, timingSafeEqual, createHash } from "node:crypto";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { AdminService } from "../../../gen/runhook/v1/admin_pb.js";
import { projectRole, projectRoleId } from "../../domain/auth/access.js";
import { isRole, type Role } from "../../domain/auth/roles.js";
import { API_TOKEN_PREFIX, APP_TOKEN_PREFIX, authenticateApp, bearer, newToken, type AppPrincipal } from "../../domain/auth/tokens.js";
import { isDuplicateKey } from "../../store/index.js";
import type * as T from "../../store/types.js";
import type { AppTokenDoc, UserDoc } from "../../store/types.js";
import { type Deps } from "../../deps.js";
import { authorization } from "../context.js";
import { fail } from "../../errors.js";
import {
  apiTokenToProto,
  collectionToProto,
  environmentToProto,
  isFieldName,
  permissionToProto,
  projectToProto,
  renderingToProto,
  stepsFromProto,
  teamToProto,
  webhookToProto,
  workflowToProto,
} from "./convert.js";

const DAY_MS = 86_400_000;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const PROJECT_NAME = /^[A-Za-z0-9._-]{1,100}$/;
const COLLECTION_NAME = /^[A-Za-z0-9_-]{1,100}$/;
const DATABASE_NAME = /^[A-Za-z0-9_-]{1,63}$/;
const MIN_TTL_S = 60;
const MAX_TTL_S = 31_536_000;
export const DEFAULT_TOKEN_TTL_MS = 90 * DAY_MS;

function sameSecret(given: string, expected: string): boolean {
  // Hash both so the comparison is constant-time whatever the lengths.
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

export function userToProto(u: UserDoc) {
  return { id: u._id, organizationId: u.organizationId, email: u.email, name: u.name, organizationAdmin: u.organizationAdmin };
}

export function appTokenToProto(t: AppTokenDoc, user: UserDoc) {
  return {
    id: t._id,
    user: { id: user._id, email: user.email },
    name: t.name,
    expiresAt: timestampFromDate(t.expiresAt),
    sso: t.sso,
    revokedAt: t.revokedAt ? timestampFromDate(t.revokedAt) : undefined,
    createdAt: timestampFromDate(t.createdAt),
  };
}

/** Stores a new application token for `user`; returns the document and the plaintext (shown once). */
export async function issueAppToken(deps: Deps, user: UserDoc, opts: { name: string; ttlMs: number; sso: boolean }): Promise<{ doc: AppTokenDoc; plaintext: string }> {
  const id = randomUUID();
  const t = newToken(APP_TOKEN_PREFIX, id);
  const now = new Date();
  const doc: AppTokenDoc = { _id: id, hash: t.hash, userId: user._id, name: opts.name, expiresAt: new Date(now.getTime() + opts.ttlMs), revokedAt: null, createdAt: now, sso: opts.sso };
  await deps.db.appTokens.insertOne(doc);
  return { doc, plaintext: t.plaintext };
}

function ttlMs(seconds: number, field = "ttl_seconds"): number {
  if (seconds === 0) return DEFAULT_TOKEN_TTL_MS;
  if (seconds < MIN_TTL_S || seconds > MAX_TTL_S) throw fail.invalid(`${field}: must be 0 (90 days) or ${MIN_TTL_S} to ${MAX_TTL_S} seconds`);
  return seconds * 1000;
}

function label(name: string, def: string): string {
  const n = name.trim() || def;
  if (n.length > 100) throw fail.invalid("name: at most 100 characters");
  return n;
}

function required(value: string, field: string): string {
  if (!value) throw fail.invalid(`${field} is required`);
  return value;
}

function roles(list: string[], field: string): Role[] {
  const out: Role[] = [];
  for (const r of list) {
    if (!isRole(r)) throw fail.invalid(`${field}: "${r}" is not a role (admin, editor or user)`);
    if (!out.includes(r)) out.push(r);
  }
  return out;
}

async function insertUnique<D extends { _id: string }>(coll: { insertOne(doc: never): Promise<unknown> }, doc: D, what: string): Promise<D> {
  try {
    await coll.insertOne(doc as never);
    return doc;
  } catch (err) {
    if (isDuplicateKey(err)) throw fail.exists(`${what} already exists`);
    throw err;
  }
}

export function createAdminService(deps: Deps): ServiceImpl<typeof AdminService> {
  const { db, config } = deps;

  const caller = (ctx: HandlerContext) => authenticateApp(db, authorization(ctx));

  const orgAdmin = (p: AppPrincipal) => {
    if (!p.user.organizationAdmin) throw fail.denied("needs an organization admin");
  };

  /** The project, when the caller has at least `need` on it (organization admins have everything). */
  async function inProject(p: AppPrincipal, projectId: string, need: "admin" | "editor"): Promise<T.ProjectDoc> {
    const project = await db.projects.findOne({ _id: required(projectId, "project_id") });
    if (!project || project.organizationId !== p.user.organizationId) throw fail.notFound(`project "${projectId}" not found`);
    if (p.user.organizationAdmin) return project;
    const role = await projectRole(db, p.user._id, project._id);
    if (role === "admin" || (need === "editor" && role === "editor")) return project;
    throw fail.denied(need === "admin" ? "needs the admin role on the project" : "needs the editor or admin role on the project");
  }

  async function userInOrg(p: AppPrincipal, userId: string): Promise<UserDoc> {
    const user = await db.users.findOne({ _id: required(userId, "user_id") });
    if (!user || user.organizationId !== p.user.organizationId) throw fail.notFound(`user "${userId}" not found`);
    return user;
  }

  async function environmentOf(p: AppPrincipal, environmentId: string, need: "admin" | "editor") {
    const environment = await db.environments.findOne({ _id: required(environmentId, "environment_id") });
    if (!environment) throw fail.notFound(`environment "${environmentId}" not found`);
    const project = await inProject(p, environment.projectId, need);
    return { environment, project };
  }

  async function teamOf(p: AppPrincipal, teamId: string) {
    const team = await db.teams.findOne({ _id: required(teamId, "team_id") });
    if (!team) throw fail.notFound(`team "${teamId}" not found`);
    return { team, project: await inProject(p, team.projectId, "admin") };
  }

  async function workflowOf(p: AppPrincipal, workflowId: string) {
    const workflow = await db.workflows.findOne({ _id: required(workflowId, "workflow_id") });
    if (!workflow) throw fail.notFound(`workflow "${workflowId}" not found`);
    const project = await inProject(p, workflow.projectId, "editor");
    const environment = await db.environments.findOne({ _id: workflow.environmentId });
    return { workflow, project, environment: environment?.name ?? null };
  }

  function log(p: AppPrincipal, action: string, target: string, details: Record<string, unknown>, scope: { projectId?: string; environment?: string | null } = {}) {
    return deps.store.logs.appendAdmin({
      organizationId: p.user.organizationId,
      projectId: scope.projectId ?? null,
      environment: scope.environment ?? null,
      actor: { id: p.user._id, email: p.user.email },
      action,
      target,
      details,
    });
  }

  /** One conditional update of the workflow's webhook; returns the workflow after it. */
  async function updateWebhook(workflowId: string, update: Record<string, unknown>): Promise<T.WorkflowDoc> {
    const after = await db.workflows.findOneAndUpdate({ _id: workflowId }, update, { returnDocument: "after" });
    if (!after) throw fail.notFound(`workflow "${workflowId}" not found`);
    return after;
  }

  const impl: Partial<ServiceImpl<typeof AdminService>> = {};

  impl.bootstrap = async (req, ctx: HandlerContext) => {
    const secret = bearer(authorization(ctx));
    if (!secret || !sameSecret(secret, deps.config.bootstrapSecret)) throw fail.unauthenticated("Bootstrap needs the operator secret as bearer token");
    const orgName = req.organizationName.trim();
    if (!NAME.test(orgName)) throw fail.invalid("organization_name: 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit");
    if (!EMAIL.test(req.adminEmail)) throw fail.invalid("admin_email: not an e-mail address");
    const now = new Date();
    const org = { _id: randomUUID(), name: orgName, createdAt: now };
    try {
      await db.organizations.insertOne(org);
    } catch (err) {
      if (isDuplicateKey(err)) throw fail.exists(`organization "${orgName}" exists`);
      throw err;
    }
    const admin: UserDoc = { _id: randomUUID(), organizationId: org._id, email: req.adminEmail.toLowerCase(), name: req.adminName || req.adminEmail, organizationAdmin: true, createdAt: now };
    try {
      await db.users.insertOne(admin);
    } catch (err) {
      await db.organizations.deleteOne({ _id: org._id });
      if (isDuplicateKey(err)) throw fail.exists(`user "${admin.email}" exists`);
      throw err;
    }
    const token = await issueAppToken(deps, admin, { name: "bootstrap", ttlMs: DEFAULT_TOKEN_TTL_MS, sso: false });
    const actor = { id: admin._id, email: admin.email };
    await deps.store.logs.appendAdmin({ organizationId: org._id, projectId: null, environment: null, actor, action: "organization.created", target: `organization/${org._id}`, details: { name: org.name } });
    await deps.store.logs.appendAdmin({ organizationId: org._id, projectId: null, environment: null, actor, action: "token.created", target: `token/${token.doc._id}`, details: { userId: admin._id, name: "bootstrap" } });
    return { organization: { id: org._id, name: org.name }, admin: userToProto(admin), adminToken: token.plaintext };
  };

  impl.createUser = async (req, ctx) => {
    const p = await caller(ctx);
    orgAdmin(p);
    const email = req.email.trim().toLowerCase();
    if (!EMAIL.test(email)) throw fail.invalid("email: not an e-mail address");
    const name = req.name.trim() || email;
    if (name.length > 200) throw fail.invalid("name: at most 200 characters");
    const user = await insertUnique(db.users, { _id: randomUUID(), organizationId: p.user.organizationId, email, name, organizationAdmin: req.organizationAdmin, createdAt: new Date() }, `user "${email}"`);
    await log(p, "user.created", `user/${user._id}`, { email, organizationAdmin: user.organizationAdmin });
    return { user: userToProto(user) };
  };

  impl.createProject = async (req, ctx) => {
    const p = await caller(ctx);
    orgAdmin(p);
    if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
    const project = await insertUnique(db.projects, { _id: randomUUID(), organizationId: p.user.organizationId, name: req.name, requiresSso: req.requiresSso, createdAt: new Date() }, `project "${req.name}"`);
    await log(p, "project.created", `project/${project._id}`, { name: project.name, requiresSso: project.requiresSso }, { projectId: project._id });
    return { project: projectToProto(project) };
  };

  impl.updateProject = async (req, ctx) => {
    const p = await caller(ctx);
    const project = await inProject(p, req.projectId, "admin");
    if (req.requiresSso === undefined) return { project: projectToProto(project) };
    const after = await db.projects.findOneAndUpdate({ _id: project._id }, { $set: { requiresSso: req.requiresSso } }, { returnDocument: "after" });
    if (!after) throw fail.notFound(`project "${req.projectId}" not found`);
    await log(p, "project.updated", `project/${project._id}`, { requiresSso: req.requiresSso }, { projectId: project._id });
    return { project: projectToProto(after) };
  };

  impl.createEnvironment = async (req, ctx) => {
    const p = await caller(ctx);
    const project = await inProject(p, req.projectId, "admin");
    if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
    const _id = randomUUID();
    const dataDatabase = req.dataDatabase || `${db.name}_d_${_id.replace(/-/g, "").slice(0, 12)}`;
    if (!DATABASE_NAME.test(dataDatabase)) throw fail.invalid("data_database: 1-63 letters, digits, '_' or '-'");
    if (["admin", "local", "config", db.name].includes(dataDatabase)) throw fail.invalid(`data_database: "${dataDatabase}" is reserved`);
    const environment = await insertUnique(db.environments, { _id, projectId: project._id, name: req.name, dataDatabase, createdAt: new Date() }, `environment "${req.name}"`);
    await log(p, "environment.created", `environment/${_id}`, { name: req.name, dataDatabase }, { projectId: project._id, environment: req.name });
    return { environment: environmentToProto(environment) };
  };

  impl.createTeam = async (req, ctx) => {
    const p = await caller(ctx);
    const project = await inProject(p, req.projectId, "admin");
    const name = req.name.trim();
    if (!name || name.length > 100) throw fail.invalid("name: 1 to 100 characters");
    const team = await insertUnique(db.teams, { _id: randomUUID(), projectId: project._id, name, memberIds: [], createdAt: new Date() }, `team "${name}"`);
    await log(p, "team.created", `team/${team._id}`, { name }, { projectId: project._id });
    return { team: teamToProto(team) };
  };

  impl.setTeamMember = async (req, ctx) => {
    const p = await caller(ctx);
    const { team, project } = await teamOf(p, req.teamId);
    const user = await userInOrg(p, req.userId);
    const update = req.member ? { $addToSet: { memberIds: user._id } } : { $pull: { memberIds: user._id } };
    const after = await db.teams.findOneAndUpdate({ _id: team._id }, update, { returnDocument: "after" });
    if (!after) throw fail.notFound(`team "${req.teamId}" not found`);
    await log(p, req.member ? "team.member.added" : "team.member.removed", `team/${team._id}`, { userId: user._id, email: user.email }, { projectId: project._id });
    return { team: teamToProto(after) };
  };

  impl.createRendering = async (req, ctx) => {
    const p = await caller(ctx);
    const { team, project } = await teamOf(p, req.teamId);
    const environment = await db.environments.findOne({ _id: required(req.environmentId, "environment_id") });
    if (!environment || environment.projectId !== project._id) throw fail.notFound(`environment "${req.environmentId}" not found in the team's project`);
    const rendering = await insertUnique(
      db.renderings,
      { _id: randomUUID(), projectId: project._id, teamId: team._id, environmentId: environment._id, createdAt: new Date() },
      `a rendering of team "${team.name}" in environment "${environment.name}"`,
    );
    await log(p, "rendering.created", `rendering/${rendering._id}`, { teamId: team._id, team: team.name, environmentId: environment._id }, { projectId: project._id, environment: environment.name });
    return { rendering: renderingToProto(rendering) };
  };

  impl.setProjectRole = async (req, ctx) => {
    const p = await caller(ctx);
    const project = await inProject(p, req.projectId, "admin");
    const user = await userInOrg(p, req.userId);
    if (req.role === "") {
      await db.projectRoles.deleteOne({ _id: projectRoleId(project._id, user._id) });
    } else {
      if (!isRole(req.role)) throw fail.invalid(`role: "${req.role}" is not admin, editor, user or empty`);
      for (let attempt = 0; ; attempt++) {
        try {
          await db.projectRoles.updateOne({ _id: projectRoleId(project._id, user._id) }, { $set: { role: req.role }, $setOnInsert: { projectId: project._id, userId: user._id } }, { upsert: true });
          break;
        } catch (err) {
          if (!isDuplicateKey(err) || attempt > 2) throw err; // two upserts raced: the loser updates
        }
      }
    }
    await log(p, "project.role.changed", `user/${user._id}`, { email: user.email, role: req.role || null }, { projectId: project._id });
    return {};
  };

  impl.createCollection = async (req, ctx) => {
    const p = await caller(ctx);
    const { environment, project } = await environmentOf(p, req.environmentId, "admin");
    if (!COLLECTION_NAME.test(req.name) || req.name.startsWith("system")) throw fail.invalid("name: 1-100 letters, digits, '_' or '-', not starting with 'system'");
    const primaryKey = req.primaryKey.length ? [...req.primaryKey] : ["id"];
    for (const f of primaryKey) if (!isFieldName(f)) throw fail.invalid(`primary_key: "${f}" is not a valid field name (letters, digits, '_')`);
    if (new Set(primaryKey).size !== primaryKey.length) throw fail.invalid("primary_key: a field is listed twice");
    if (primaryKey.length > 8) throw fail.invalid("primary_key: at most 8 fields");
    const collection = await insertUnique(db.collections, { _id: randomUUID(), environmentId: environment._id, name: req.name, primaryKey, createdAt: new Date() }, `collection "${req.name}"`);
    await log(p, "collection.created", `collection/${collection._id}`, { name: req.name, primaryKey }, { projectId: project._id, environment: environment.name });
    return { collection: collectionToProto(collection) };
  };

  impl.setCollectionPermission = async (req, ctx) => {
    const p = await caller(ctx);
    const perm = req.permission;
    if (!perm) throw fail.invalid("permission is required");
    const rendering = await db.renderings.findOne({ _id: required(perm.renderingId, "permission.rendering_id") });
    if (!rendering) throw fail.notFound(`rendering "${perm.renderingId}" not found`);
    const project = await inProject(p, rendering.projectId, "admin");
    const collection = await db.collections.findOne({ _id: required(perm.collectionId, "permission.collection_id") });
    if (!collection || collection.environmentId !== rendering.environmentId) throw fail.notFound(`collection "${perm.collectionId}" not found in the rendering's environment`);
    const scope: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(perm.scope ?? {})) {
      if (!isFieldName(k)) throw fail.invalid(`permission.scope: "${k}" is not a valid field name (letters, digits, '_')`);
      if (v !== null && typeof v === "object") throw fail.invalid(`permission.scope.${k}: must be a string, number, boolean or null (equality)`);
      scope[k] = v;
    }
    const doc: T.PermissionDoc = {
      _id: `${rendering._id}:${collection._id}`,
      renderingId: rendering._id,
      collectionId: collection._id,
      readRoles: roles(perm.readRoles, "permission.read_roles"),
      editRoles: roles(perm.editRoles, "permission.edit_roles"),
      scope,
    };
    await db.permissions.replaceOne({ _id: doc._id }, doc, { upsert: true }).catch(async (err) => {
      if (!isDuplicateKey(err)) throw err;
      await db.permissions.replaceOne({ _id: doc._id }, doc);
    });
    const environment = await db.environments.findOne({ _id: rendering.environmentId });
    await log(
      p,
      "permissions.changed",
      `permission/${doc._id}`,
      { renderingId: rendering._id, collection: collection.name, readRoles: doc.readRoles, editRoles: doc.editRoles, scope },
      { projectId: project._id, environment: environment?.name ?? null },
    );
    return { permission: permissionToProto(doc) };
  };

  impl.createWorkflow = async (req, ctx) => {
    const p = await caller(ctx);
    const rendering = await db.renderings.findOne({ _id: required(req.renderingId, "rendering_id") });
    if (!rendering) throw fail.notFound(`rendering "${req.renderingId}" not found`);
    const project = await inProject(p, rendering.projectId, "editor");
    const collection = await db.collections.findOne({ _id: required(req.collectionId, "collection_id") });
    if (!collection || collection.environmentId !== rendering.environmentId) throw fail.notFound(`collection "${req.collectionId}" not found in the rendering's environment`);
    const name = req.name.trim();
    if (!name || name.length > 200) throw fail.invalid("name: 1 to 200 characters");
    const steps = stepsFromProto(req.steps, collection.primaryKey);
    const now = new Date();
    const workflow: T.WorkflowDoc = {
      _id: randomUUID(),
      projectId: project._id,
      environmentId: rendering.environmentId,
      renderingId: rendering._id,
      collectionId: collection._id,
      name,
      triggerRoles: roles(req.triggerRoles, "trigger_roles"),
      versions: [{ version: 1, active: true, steps, publishedAt: now }],
      webhook: { enabled: false, generation: 1, rateLimitPerMinute: config.webhookRateLimitPerMinute, everEnabled: false },
      createdAt: now,
    };
    await db.workflows.insertOne(workflow);
    const environment = await db.environments.findOne({ _id: rendering.environmentId });
    const scope = { projectId: project._id, environment: environment?.name ?? null };
    await log(p, "workflow.created", `workflow/${workflow._id}`, { name, renderingId: rendering._id, collection: collection.name, triggerRoles: workflow.triggerRoles }, scope);
    await log(p, "workflow.published", `workflow/${workflow._id}`, { version: 1, steps: steps.map((s) => s.type) }, scope);
    return { workflow: workflowToProto(config, workflow) };
  };

  impl.publishWorkflow = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow, project, environment } = await workflowOf(p, req.workflowId);
    const collection = await db.collections.findOne({ _id: workflow.collectionId });
    const steps = stepsFromProto(req.steps, collection?.primaryKey ?? []);
    const triggerRoles = req.updateTriggerRoles ? roles(req.triggerRoles, "trigger_roles") : undefined;
    let current = workflow;
    for (let attempt = 0; ; attempt++) {
      const n = current.versions.length;
      const version: T.WorkflowVersionDoc = { version: n + 1, active: true, steps, publishedAt: new Date() };
      // Conditional on the version count: two concurrent publishes cannot take one number.
      const after = await db.workflows.findOneAndUpdate(
        { _id: workflow._id, versions: { $size: n } },
        { $push: { versions: version }, ...(triggerRoles ? { $set: { triggerRoles } } : {}) },
        { returnDocument: "after" },
      );
      if (after) {
        await log(p, "workflow.published", `workflow/${workflow._id}`, { version: version.version, steps: steps.map((s) => s.type), ...(triggerRoles ? { triggerRoles } : {}) }, { projectId: project._id, environment });
        return { workflow: workflowToProto(config, after) };
      }
      const again = await db.workflows.findOne({ _id: workflow._id });
      if (!again) throw fail.notFound(`workflow "${req.workflowId}" not found`);
      if (attempt > 5) throw fail.precondition("the workflow is being published concurrently; retry");
      current = again;
    }
  };

  impl.deactivateWorkflowVersion = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow, project, environment } = await workflowOf(p, req.workflowId);
    const idx = workflow.versions.findIndex((v) => v.version === req.version);
    if (idx < 0) throw fail.notFound(`workflow "${req.workflowId}" has no version ${req.version}`);
    const after = await db.workflows.findOneAndUpdate(
      { _id: workflow._id, [`versions.${idx}.version`]: req.version },
      { $set: { [`versions.${idx}.active`]: false } },
      { returnDocument: "after" },
    );
    if (!after) throw fail.notFound(`workflow "${req.workflowId}" not found`);
    if (workflow.versions[idx]!.active) await log(p, "workflow.deactivated", `workflow/${workflow._id}`, { version: req.version }, { projectId: project._id, environment });
    return { workflow: workflowToProto(config, after) };
  };

  impl.getWorkflow = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow } = await workflowOf(p, req.workflowId);
    return { workflow: workflowToProto(config, workflow) };
  };

  impl.enableWebhook = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow, project, environment } = await workflowOf(p, req.workflowId);
    const after = await updateWebhook(workflow._id, { $set: { "webhook.enabled": true, "webhook.everEnabled": true } });
    await log(p, "webhook.enabled", `workflow/${workflow._id}`, { generation: after.webhook.generation, wasEnabled: workflow.webhook.enabled }, { projectId: project._id, environment });
    return { webhook: webhookToProto(config, after) };
  };

  impl.disableWebhook = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow, project, environment } = await workflowOf(p, req.workflowId);
    const after = await updateWebhook(workflow._id, { $set: { "webhook.enabled": false } });
    await log(p, "webhook.disabled", `workflow/${workflow._id}`, { generation: after.webhook.generation, wasEnabled: workflow.webhook.enabled }, { projectId: project._id, environment });
    return { webhook: webhookToProto(config, after) };
  };

  impl.regenerateWebhook = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow, project, environment } = await workflowOf(p, req.workflowId);
    const after = await updateWebhook(workflow._id, { $inc: { "webhook.generation": 1 } });
    await log(p, "webhook.regenerated", `workflow/${workflow._id}`, { generation: after.webhook.generation }, { projectId: project._id, environment });
    return { webhook: webhookToProto(config, after) };
  };

  impl.setWebhookRateLimit = async (req, ctx) => {
    const p = await caller(ctx);
    const { workflow, project, environment } = await workflowOf(p, req.workflowId);
    const limit = req.rateLimitPerMinute;
    if (limit < 1 || limit > 100_000) throw fail.invalid("rate_limit_per_minute: must be 1 to 100000");
    const before = await db.workflows.findOneAndUpdate({ _id: workflow._id }, { $set: { "webhook.rateLimitPerMinute": limit } }, { returnDocument: "before" });
    if (!before) throw fail.notFound(`workflow "${req.workflowId}" not found`);
    await log(p, "webhook.rate_limit.changed", `workflow/${workflow._id}`, { from: before.webhook.rateLimitPerMinute, to: limit }, { projectId: project._id, environment });
    return { webhook: webhookToProto(config, { ...before, webhook: { ...before.webhook, rateLimitPerMinute: limit } }) };
  };

  impl.createApplicationToken = async (req, ctx) => {
    const p = await caller(ctx);
    let owner = p.user;
    if (req.userId && req.userId !== p.user._id) {
      if (!p.user.organizationAdmin) throw fail.denied("only organization admins create tokens for other users");
      owner = await userInOrg(p, req.userId);
    }
    if (req.sso && !p.user.organizationAdmin && !p.token.sso) throw fail.denied("an SSO token can only be created from an SSO session or by an organization admin");
    const name = label(req.name, "token");
    const { doc, plaintext } = await issueAppToken(deps, owner, { name, ttlMs: ttlMs(req.ttlSeconds), sso: req.sso });
    await log(p, "token.created", `token/${doc._id}`, { userId: owner._id, email: owner.email, name, sso: doc.sso, expiresAt: doc.expiresAt.toISOString() });
    return { token: appTokenToProto(doc, owner), plaintext };
  };

  impl.revokeApplicationToken = async (req, ctx) => {
    const p = await caller(ctx);
    const token = await db.appTokens.findOne({ _id: required(req.tokenId, "token_id") });
    const owner = token ? await db.users.findOne({ _id: token.userId }) : null;
    const mine = token?.userId === p.user._id;
    const administered = p.user.organizationAdmin && owner?.organizationId === p.user.organizationId;
    if (!token || !owner || !(mine || administered)) throw fail.notFound(`token "${req.tokenId}" not found`);
    const revokedAt = new Date();
    const res = await db.appTokens.updateOne({ _id: token._id, revokedAt: null }, { $set: { revokedAt } });
    if (res.modifiedCount === 1) await log(p, "token.revoked", `token/${token._id}`, { userId: owner._id, email: owner.email, name: token.name });
    const after = (await db.appTokens.findOne({ _id: token._id })) ?? { ...token, revokedAt };
    return { token: appTokenToProto(after, owner) };
  };

  impl.createApiToken = async (req, ctx) => {
    const p = await caller(ctx);
    const project = await inProject(p, req.projectId, "admin");
    const name = label(req.name, "api token");
    const id = randomUUID();
    const t = newToken(API_TOKEN_PREFIX, id);
    const now = new Date();
    const doc: T.ApiTokenDoc = { _id: id, hash: t.hash, userId: p.user._id, projectId: project._id, name, expiresAt: new Date(now.getTime() + ttlMs(req.ttlSeconds)), revokedAt: null, createdAt: now };
    await db.apiTokens.insertOne(doc);
    await log(p, "api_token.created", `api_token/${doc._id}`, { name, expiresAt: doc.expiresAt.toISOString() }, { projectId: project._id });
    return { token: apiTokenToProto(doc, p.user), plaintext: t.plaintext };
  };

  impl.revokeApiToken = async (req, ctx) => {
    const p = await caller(ctx);
    const token = await db.apiTokens.findOne({ _id: required(req.tokenId, "token_id") });
    if (!token) throw fail.notFound(`API token "${req.tokenId}" not found`);
    const project = await inProject(p, token.projectId, "admin");
    const revokedAt = new Date();
    const res = await db.apiTokens.updateOne({ _id: token._id, revokedAt: null }, { $set: { revokedAt } });
    if (res.modifiedCount === 1) await log(p, "api_token.revoked", `api_token/${token._id}`, { name: token.name }, { projectId: project._id });
    const [after, creator] = await Promise.all([db.apiTokens.findOne({ _id: token._id }), db.users.findOne({ _id: token.userId })]);
    return { token: apiTokenToProto(after ?? { ...token, revokedAt }, creator ?? { _id: token.userId, email: "" }) };
  };

  return impl as ServiceImpl<typeof AdminService>;
}
