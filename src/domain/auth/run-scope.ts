// Who sees a run: the one rule of GetRun, WatchRun, CancelRun and the run search (ListRuns),
// for REST, every gRPC protocol and the console alike:
//   - a project API token of the run's project that may still act for it (assertApiTokenMayAct):
//     every run of the project;
//   - an application token of an admin of the project, or of its organization: every run;
//   - an application token of a user with another role (editor, user): the runs of the
//     workflows that user may trigger (in the rendering's team, a trigger role that allows the
//     role), whoever started them; a run of a workflow since deleted, none;
//   - in a project that requires SSO, only tokens made in an SSO session;
//   - anyone else: PERMISSION_DENIED. For the search, a project name that does not exist is
//     403 too (no probing), an unknown environment 404, an organization API token 403.
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { EnvironmentDoc, ProjectDoc, RenderingDoc, RunDoc, UserDoc, WorkflowDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import { assertApiTokenMayAct, assertMayTrigger, assertSsoWhereRequired, holdsProjectRole, triggerRoleAllows } from "./access.js";
import { apiScope } from "./api-scope.js";
import type { Role } from "./roles.js";
import type { ApiPrincipal, AppPrincipal } from "./tokens.js";

/** Whether `user` sees every run of `project`: an admin of it, or of its organization. */
async function seesEveryRun(dir: DirectoryReads, user: UserDoc, project: ProjectDoc): Promise<boolean> {
  return user.organizationId === project.organizationId && (await holdsProjectRole(dir, user, project, "admin"));
}

/** Throws PERMISSION_DENIED unless the principal sees the run (the rule above). */
export async function assertMaySeeRun(dir: DirectoryReads, p: AppPrincipal | ApiPrincipal, run: RunDoc): Promise<void> {
  if (p.kind === "api") {
    if (p.project._id !== run.projectId) throw fail.denied("the API token belongs to another project");
    await assertApiTokenMayAct(dir, p);
    return;
  }
  const [project, rendering, workflow] = await Promise.all([
    dir.projects.get(run.projectId),
    dir.renderings.get(run.renderingId),
    dir.workflows.get(run.workflowId),
  ]);
  if (!project || project.organizationId !== p.user.organizationId) throw fail.denied("the token's user is not in the organization");
  if (await seesEveryRun(dir, p.user, project)) {
    assertSsoWhereRequired(project, p.token);
    return;
  }
  if (!rendering || !workflow) throw fail.denied("the run's workflow no longer exists: only the project's admins see its runs");
  await assertMayTrigger(dir, p.user, p.token, project, rendering, workflow);
}

/** The lists a member's workflows are read from (the store's directory). */
export interface WorkflowLists {
  renderings: { ofEnvironment(environmentId: string, after: string | undefined, limit: number): Promise<RenderingDoc[]> };
  workflows: {
    ofRendering(renderingId: string, after: string | undefined, limit: number): Promise<Pick<WorkflowDoc, "_id" | "triggerRoles">[]>;
    idsNamed(renderingId: string, name: string, limit: number): Promise<string[]>;
  };
}

const LIST_BATCH = 100;

/** Every document of a list read a page at a time by id. */
async function everyPage<D extends { _id: string }>(page: (after: string | undefined) => Promise<D[]>): Promise<D[]> {
  const out: D[] = [];
  for (let after: string | undefined; ; ) {
    const docs = await page(after);
    out.push(...docs);
    if (docs.length < LIST_BATCH) return out;
    after = docs[docs.length - 1]!._id;
  }
}

/** The workflows of `environment` whose runs `user` (of `role`, not an admin) sees: those it may trigger. */
async function workflowsSeen(dir: DirectoryReads, lists: WorkflowLists, user: UserDoc, role: Role, environment: EnvironmentDoc): Promise<string[]> {
  const renderings = await everyPage((after) => lists.renderings.ofEnvironment(environment._id, after, LIST_BATCH));
  const ids: string[] = [];
  for (const rendering of renderings) {
    if (!(await dir.teams.memberIds(rendering.teamId))?.includes(user._id)) continue;
    const workflows = await everyPage((after) => lists.workflows.ofRendering(rendering._id, after, LIST_BATCH));
    for (const w of workflows) if (triggerRoleAllows(w, role)) ids.push(w._id);
  }
  return ids.sort();
}

/** The most workflows one name selects in one rendering (names are not unique there, but nearly). */
const MAX_NAMESAKES = 100;

/**
 * The workflows of the environment with exactly this name (as stored: trimmed) whose runs the
 * caller sees (`seen`: undefined for every one). None is INVALID_ARGUMENT in words, the same
 * whether no workflow has the name or the caller sees none that has: a filter that cannot match
 * says so rather than finding no run.
 */
export async function workflowsNamed(lists: WorkflowLists, environmentId: string, name: string, seen: string[] | undefined): Promise<string[]> {
  const wanted = name.trim();
  const renderings = wanted ? await everyPage((after) => lists.renderings.ofEnvironment(environmentId, after, LIST_BATCH)) : [];
  const named = (await Promise.all(renderings.map((r) => lists.workflows.idsNamed(r._id, wanted, MAX_NAMESAKES)))).flat();
  const ids = named.filter((id) => !seen || seen.includes(id)).sort();
  if (ids.length === 0) throw fail.invalid(`no workflow of this environment whose runs you see is named "${wanted}"`);
  return ids;
}

export interface RunListScope {
  project: ProjectDoc;
  environment: EnvironmentDoc;
  /** Set when the caller sees only the runs of these workflows (a user who is no admin). */
  workflowIds?: string[];
}

/** Authenticates the caller of a run search and says which runs of the environment it sees. */
export async function runListScope(
  dir: DirectoryReads,
  lists: WorkflowLists,
  authorizationHeader: string | null | undefined,
  projectName: string,
  environmentName: string,
): Promise<RunListScope> {
  if (!projectName) throw fail.invalid("project name is required");
  if (!environmentName) throw fail.invalid("environment name is required");
  const scope = await apiScope(dir, authorizationHeader, projectName, environmentName, { members: true, applicationTokens: true });
  const environment = scope.environment!;
  if (scope.standing === "admin") return { project: scope.project, environment };
  const role = (await dir.roles.get(scope.project._id, scope.user._id))!;
  return { project: scope.project, environment, workflowIds: await workflowsSeen(dir, lists, scope.user, role, environment) };
}
