// A workflow: a run started on a record (for whoever may trigger it), its trigger settings (the
// webhook URL with a copy button, on and off, a new URL, the rate limit, the command that calls
// it) and its versions with their steps; with no run yet (admins), what to do next. Editors and admins change the trigger and copy the URL; the users who may act in
// the rendering see its state only (the server gives them no URL).
import { useEffect, useRef, useState } from "preact/hooks";
import type { Webhook, Workflow, WorkflowVersion } from "../../../gen/runhook/v1/admin_pb.js";
import type { Step } from "../../../gen/runhook/v1/common_pb.js";
import { admin, allPages, runs } from "../api.js";
import { href } from "../route.js";
import { isAdmin, mayChangeWorkflows, mayTrigger, useFail, useLoad, useMe } from "../session.js";
import { Confirm, CopyButton, ErrorText, Loading, Section, When } from "../ui.js";
import { Crumbs, NotFound, Page, RefusalText, useProject, useRunStart, useWorkflow } from "./common.js";
import { WebhookCommand } from "./next-steps.js";

interface Props {
  projectId: string;
  renderingId: string;
  workflowId: string;
}

export function WorkflowPage({ projectId, renderingId, workflowId }: Props) {
  const me = useMe();
  const project = useProject(projectId);
  const workflow = useWorkflow(renderingId, workflowId);
  // Admins see the environment's name, and so a link to this workflow's runs.
  const environment = useLoad(
    async (signal) => {
      if (!isAdmin(me, projectId)) return null;
      const { rendering } = await admin.getRendering({ renderingId }, { signal });
      return (await admin.getEnvironment({ environmentId: rendering!.environmentId }, { signal })).environment!.name;
    },
    [projectId, renderingId],
  );
  const projectName = project.data?.name;
  // Admins (who know the environment) learn whether it has run yet: if not, what to do next.
  const hasRuns = useLoad(
    async (signal) => {
      if (!environment.data || !projectName) return null;
      const request = { projectName, environmentName: environment.data, options: { limit: 1 }, filter: { workflowId } };
      return (await runs.listRuns(request, { signal })).runs.length > 0;
    },
    [projectName, environment.data, workflowId],
  );
  if (project.missing) return <NotFound what="project" />;
  if (workflow.missing) return <NotFound what="workflow" />;
  const w = workflow.data;
  return (
    <Page
      title={w ? `Workflow ${w.name}` : "Workflow"}
      crumbs={
        <Crumbs
          project={project.data}
          trail={[
            ["Workflows", href(["p", projectId, "r", renderingId])],
            [w?.name ?? "workflow", null],
          ]}
        />
      }
    >
      <ErrorText error={workflow.error} />
      {!w && !workflow.error && <Loading what="the workflow" />}
      {w && (
        <>
          <p class="muted">
            Who may trigger it: {w.triggerRoles.length ? w.triggerRoles.join(", ") : "every role"}.{" "}
            {environment.data && <a href={href(["p", projectId, "env", environment.data, "runs"], { workflow: w.id })}>Its runs</a>}
          </p>
          {hasRuns.data === false && (
            <p class="next-steps">
              No run of this workflow yet: {mayTrigger(me, projectId, w) && "start one on a record below, or "}call its webhook (the command under Trigger
              settings).
            </p>
          )}
          {mayTrigger(me, projectId, w) && <StartForm workflow={w} />}
          <TriggerSettings workflowId={workflowId} mayChange={mayChangeWorkflows(me, projectId)} />
          <Versions workflowId={workflowId} />
        </>
      )}
    </Page>
  );
}

/** Starts a run of the workflow's latest active version on one record, as the caller (StartRun). */
function StartForm({ workflow }: { workflow: Workflow }) {
  const [recordId, setRecordId] = useState("");
  const { busy, refusal, start: startRun } = useRunStart();
  const active = workflow.versions.filter((v) => v.active).at(-1);
  const start = (e: Event) => {
    e.preventDefault();
    return startRun(() => runs.startRun({ workflowId: workflow.id, recordId: recordId.trim() }));
  };
  return (
    <Section title="Start on a record">
      {active ? (
        <form class="inline start-run" onSubmit={start}>
          <p class="muted">
            Runs version {active.version} on one record of the workflow's collection, as you (the way a webhook call does). The record id is its primary key;
            several key fields are joined by <code>|</code>.
          </p>
          <label>
            Record id
            <input name="recordId" required autocomplete="off" value={recordId} onInput={(e) => setRecordId(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busy}>
            Start run
          </button>
        </form>
      ) : (
        <p class="muted">No version of this workflow is active: publish one to start runs.</p>
      )}
      <RefusalText refusal={refusal} />
    </Section>
  );
}

function TriggerSettings({ workflowId, mayChange }: { workflowId: string; mayChange: boolean }) {
  const fail = useFail();
  const hook = useLoad(async (signal) => (await admin.getWebhook({ workflowId }, { signal })).webhook!, [workflowId]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  // Enable and Disable replace each other: the focus moves to the one now shown.
  const toggle = useRef<HTMLDivElement>(null);
  const toggled = useRef(false);
  useEffect(() => {
    if (toggled.current) toggle.current?.querySelector("button")?.focus();
    toggled.current = false;
  }, [hook.data?.enabled]);
  const change = async (what: string, call: () => Promise<{ webhook?: Webhook }>, refocus = false) => {
    setError(null);
    setNotice(null);
    try {
      const { webhook } = await call();
      toggled.current = refocus;
      if (webhook) hook.set(webhook);
      setNotice(what);
    } catch (err) {
      setError(fail(err));
    }
  };
  const h = hook.data;
  return (
    <Section title="Trigger settings">
      <ErrorText error={hook.error ?? error} />
      {!h && !hook.error && <Loading what="the webhook" />}
      {h && (
        <div class="trigger">
          <p>
            Webhook trigger: <strong class={`webhook-state ${h.enabled ? "on" : "off"}`}>{h.enabled ? "enabled" : "disabled (calls answer 404)"}</strong>
          </p>
          {h.url ? (
            <div class="webhook-url-row">
              <label class="label" for="webhook-url">
                Webhook URL (a credential: share it like a password)
              </label>
              <input id="webhook-url" class="webhook-url" readOnly value={h.url} />
              <CopyButton text={h.url} label="Copy URL" />
            </div>
          ) : (
            <p class="muted">
              {mayChange ? "The webhook has no URL until it is first enabled." : "Only the project's editors and admins may copy the webhook URL."}
            </p>
          )}
          <p>
            Rate limit: <span class="rate-limit">{h.rateLimitPerMinute}</span> requests per minute (beyond: 429 with Retry-After)
          </p>
          {mayChange && (
            <div class="actions">
              <div class="toggle" ref={toggle}>
                {h.enabled ? (
                  <Confirm
                    label="Disable"
                    question="Disable the webhook? Calls answer 404 until it is enabled again; the URL stays the same."
                    confirm="Disable the webhook"
                    danger
                    onConfirm={() => change("The webhook is disabled.", () => admin.disableWebhook({ workflowId }), true)}
                  />
                ) : (
                  <button type="button" class="enable" onClick={() => change("The webhook is enabled.", () => admin.enableWebhook({ workflowId }), true)}>
                    Enable
                  </button>
                )}
              </div>
              <Confirm
                label="Regenerate URL"
                question="Regenerate the webhook URL? The current URL stops working at once (calls to it answer 400): every integration that uses it needs the new one."
                confirm="Regenerate now"
                danger
                onConfirm={() => change("A new URL replaces the old one, which no longer works.", () => admin.regenerateWebhook({ workflowId }))}
              />
              <RateLimitForm
                current={h.rateLimitPerMinute}
                onSave={(n) => change(`The rate limit is ${n} per minute.`, () => admin.setWebhookRateLimit({ workflowId, rateLimitPerMinute: n }))}
              />
            </div>
          )}
          {notice && (
            <p class="notice" role="status">
              {notice}
            </p>
          )}
          {h.enabled && h.url && <WebhookCommand url={h.url} />}
        </div>
      )}
    </Section>
  );
}

function RateLimitForm({ current, onSave }: { current: number; onSave: (n: number) => Promise<void> }) {
  const [value, setValue] = useState(String(current));
  return (
    <form
      class="inline rate-limit-form"
      onSubmit={(e) => {
        e.preventDefault();
        void onSave(Number(value));
      }}
    >
      <label>
        Requests per minute
        <input name="rateLimit" type="number" min={1} max={100000} required value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      </label>
      <button type="submit" class="secondary">
        Set rate limit
      </button>
    </form>
  );
}

function Versions({ workflowId }: { workflowId: string }) {
  const versions = useLoad(
    (signal) =>
      allPages(
        (pageToken) => admin.listWorkflowVersions({ workflowId, pageSize: 1000, pageToken }, { signal }),
        (r) => r.workflowVersions,
      ),
    [workflowId],
  );
  return (
    <Section title="Versions">
      <ErrorText error={versions.error} />
      {!versions.data && !versions.error && <Loading what="the versions" />}
      <p class="muted">A webhook call runs the latest active version.</p>
      <ol class="versions" reversed>
        {[...(versions.data ?? [])].reverse().map((v) => (
          <VersionItem key={v.version} v={v} />
        ))}
      </ol>
    </Section>
  );
}

function VersionItem({ v }: { v: WorkflowVersion }) {
  return (
    <li class={`version ${v.active ? "active" : "inactive"}`} data-version={v.version}>
      <p>
        <strong>Version {v.version}</strong> {v.active ? <span class="state succeeded">active</span> : <span class="state">inactive</span>} published{" "}
        <When at={v.publishedAt} />
      </p>
      <ol class="steps">
        {v.steps.map((s, i) => (
          <li key={i}>{describeStep(s)}</li>
        ))}
      </ol>
    </li>
  );
}

/** A step as a sentence. */
export function describeStep(s: Step): string {
  switch (s.kind.case) {
    case "loadRecord":
      return "Load the record";
    case "updateRecord": {
      const fields = Object.entries(s.kind.value.set ?? {}).map(([k, v]) => `${k} = ${JSON.stringify(v)}`);
      return `Update the record: ${fields.join(", ") || "nothing"}`;
    }
    case "addNote": {
      const { title, content } = s.kind.value;
      return `Add a note${title ? ` "${title}"` : ""}: ${content}`;
    }
    case "wait":
      return `Wait ${s.kind.value.seconds} s`;
    default:
      return "Unknown step";
  }
}
