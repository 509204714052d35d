// Where a public-API call acts: the project (named in the path) of a project API token, or of a
// console session whose user is an admin of it (the console's way in; the run search also takes
// application tokens), and, for environment-scoped groups, one of its environments; or, for the
// organization's admin log, the organization API token's organization.
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { EnvironmentDoc, ProjectDoc, UserDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import { assertApiTokenMayAct, assertNotOrgApiToken, assertOrgApiTokenCreatorIsAdmin, assertSsoWhereRequired } from "./access.js";
import {
  APP_TOKEN_PREFIX,
  authenticateAny,
  authenticateApi,
  authenticateApp,
  authenticateOrg,
  bearer,
  CONSOLE_SESSION_PREFIX,
  ORG_API_TOKEN_PREFIX,
  type ApiPrincipal,
  type AppPrincipal,
  type OrgPrincipal,
} from "./tokens.js";

export interface ApiScope {
  /** Who acts: the API token's creator, or the user of the console session (application token). */
  user: UserDoc;
  project: ProjectDoc;
  environment: EnvironmentDoc | null;
  /**
   * `admin`: a project API token, or a console session (application token) of an admin of the
   * project or of its organization; `member`: one of a user with another role (only where a
   * caller asks for members: the run search, which then shows the runs of the workflows the user may trigger).
   */
  standing: "admin" | "member";
}

/** An application token's scope on the project named `projectName` of its user's organization. */
async function appTokenScope(dir: DirectoryReads, p: AppPrincipal, projectName: string, members: boolean): Promise<Omit<ApiScope, "environment">> {
  const project = await dir.projects.byName(p.user.organizationId, projectName);
  // A project that does not exist is refused as one without a role: no probing of names.
  const role = project ? await dir.roles.get(project._id, p.user._id) : null;
  if (!project || (!role && !p.user.organizationAdmin)) throw fail.denied("the token's user has no role on this project");
  const standing = role === "admin" || p.user.organizationAdmin ? "admin" : "member";
  if (standing === "member" && !members) throw fail.denied("only an admin of the project reads this from the console (or use the project's API token)");
  assertSsoWhereRequired(project, p.token);
  return { user: p.user, project, standing };
}

/** The project API token's principal; a valid organization API token is refused (403), any other token is unauthenticated (401). */
async function projectApiPrincipal(dir: DirectoryReads, authorizationHeader: string | null | undefined): Promise<ApiPrincipal> {
  if (bearer(authorizationHeader)?.startsWith(ORG_API_TOKEN_PREFIX)) assertNotOrgApiToken(await authenticateOrg(dir, authorizationHeader));
  return authenticateApi(dir, authorizationHeader);
}

/** The project API token's scope: `projectName` must be its project, and the token may still act for it. */
async function apiTokenScope(dir: DirectoryReads, p: ApiPrincipal, projectName: string): Promise<Omit<ApiScope, "environment">> {
  if (projectName !== p.project.name) throw fail.denied("the token does not belong to this project");
  await assertApiTokenMayAct(dir, p);
  return { user: p.user, project: p.project, standing: "admin" };
}

/**
 * Authenticates the caller (401), then checks that it may act on the project named
 * `projectName` (403 otherwise — also for a name that exists nowhere, so a token cannot probe
 * other projects' names): a project API token of that project that may still act for it (its
 * creator still an admin; in a project that requires SSO, made in an SSO session), or a console
 * session — with `applicationTokens`, also an application token — of an admin of the project or
 * of its organization (with `members`, of any role: `standing` says which), SSO's rule
 * included; then resolves `environmentName` when given (404 when unknown). Elsewhere an
 * application token is no public-API token (401). An organization API token is refused (403):
 * it reads its organization's admin log only.
 */
export async function apiScope(
  dir: DirectoryReads,
  authorizationHeader: string | null | undefined,
  projectName: string,
  environmentName?: string,
  opts: { members?: boolean; applicationTokens?: boolean } = {},
): Promise<ApiScope> {
  const token = bearer(authorizationHeader);
  const viaApp = token?.startsWith(CONSOLE_SESSION_PREFIX) || (opts.applicationTokens && token?.startsWith(APP_TOKEN_PREFIX));
  const principal = viaApp ? await authenticateApp(dir, authorizationHeader) : await projectApiPrincipal(dir, authorizationHeader);
  if (!projectName) throw fail.invalid("project name is required");
  const needEnv = environmentName !== undefined;
  if (needEnv && !environmentName) throw fail.invalid("environment name is required");
  const scope =
    principal.kind === "app" ? await appTokenScope(dir, principal, projectName, opts.members ?? false) : await apiTokenScope(dir, principal, projectName);
  const environment = needEnv ? await dir.environments.byName(scope.project._id, environmentName!) : null;
  if (needEnv && !environment) throw fail.notFound(`unknown environment "${environmentName}"`);
  return { ...scope, environment };
}

/**
 * Authenticates an organization API token for its organization's admin log: any unknown,
 * expired or revoked token is 401; a valid token of another kind (a project API token, an
 * application token) is 403, as is one whose creator is no longer an organization admin.
 */
export async function organizationApiScope(dir: DirectoryReads, authorizationHeader: string | null | undefined): Promise<OrgPrincipal> {
  const principal = await authenticateAny(dir, authorizationHeader);
  if (principal.kind !== "org") throw fail.denied("the organization's admin log is read with an organization API token");
  assertOrgApiTokenCreatorIsAdmin(principal);
  return principal;
}
