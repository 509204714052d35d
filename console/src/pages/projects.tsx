// The first page: the projects the user has a role on (an organization admin: all of them), and
// a run opened by its id (or by the answer that started it, pasted).
import { admin } from "../api.js";
import { href } from "../route.js";
import { roleOn, useLoad, useMe } from "../session.js";
import { ErrorText, ListHead, Loading } from "../ui.js";
import { OpenRunForm, Page } from "./common.js";

export function ProjectsPage() {
  const me = useMe();
  const projects = useLoad(async (signal) => (await admin.listProjects({ pageSize: 1000 }, { signal })).projects, []);
  return (
    <Page title="Projects">
      <ErrorText error={projects.error} />
      {!projects.data && !projects.error && <Loading what="the projects" />}
      {projects.data?.length === 0 && <p class="muted">You have no role on any project yet: an admin of your organization gives you one.</p>}
      {projects.data && projects.data.length > 0 && (
        <table class="list projects">
          <ListHead columns={["Project", "Your role", "SSO"]} />
          <tbody>
            {projects.data.map((p) => (
              <tr key={p.id}>
                <td>
                  <a href={href(["p", p.id])}>{p.name}</a>
                </td>
                <td>{roleOn(me, p.id) ?? "–"}</td>
                <td>{p.requiresSso ? "required" : "no"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <OpenRunForm />
    </Page>
  );
}
