// Where a public-API call acts: the project API token's project (named in the path) and,
// for environment-scoped groups, one of its environments; or, for the organization's admin
// log, the organization API token's organization.
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { EnvironmentDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import { assertApiTokenMayAct, assertNotOrgApiToken, assertOrgApiTokenCreatorIsAdmin } from "./access.js";
import { authenticateAny, authenticateApi, authenticateOrg, bearer, ORG_API_TOKEN_PREFIX, type ApiPrincipal, type OrgPrincipal } from "./tokens.js";

export interface ApiScope extends ApiPrincipal {
  environment: EnvironmentDoc | null;
}

/** The project API token's principal; a valid organization API token is refused (403), any other token is unauthenticated (401). */
async function projectApiPrincipal(dir: DirectoryReads, authorizationHeader: string | null | undefined): Promise<ApiPrincipal> {
  if (bearer(authorizationHeader)?.startsWith(ORG_API_TOKEN_PREFIX)) assertNotOrgApiToken(await authenticateOrg(dir, authorizationHeader));
  return authenticateApi(dir, authorizationHeader);
}

/**
 * Authenticates the project API token (401), then checks that `projectName` is the
 * token's project (403 otherwise — also for a name that exists nowhere, so a token
 * cannot probe other projects' names), that the token may still act for it (403: its creator
 * is still an admin of it; in a project that requires SSO, it comes from an SSO session), and
 * resolves `environmentName` when given (404 when unknown). An organization API token is
 * refused (403): it reads its organization's admin log only.
 */
export async function apiScope(
  dir: DirectoryReads,
  authorizationHeader: string | null | undefined,
  projectName: string,
  environmentName?: string,
): Promise<ApiScope> {
  const principal = await projectApiPrincipal(dir, authorizationHeader);
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
