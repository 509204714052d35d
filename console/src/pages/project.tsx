// A project: its environments with their runs (every role; a user who is not an admin sees those
// of the workflows it may trigger), logs and notes (admins); its renderings (editors and admins), each leading to its
// workflows; the admin's settings.
import { admin } from "../api.js";
import { href } from "../route.js";
import { isAdmin, mayChangeWorkflows, roleOn, useLoad, useMe } from "../session.js";
import { ErrorText, ListHead, Loading, Section } from "../ui.js";
import { Crumbs, NotFound, Page, useProject } from "./common.js";

export function ProjectPage({ projectId }: { projectId: string }) {
  const me = useMe();
  const project = useProject(projectId);
  const adminHere = isAdmin(me, projectId);
  const editorHere = mayChangeWorkflows(me, projectId);
  const environments = useLoad(async (signal) => (await admin.listEnvironments({ projectId, pageSize: 1000 }, { signal })).environments, [projectId]);
  const teams = useLoad(async (signal) => (adminHere ? (await admin.listTeams({ projectId, pageSize: 1000 }, { signal })).teams : []), [projectId, adminHere]);
  const renderings = useLoad(
    async (signal) => (editorHere ? (await admin.listRenderings({ projectId, pageSize: 1000 }, { signal })).renderings : []),
    [projectId, editorHere],
  );
  if (project.missing) return <NotFound what="project" />;
  const p = project.data;
  const envName = new Map((environments.data ?? []).map((e) => [e.id, e.name]));
  const teamName = new Map((teams.data ?? []).map((t) => [t.id, t.name]));
  return (
    <Page title={p ? `Project ${p.name}` : "Project"} crumbs={<Crumbs project={p} />}>
      <ErrorText error={project.error} />
      <p class="muted">Your role: {roleOn(me, projectId) ?? "none"}</p>
      <Section title="Environments">
        <ErrorText error={environments.error} />
        {!environments.data && !environments.error && <Loading what="the environments" />}
        <table class="list environments">
          <tbody>
            {(environments.data ?? []).map((e) => (
              <tr key={e.id}>
                <th scope="row">{e.name}</th>
                <td>
                  <a href={href(["p", projectId, "env", e.name, "runs"])}>Runs</a>
                </td>
                {adminHere && (
                  <>
                    <td>
                      <a href={href(["p", projectId, "env", e.name, "activity"])}>Activity log</a>
                    </td>
                    <td>
                      <a href={href(["p", projectId, "env", e.name, "notes"])}>Notes</a>
                    </td>
                  </>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      {editorHere && (
        <Section title="Renderings">
          <p class="muted">A rendering is one team's configuration in one environment; its workflows and their webhooks are there.</p>
          <ErrorText error={renderings.error} />
          <table class="list renderings">
            <ListHead columns={["Environment", "Team", "Workflows"]} />
            <tbody>
              {(renderings.data ?? []).map((r) => (
                <tr key={r.id}>
                  <td>{envName.get(r.environmentId) ?? <code>{r.environmentId}</code>}</td>
                  <td>{teamName.get(r.teamId) ?? <code>{r.teamId}</code>}</td>
                  <td>
                    <a href={href(["p", projectId, "r", r.id])}>Workflows</a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      )}
      {adminHere && (
        <Section title="Project settings">
          <ul class="links">
            <li>
              <a href={href(["p", projectId, "api-access"])}>API access</a> — project API tokens for the public API
            </li>
            <li>
              <a href={href(["p", projectId, "admin-log"])}>Admin log</a> — configuration and administrative changes
            </li>
          </ul>
        </Section>
      )}
    </Page>
  );
}
