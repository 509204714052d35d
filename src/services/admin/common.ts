// What the AdminService methods share: the caller, the lookups that check the caller's
// access on the way, the admin-log writer and the small validators.
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { AdminService } from "../../../gen/runhook/v1/admin_pb.js";
import { isRole, type Role } from "../../domain/auth/roles.js";
import { assertOperator, authenticateApp, type AppPrincipal } from "../../domain/auth/tokens.js";
import { assertProjectRole, workflowAccess, type ProjectNeed } from "../../domain/auth/access.js";
import type { DirectoryReads } from "../../store/directory-cache.js";
import { isDuplicateKey } from "../../store/index.js";
import type { DirectoryStore } from "../../store/directory.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { authorization, directoryOf } from "../context.js";
import { fail } from "../../domain/errors.js";

export type AdminImpl = ServiceImpl<typeof AdminService>;

export const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

/** The caller: every method but bootstrap needs an application token. */
export function caller(dir: DirectoryReads, ctx: HandlerContext): Promise<AppPrincipal> {
  return authenticateApp(dir, authorization(ctx));
}

/** Throws UNAUTHENTICATED unless the call carries the operator (bootstrap) secret as its bearer token. */
export function requireOperator(deps: Deps, ctx: HandlerContext, method: string): void {
  assertOperator(authorization(ctx), deps.config.bootstrapSecret, method);
}

export function required(value: string, field: string): string {
  if (!value) throw fail.invalid(`${field} is required`);
  return value;
}

/** The roles of `list`, each once, in their first order. */
export function validRoles(list: string[], field: string): Role[] {
  const out: Role[] = [];
  for (const r of list) {
    if (!isRole(r)) throw fail.invalid(`${field}: "${r}" is not a role (admin, editor or user)`);
    if (!out.includes(r)) out.push(r);
  }
  return out;
}

/** Inserts `doc`; a unique index refusing it answers "`what` already exists". */
export async function insertUnique<D extends { _id: string }>(insert: (doc: D) => Promise<void>, doc: D, what: string): Promise<D> {
  try {
    await insert(doc);
    return doc;
  } catch (err) {
    if (isDuplicateKey(err)) throw fail.exists(`${what} already exists`);
    throw err;
  }
}

/** One entry of the admin log, by `actor`, in the organization's stream or the project's. */
export function adminLog(
  deps: Deps,
  actor: T.UserDoc,
  action: string,
  target: string,
  details: Record<string, unknown>,
  scope: { projectId?: string; environment?: string | null } = {},
): Promise<number> {
  return deps.store.logs.appendAdmin({
    organizationId: actor.organizationId,
    projectId: scope.projectId ?? null,
    environment: scope.environment ?? null,
    actor: { id: actor._id, email: actor.email },
    action,
    target,
    details,
  });
}

/**
 * An entry about a user's account or tokens, in the admin log of every project the user has a
 * role on (where /v1 serves it: a SIEM sees who minted a token that later starts runs); a user
 * without a project yet only in the organization's stream.
 */
export async function adminLogAboutUser(
  deps: Deps,
  actor: T.UserDoc,
  subject: T.UserDoc,
  action: string,
  target: string,
  details: Record<string, unknown>,
): Promise<void> {
  const projects = await deps.store.directory.roles.projectsOf(subject._id);
  if (projects.length === 0) {
    await adminLog(deps, actor, action, target, details);
    return;
  }
  await Promise.all(projects.map((projectId) => adminLog(deps, actor, action, target, details, { projectId })));
}

/** The project, when the caller has at least `need` on it (organization admins have everything). */
export async function inProject(dir: DirectoryReads, p: AppPrincipal, projectId: string, need: ProjectNeed): Promise<T.ProjectDoc> {
  const project = await dir.projects.get(required(projectId, "project_id"));
  if (!project || project.organizationId !== p.user.organizationId) throw fail.notFound(`project "${projectId}" not found`);
  await assertProjectRole(dir, p, project, need);
  return project;
}

/**
 * The project of a document the caller asks for (`what`, e.g. `team "…"`), when the caller holds
 * `need` on it. A document of another organization, or of none, is `what` not found, naming
 * nothing of the other organization.
 */
export async function projectOf(dir: DirectoryReads, p: AppPrincipal, projectId: string | undefined, need: ProjectNeed, what: string): Promise<T.ProjectDoc> {
  const project = projectId === undefined ? null : await dir.projects.get(projectId);
  if (!project || project.organizationId !== p.user.organizationId) throw fail.notFound(`${what} not found`);
  await assertProjectRole(dir, p, project, need);
  return project;
}

export async function userInOrg(dir: DirectoryReads, p: AppPrincipal, userId: string): Promise<T.UserDoc> {
  const user = await dir.users.get(required(userId, "user_id"));
  if (!user || user.organizationId !== p.user.organizationId) throw fail.notFound(`user "${userId}" not found`);
  return user;
}

export async function environmentOf(dir: DirectoryStore, p: AppPrincipal, environmentId: string, need: "admin" | "editor") {
  const environment = await dir.environments.get(required(environmentId, "environment_id"));
  if (!environment) throw fail.notFound(`environment "${environmentId}" not found`);
  const project = await inProject(dir, p, environment.projectId, need);
  return { environment, project };
}

export async function teamOf(dir: DirectoryStore, p: AppPrincipal, teamId: string) {
  const team = await dir.teams.get(required(teamId, "team_id"));
  if (!team) throw fail.notFound(`team "${teamId}" not found`);
  return { team, project: await inProject(dir, p, team.projectId, "admin") };
}

/** A rendering and a collection of its environment (`field` prefixes the ids' field names in errors). */
export async function renderingWithCollection(
  dir: DirectoryStore,
  p: AppPrincipal,
  ids: { renderingId: string; collectionId: string },
  need: "admin" | "editor",
  field = "",
) {
  const rendering = await dir.renderings.get(required(ids.renderingId, `${field}rendering_id`));
  if (!rendering) throw fail.notFound(`rendering "${ids.renderingId}" not found`);
  const project = await inProject(dir, p, rendering.projectId, need);
  const collection = await dir.collections.get(required(ids.collectionId, `${field}collection_id`));
  if (!collection || collection.environmentId !== rendering.environmentId)
    throw fail.notFound(`collection "${ids.collectionId}" not found in the rendering's environment`);
  return { rendering, project, collection };
}

/** The workflow, its project (editor needed) and its environment's name (the admin log's scope). */
export async function workflowOf(dir: DirectoryStore, p: AppPrincipal, workflowId: string) {
  const workflow = await dir.workflows.get(required(workflowId, "workflow_id"));
  if (!workflow) throw fail.notFound(`workflow "${workflowId}" not found`);
  const project = await inProject(dir, p, workflow.projectId, "editor");
  const environment = await dir.environments.get(workflow.environmentId);
  return { workflow, project, environment: environment?.name ?? null };
}

/**
 * A call that reads: its caller and its view of the directory (directoryOf), through which
 * every lookup that decides its access goes.
 */
export async function reader(deps: Deps, ctx: HandlerContext): Promise<{ view: DirectoryReads; p: AppPrincipal }> {
  const view = directoryOf(deps, ctx.values);
  return { view, p: await caller(view, ctx) };
}

/** A rendering the caller may read the workflows of, with what it may do with them (workflowAccess). */
export async function renderingForWorkflows(deps: Deps, view: DirectoryReads, p: AppPrincipal, renderingId: string) {
  const rendering = await deps.store.immutable.rendering(required(renderingId, "rendering_id"));
  return workflowsOf(view, p, rendering, `rendering "${renderingId}" not found`);
}

/** A workflow the caller may read, with what it may do with it (workflowAccess). */
export async function workflowForReading(deps: Deps, view: DirectoryReads, p: AppPrincipal, workflowId: string) {
  const workflow = await view.workflows.get(required(workflowId, "workflow_id"));
  const rendering = workflow && (await deps.store.immutable.rendering(workflow.renderingId));
  const { access } = await workflowsOf(view, p, rendering, `workflow "${workflowId}" not found`);
  return { workflow: workflow!, access };
}

/** The rendering's project and the caller's access to its workflows; another organization's (or none) is not found. */
async function workflowsOf(view: DirectoryReads, p: AppPrincipal, rendering: T.RenderingDoc | null, notFound: string) {
  const project = rendering && (await view.projects.get(rendering.projectId));
  if (!rendering || !project || project.organizationId !== p.user.organizationId) throw fail.notFound(notFound);
  return { rendering, project, access: await workflowAccess(view, p, project, rendering) };
}
