// Every mention of something the console has a page for, as a link to that page: a record, a
// workflow, an environment, an admin-log target. Each names what it links to by its name when the
// page knows it (an id only until then, or when the reader may not learn the name).
import type { ComponentChildren } from "preact";
import { admin, allPages, logs } from "../api.js";
import { href } from "../route.js";
import { type Loaded, useLoad, useMe } from "../session.js";

/** A record's page: one (collection, record id) of an environment. */
export const recordPath = (projectId: string, environment: string, collection: string, recordId: string) => [
  "p",
  projectId,
  "env",
  environment,
  "records",
  collection,
  recordId,
];

/** A record as `collection / id`, a link to its page once its environment is known. */
export function RecordLink(props: { projectId: string; environment: string | null | undefined; collection: string; recordId: string }) {
  const { projectId, environment, collection, recordId } = props;
  const text = (
    <>
      {collection} / <code>{recordId}</code>
    </>
  );
  if (!environment) return text;
  return (
    <a class="record-link" href={href(recordPath(projectId, environment, collection, recordId))} title={`The record ${collection} / ${recordId}`}>
      {text}
    </a>
  );
}

/** A workflow by its name (its id's start when the name is unknown), a link to its page. */
export function WorkflowLink(props: { projectId: string; renderingId?: string; workflowId: string; name?: string; children?: ComponentChildren }) {
  const { projectId, renderingId, workflowId, name } = props;
  const label = name || <code>{workflowId.slice(0, 8)}</code>;
  if (!renderingId) return <span title={`Workflow ${workflowId}`}>{label}</span>;
  return (
    <a class="workflow-link" href={href(["p", projectId, "r", renderingId, "w", workflowId])} title={name ? undefined : `Workflow ${workflowId}`}>
      {label}
      {props.children}
    </a>
  );
}

/** A user by name, the e-mail in a tooltip (the console has no page for a user); the e-mail alone when it has no name. */
export function UserName({ user }: { user: { name?: string; email: string } | undefined }) {
  if (!user) return null;
  return user.name ? (
    <span class="user" title={user.email}>
      {user.name}
    </span>
  ) : (
    <span class="user">{user.email}</span>
  );
}

/** What the admin-log page knows about the project's things, by id, to name and link targets. */
export interface ProjectNames {
  projectId: string;
  projectName?: string;
  environments: Map<string, string>;
  renderings: Map<string, { environment?: string; team?: string }>;
  workflows: Map<string, { name: string; renderingId: string }>;
  teams: Map<string, string>;
  apiTokens: Map<string, string>;
  /** The signed-in user's id: their own application tokens are on the account page. */
  me?: string;
}

/** An admin-log target (`<kind>/<id>`) named, and linked to its page where the console has one. */
export function TargetLink({ target, names, subject }: { target: string; names: ProjectNames; subject?: { id: string; name: string; email: string } }) {
  const cut = target.indexOf("/");
  const kind = cut > 0 ? target.slice(0, cut) : "";
  const id = cut > 0 ? target.slice(cut + 1) : "";
  const { projectId } = names;
  const link = (path: string[], label: ComponentChildren) => (
    <a class="target-link" href={href(path)} title={target}>
      {label}
    </a>
  );
  const workflow = names.workflows.get(id);
  const rendering = names.renderings.get(id);
  const environment = names.environments.get(id);
  const apiToken = names.apiTokens.get(id);
  const team = names.teams.get(id);
  if (kind === "workflow" && workflow) return link(["p", projectId, "r", workflow.renderingId, "w", id], `workflow ${workflow.name}`);
  if (kind === "rendering" && rendering)
    return link(["p", projectId, "r", id], `workflows of ${rendering.team ?? "a team"} in ${rendering.environment ?? "an environment"}`);
  if (kind === "environment" && environment) return link(["p", projectId, "env", environment, "runs"], `environment ${environment}`);
  if (kind === "project" && id === projectId) return link(["p", projectId], `project ${names.projectName ?? ""}`.trim());
  if (kind === "api_token" && apiToken !== undefined) return link(["p", projectId, "api-access"], `API token ${apiToken || "(unnamed)"}`);
  if (kind === "token" && subject && subject.id === names.me) return link(["account"], "your application token");
  if (kind === "team" && team) return <span title={target}>team {team}</span>;
  if (kind === "user" && subject?.email) return <span title={target}>user {subject.name || subject.email}</span>;
  return <code>{target}</code>;
}

/**
 * The names of a project's environments, renderings, workflows, teams and API tokens (for its
 * admins, who may list them all: `allowed`), for the admin log's targets.
 */
export function useProjectNames(projectId: string, allowed: boolean): Loaded<ProjectNames | undefined> {
  const me = useMe().who.user?.id;
  return useLoad(
    async (signal): Promise<ProjectNames | undefined> => {
      if (!allowed) return undefined;
      const page = { pageSize: 1000 };
      const [project, environments, renderings, teams, apiTokens] = await Promise.all([
        admin.getProject({ projectId }, { signal }),
        allPages(
          (pageToken) => admin.listEnvironments({ projectId, ...page, pageToken }, { signal }),
          (r) => r.environments,
        ),
        allPages(
          (pageToken) => admin.listRenderings({ projectId, ...page, pageToken }, { signal }),
          (r) => r.renderings,
        ),
        allPages(
          (pageToken) => admin.listTeams({ projectId, ...page, pageToken }, { signal }),
          (r) => r.teams,
        ),
        allPages(
          (pageToken) => admin.listApiTokens({ projectId, ...page, pageToken }, { signal }),
          (r) => r.apiTokens,
        ),
      ]);
      const workflows = await Promise.all(
        renderings.map((r) =>
          allPages(
            (pageToken) => admin.listWorkflows({ renderingId: r.id, ...page, pageToken }, { signal }),
            (x) => x.workflows,
          ),
        ),
      );
      const envName = new Map(environments.map((e) => [e.id, e.name]));
      const teamName = new Map(teams.map((t) => [t.id, t.name]));
      return {
        projectId,
        projectName: project.project?.name,
        environments: envName,
        renderings: new Map(renderings.map((r) => [r.id, { environment: envName.get(r.environmentId), team: teamName.get(r.teamId) }])),
        workflows: new Map(workflows.flat().map((w) => [w.id, { name: w.name, renderingId: w.renderingId }])),
        teams: teamName,
        apiTokens: new Map(apiTokens.map((t) => [t.id, t.name])),
        me,
      };
    },
    [projectId, allowed],
  );
}

/**
 * The runs that wrote notes, by note id: each `note.created` entry a run's step wrote names the
 * note (details.noteId) and the run. Up to the newest 1000 such entries of `where`.
 */
export async function noteRunsOf(
  where: { projectName: string; environmentName: string; collection?: string; recordId?: string },
  signal: AbortSignal,
): Promise<Map<string, string>> {
  const { projectName, environmentName, collection = "", recordId = "" } = where;
  const filter = { collection, recordId, action: "note.created" };
  const res = await logs.listActivityLogs({ projectName, environmentName, filter, options: { limit: 1000, order: "desc" } }, { signal });
  const byNote = new Map<string, string>();
  for (const e of res.activityLogs) {
    const noteId = e.details?.noteId;
    if (e.runId && typeof noteId === "string") byNote.set(noteId, e.runId);
  }
  return byNote;
}
