// Where a public-API call acts: the project API token's project (named in the path) and,
// for environment-scoped groups, one of its environments.
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { EnvironmentDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import { assertApiTokenMayAct } from "./access.js";
import { authenticateApi, type ApiPrincipal } from "./tokens.js";

export interface ApiScope extends ApiPrincipal {
  environment: EnvironmentDoc | null;
}

/**
 * Authenticates the project API token (401), then checks that `projectName` is the
 * token's project (403 otherwise — also for a name that exists nowhere, so a token
 * cannot probe other projects' names), that the token may still act for it (403: its creator
 * is still an admin of it; in a project that requires SSO, it comes from an SSO session), and
 * resolves `environmentName` when given (404 when unknown).
 */
export async function apiScope(
  dir: DirectoryReads,
  authorizationHeader: string | null | undefined,
  projectName: string,
  environmentName?: string,
): Promise<ApiScope> {
  const principal = await authenticateApi(dir, authorizationHeader);
  if (!projectName) throw fail.invalid("project name is required");
  if (projectName !== principal.project.name) throw fail.denied("the token does not belong to this project");
  const needEnv = environmentName !== undefined;
  if (needEnv && !environmentName) throw fail.invalid("environment name is required");
  const [, environment] = await Promise.all([
    assertApiTokenMayAct(dir, principal),
    needEnv ? dir.environments.byName(principal.project._id, environmentName!) : Promise.resolve(null),
  ]);
  if (needEnv && !environment) throw fail.notFound(`unknown environment "${environmentName}"`);
  return { ...principal, environment };
}
