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
import { apiScope } from "./api-scope.js";

export interface RunListScope {
  project: ProjectDoc;
  environment: EnvironmentDoc;
  /** Set when the caller sees only the runs acting as this user. */
  onlyUserId?: string;
}

/** Authenticates the caller of a run search and says which runs of the environment it sees. */
export async function runListScope(
  dir: DirectoryReads,
  authorizationHeader: string | null | undefined,
  projectName: string,
  environmentName: string,
): Promise<RunListScope> {
  if (!projectName) throw fail.invalid("project name is required");
  if (!environmentName) throw fail.invalid("environment name is required");
  const scope = await apiScope(dir, authorizationHeader, projectName, environmentName, { members: true, applicationTokens: true });
  return { project: scope.project, environment: scope.environment!, ...(scope.standing === "member" ? { onlyUserId: scope.user._id } : {}) };
}

/** The user filter a search runs with: the one asked for, forced to the caller when it sees only its own runs. */
export function runUserFilter(scope: RunListScope, asked: string): string {
  if (!scope.onlyUserId) return asked;
  if (asked && asked !== scope.onlyUserId) throw fail.denied("this token's user sees only the runs it triggered (a project admin sees every run)");
  return scope.onlyUserId;
}
