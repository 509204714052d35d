// Who may search the runs of an environment, and which of them they see. The one rule of the
// run search, for REST and every gRPC protocol alike:
//   - a project API token of the project (apiScope: its creator still an admin…): every run;
//   - an application token of a project admin, or of an organization admin: every run;
//   - an application token of a user with another role (editor, user): only the runs that act as
//     that user (the ones it triggered); asking for another user's runs is PERMISSION_DENIED;
//   - a user without a role, of another organization, or an organization API token: 403, and a
//     project name that does not exist is 403 too (no probing); an unknown environment 404;
//   - in a project that requires SSO, an application token made outside an SSO session: 403.
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { EnvironmentDoc, ProjectDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import { assertNotOrgApiToken } from "./access.js";
import { apiScope } from "./api-scope.js";
import { authenticateAny, type AppPrincipal } from "./tokens.js";

export interface RunListScope {
  project: ProjectDoc;
  environment: EnvironmentDoc;
  /** Set when the caller sees only the runs acting as this user. */
  onlyUserId?: string;
}

/** A project of an organization by name (not among the cached directory reads). */
export type ProjectByName = (organizationId: string, name: string) => Promise<ProjectDoc | null>;

async function appTokenScope(dir: DirectoryReads, p: AppPrincipal, byName: ProjectByName, projectName: string, environmentName: string): Promise<RunListScope> {
  const project = await byName(p.user.organizationId, projectName);
  if (!project) throw fail.denied("the token's user has no role on this project");
  const role = await dir.roles.get(project._id, p.user._id);
  if (!role && !p.user.organizationAdmin) throw fail.denied("the token's user has no role on this project");
  if (project.requiresSso && !p.token.sso) throw fail.denied("the project requires a token generated in an SSO session");
  const environment = await dir.environments.byName(project._id, environmentName);
  if (!environment) throw fail.notFound(`unknown environment "${environmentName}"`);
  const seesAll = role === "admin" || p.user.organizationAdmin;
  return { project, environment, ...(seesAll ? {} : { onlyUserId: p.user._id }) };
}

/** Authenticates the caller of a run search and says which runs of the environment it sees. */
export async function runListScope(
  dir: DirectoryReads,
  byName: ProjectByName,
  authorizationHeader: string | null | undefined,
  projectName: string,
  environmentName: string,
): Promise<RunListScope> {
  if (!projectName) throw fail.invalid("project name is required");
  if (!environmentName) throw fail.invalid("environment name is required");
  const principal = await authenticateAny(dir, authorizationHeader);
  assertNotOrgApiToken(principal);
  if (principal.kind === "app") return appTokenScope(dir, principal, byName, projectName, environmentName);
  const scope = await apiScope(dir, authorizationHeader, projectName, environmentName);
  return { project: scope.project, environment: scope.environment! };
}

/** The user filter a search runs with: the one asked for, forced to the caller when it sees only its own runs. */
export function runUserFilter(scope: RunListScope, asked: string): string {
  if (!scope.onlyUserId) return asked;
  if (asked && asked !== scope.onlyUserId) throw fail.denied("this token's user sees only the runs it triggered (a project admin sees every run)");
  return scope.onlyUserId;
}
