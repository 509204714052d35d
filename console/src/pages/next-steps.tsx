// What to do next where there is nothing yet: an environment with no run lists its workflows,
// each with its page (Start run is there) and, for those who see the webhook's URL, the command
// that calls it.
import { admin, allPages } from "../api.js";
import { href } from "../route.js";
import { mayChangeWorkflows, useLoad, useMe } from "../session.js";
import { CopyButton } from "../ui.js";

/** A ready-to-paste webhook call: the reader fills in an application token and a record's id. */
export function WebhookCommand({ url }: { url: string }) {
  const command = `curl -i -X POST '${url}' -H "Authorization: Bearer $APPLICATION_TOKEN" -H 'Content-Type: application/json' -d '{"record_id":"RECORD_ID"}'`;
  return (
    <div class="webhook-command">
      <p class="muted">
        Call it with an application token in <code>$APPLICATION_TOKEN</code> (<a href={href(["account"])}>Account settings</a> makes one) and a record's id for{" "}
        <code>RECORD_ID</code>:
      </p>
      <pre>
        <code>{command}</code>
      </pre>
      <CopyButton text={command} label="Copy command" />
    </div>
  );
}

/** The workflows of an environment, each with its rendering (what links to its page). */
async function workflowsOf(projectId: string, environment: string, signal: AbortSignal) {
  const { environments } = await admin.listEnvironments({ projectId, pageSize: 1000 }, { signal });
  const env = environments.find((e) => e.name === environment);
  if (!env) return [];
  const { renderings } = await admin.listRenderings({ projectId, pageSize: 1000 }, { signal });
  const lists = await Promise.all(
    renderings
      .filter((r) => r.environmentId === env.id)
      .map(async (r) => {
        const workflows = await allPages(
          (pageToken) => admin.listWorkflows({ renderingId: r.id, pageSize: 1000, pageToken }, { signal }),
          (answer) => answer.workflows,
        );
        return workflows.map((workflow) => ({ workflow, renderingId: r.id }));
      }),
  );
  return lists.flat();
}

/** An environment's run search with no run at all: how runs start, and (editors and admins) its workflows with their webhook command. */
export function NoRunsYet({ projectId, environment }: { projectId: string; environment: string }) {
  const editor = mayChangeWorkflows(useMe(), projectId);
  const workflows = useLoad(async (signal) => (editor ? workflowsOf(projectId, environment, signal) : []), [projectId, environment, editor]);
  return (
    <div class="next-steps">
      <p>
        No run matches. There is no run in {environment} yet: runs appear here once a webhook call, an API call or a workflow's page (Start run) starts one.
      </p>
      {workflows.data?.map(({ workflow: w, renderingId }) => (
        <section key={w.id} class="next-workflow">
          <h2>
            <a href={href(["p", projectId, "r", renderingId, "w", w.id])}>{w.name}</a>
          </h2>
          <p>Start a run on a record from its page (Start run){w.webhook?.enabled ? ", or with one webhook call." : "; its webhook is disabled."}</p>
          {w.webhook?.enabled && w.webhook.url && <WebhookCommand url={w.webhook.url} />}
        </section>
      ))}
    </div>
  );
}
