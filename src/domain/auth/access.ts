// Every permission rule, in one place; RPCs, REST and executors all call these.
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { AppTokenDoc, ProjectDoc, RenderingDoc, UserDoc, WorkflowDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import type { Role } from "./roles.js";
import type { AnyPrincipal, ApiPrincipal, AppPrincipal, OrgPrincipal } from "./tokens.js";

/**
 * Why `user` may not act in `rendering`, or null when it may: the user must belong to the
 * project's organization, have a role on the project, and be in the rendering's team
 * (project admins see every rendering).
 */
export async function renderingDenial(
  dir: DirectoryReads,
  user: UserDoc,
  project: ProjectDoc,
  rendering: RenderingDoc,
): Promise<{ reason: string; role: null } | { reason: null; role: Role }> {
  if (user.organizationId !== project.organizationId) return { reason: "the token's user is not in the organization", role: null };
  const [role, team] = await Promise.all([dir.roles.get(project._id, user._id), dir.teams.memberIds(rendering.teamId)]);
  if (!role) return { reason: "the token's user has no role on the project", role: null };
  if (role !== "admin" && !team?.includes(user._id)) return { reason: "the token's user has no access to the rendering", role: null };
  return { reason: null, role };
}

/** Whether a user of `role` may trigger `workflow` (an empty list: every role). */
export function triggerRoleAllows(workflow: Pick<WorkflowDoc, "triggerRoles">, role: Role): boolean {
  return workflow.triggerRoles.length === 0 || workflow.triggerRoles.includes(role);
}

/** Throws PERMISSION_DENIED unless the token's user may trigger the workflow. */
export async function assertMayTrigger(
  dir: DirectoryReads,
  user: UserDoc,
  token: AppTokenDoc,
  project: ProjectDoc,
  rendering: RenderingDoc,
  workflow: WorkflowDoc,
): Promise<Role> {
  const r = await renderingDenial(dir, user, project, rendering);
  if (r.reason !== null) throw fail.denied(r.reason);
  if (!triggerRoleAllows(workflow, r.role)) throw fail.denied(`the role "${r.role}" may not trigger this workflow`);
  assertSsoWhereRequired(project, token);
  return r.role;
}

/**
 * Throws PERMISSION_DENIED when `project` requires SSO and the application token was not
 * generated in an SSO session: every call that touches such a project, whatever the service.
 */
export function assertSsoWhereRequired(project: ProjectDoc, token: AppTokenDoc): void {
  if (project.requiresSso && !token.sso) throw fail.denied("the project requires a token generated in an SSO session");
}

/**
 * Throws PERMISSION_DENIED unless a project API token may still act for its project: when the
 * project requires SSO, the token was generated in an SSO session (so switching requires_sso on
 * stops the tokens made before without one, and switching it off lets them work again); and its
 * creator is still an admin of the project. Every path that accepts API tokens calls this one
 * rule: the logs and notes (apiScope) and runs (run-scope.ts).
 */
export async function assertApiTokenMayAct(dir: DirectoryReads, p: ApiPrincipal): Promise<void> {
  if (p.project.requiresSso && p.token.sso !== true)
    throw fail.denied("the project requires SSO and this API token was not generated in an SSO session: generate a new one while logged in with SSO");
  if ((await dir.roles.get(p.project._id, p.user._id)) !== "admin") throw fail.denied("the token's creator is no longer an admin of the project");
}

/** Throws PERMISSION_DENIED unless an organization API token's creator is still an admin of its organization. */
export function assertOrgApiTokenCreatorIsAdmin(p: OrgPrincipal): void {
  if (!p.user.organizationAdmin || p.user.organizationId !== p.token.organizationId)
    throw fail.denied("the token's creator is no longer an admin of the organization");
}

/** Throws PERMISSION_DENIED for an organization API token, which reads its organization's admin log and nothing else. */
export function assertNotOrgApiToken<P extends AnyPrincipal>(p: P): asserts p is Exclude<P, OrgPrincipal> {
  if (p.kind === "org") throw fail.denied("an organization API token reads only its organization's admin log (GET /v1/organization/admin-logs)");
}

export type DataAccess = "read" | "edit";

/**
 * What a user may see of a collection through a rendering: the scope filter, or the
 * reason it is denied. Data steps call this at the moment they run.
 */
export async function collectionAccess(
  dir: DirectoryReads,
  q: { user: UserDoc; project: ProjectDoc; rendering: RenderingDoc; collectionId: string; need: DataAccess },
): Promise<{ allowed: true; scope: Record<string, unknown> } | { allowed: false; reason: string }> {
  const r = await renderingDenial(dir, q.user, q.project, q.rendering);
  if (r.reason !== null) return { allowed: false, reason: r.reason };
  const perm = await dir.permissions.get(q.rendering._id, q.collectionId);
  if (!perm) return { allowed: false, reason: "the rendering has no permission on the collection" };
  const ok = q.need === "edit" ? perm.editRoles.includes(r.role) : perm.readRoles.includes(r.role) || perm.editRoles.includes(r.role);
  if (!ok) return { allowed: false, reason: `the role "${r.role}" may not ${q.need} records of this collection` };
  return { allowed: true, scope: perm.scope ?? {} };
}

/** Throws PERMISSION_DENIED unless `user` is an organization admin. */
export function assertOrgAdmin(user: UserDoc): void {
  if (!user.organizationAdmin) throw fail.denied("needs an organization admin");
}

/** Throws PERMISSION_DENIED unless the caller's own token comes from an SSO session (`what` names what needs one). */
export function assertSsoSession(token: AppTokenDoc, what: string): void {
  if (!token.sso) throw fail.denied(`${what} needs a token generated in an SSO session`);
}

/** What a call needs on a project: a role at least this one (`user`: any role). */
export type ProjectNeed = Role;

const NEEDED: Record<ProjectNeed, string> = {
  admin: "needs the admin role on the project",
  editor: "needs the editor or admin role on the project",
  user: "needs a role on the project",
};

/**
 * Throws PERMISSION_DENIED unless the caller's user holds at least `need` on `project` (the
 * admin role, for `editor` the editor role too, for `user` any role; organization admins hold
 * everything), and its token was made in an SSO session where the project requires one.
 */
export async function assertProjectRole(dir: DirectoryReads, p: AppPrincipal, project: ProjectDoc, need: ProjectNeed): Promise<void> {
  if (!(await holdsProjectRole(dir, p.user, project, need))) throw fail.denied(NEEDED[need]);
  assertSsoWhereRequired(project, p.token);
}

/** Whether `user` holds at least `need` on `project` (the rule of assertProjectRole). */
export async function holdsProjectRole(dir: DirectoryReads, user: UserDoc, project: ProjectDoc, need: ProjectNeed): Promise<boolean> {
  if (user.organizationAdmin) return true;
  const role = await dir.roles.get(project._id, user._id);
  return role === "admin" || (need !== "admin" && role === "editor") || (need === "user" && role === "user");
}

/**
 * What the caller may do with the workflows of `rendering`: `change` them — editors and admins
 * of the project and organization admins, who also copy the webhook URL (a credential) — or
 * `read` them without the URL: the users who may act in the rendering (renderingDenial).
 * PERMISSION_DENIED for anyone else, and without an SSO token where the project requires one.
 */
export async function workflowAccess(dir: DirectoryReads, p: AppPrincipal, project: ProjectDoc, rendering: RenderingDoc): Promise<"change" | "read"> {
  const access = (await holdsProjectRole(dir, p.user, project, "editor")) ? "change" : "read";
  if (access === "read" && (await renderingDenial(dir, p.user, project, rendering)).reason !== null) throw fail.denied(NEEDED.editor);
  assertSsoWhereRequired(project, p.token);
  return access;
}

/** Throws PERMISSION_DENIED unless `actor` may create application tokens for other users: organization admins only. */
export function assertMayIssueTokensForOthers(actor: UserDoc): void {
  if (!actor.organizationAdmin) throw fail.denied("only organization admins create tokens for other users");
}

/** An SSO token says "made in an SSO session": only such a session makes one, and only for its own user. */
export function assertMayIssueSsoToken(caller: AppPrincipal, ownerId: string): void {
  assertSsoSession(caller.token, "an SSO token");
  if (ownerId !== caller.user._id) throw fail.denied("an SSO token can only be created for oneself");
}

/**
 * When an SSO token made by an SSO session expires: never after the session's own token, or one
 * SSO login could be stretched forever (each token making a longer-lived one) and would never
 * have to be repeated. A fresh login (IssueSsoToken) is what starts a new lifetime. The default
 * lifetime is cut to the session's; a longer one asked for is FAILED_PRECONDITION.
 */
export function ssoTokenExpiry(session: AppTokenDoc, asked: { ms: number; isDefault: boolean }, now: Date): Date {
  const until = session.expiresAt.getTime();
  const wanted = now.getTime() + asked.ms;
  if (wanted <= until) return new Date(wanted);
  if (asked.isDefault) return new Date(until);
  const left = Math.max(0, Math.floor((until - now.getTime()) / 1000));
  throw fail.precondition(
    `ttl_seconds: an SSO token may not outlive the SSO token that makes it, which expires at ${session.expiresAt.toISOString()}: ask for at most ${left} seconds, or 0 for as long as it (log in with SSO again for a longer one)`,
  );
}

/** API tokens of a project that requires SSO are made only in an SSO session. */
export function assertMayIssueApiToken(caller: AppPrincipal, project: ProjectDoc): void {
  if (project.requiresSso) assertSsoSession(caller.token, "an API token of a project that requires SSO");
}

/**
 * Whether `actor` may revoke (and so see) an application token of `owner`: its own, or, for an
 * organization admin, any of the organization's.
 */
export function mayRevokeAppToken(actor: UserDoc, owner: UserDoc): boolean {
  return owner._id === actor._id || (actor.organizationAdmin && owner.organizationId === actor.organizationId);
}
