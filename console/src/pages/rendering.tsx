// A rendering's workflows: for editors and admins, and for the users who may act in it (who see
// every webhook without its URL).
import { admin, allPages } from "../api.js";
import { href } from "../route.js";
import { useLoad } from "../session.js";
import { ErrorText, ListHead, Loading } from "../ui.js";
import { Crumbs, NotFound, Page, useProject } from "./common.js";

export function RenderingPage({ projectId, renderingId }: { projectId: string; renderingId: string }) {
  const project = useProject(projectId);
  const workflows = useLoad(
    (signal) =>
      allPages(
        (pageToken) => admin.listWorkflows({ renderingId, pageSize: 1000, pageToken }, { signal }),
        (r) => r.workflows,
      ),
    [renderingId],
  );
  if (project.missing) return <NotFound what="project" />;
  if (workflows.missing) return <NotFound what="rendering" />;
  return (
    <Page title="Workflows" crumbs={<Crumbs project={project.data} trail={[["Workflows", null]]} />}>
      <ErrorText error={workflows.error} />
      {!workflows.data && !workflows.error && <Loading what="the workflows" />}
      {workflows.data?.length === 0 && <p class="muted">This rendering has no workflow yet.</p>}
      {workflows.data && workflows.data.length > 0 && (
        <table class="list workflows">
          <ListHead columns={["Workflow", "Latest active version", "Webhook", "Who may trigger it"]} />
          <tbody>
            {workflows.data.map((w) => {
              const active = w.versions.filter((v) => v.active).at(-1);
              return (
                <tr key={w.id}>
                  <td>
                    <a href={href(["p", projectId, "r", renderingId, "w", w.id])}>{w.name}</a>
                  </td>
                  <td>{active ? `v${active.version}` : <span class="muted">none active</span>}</td>
                  <td>{w.webhook?.enabled ? "enabled" : "disabled"}</td>
                  <td>{w.triggerRoles.length ? w.triggerRoles.join(", ") : "every role"}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </Page>
  );
}
