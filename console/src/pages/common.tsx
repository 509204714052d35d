// What several pages need: the project they are in (its name, for the calls that take names) and
// the trail back to it.
import { ConnectError } from "@connectrpc/connect";
import type { ComponentChildren } from "preact";
import type { Project, Workflow } from "../../../gen/runhook/v1/admin_pb.js";
import type { Run } from "../../../gen/runhook/v1/run_pb.js";
import { admin, allPages, Code, ongoingRunOf } from "../api.js";
import { useState } from "preact/hooks";
import { runIdOf } from "../ids.js";
import { arrive, go, href } from "../route.js";
import { type Loaded, useFail, useLoad } from "../session.js";
import { useTitle } from "../ui.js";

export function useProject(projectId: string): Loaded<Project> {
  return useLoad(async (signal) => (await admin.getProject({ projectId }, { signal })).project!, [projectId]);
}

/** A workflow as its rendering lists it (for its editors and admins, and the members of its team). */
export function useWorkflow(renderingId: string | undefined, workflowId: string | undefined): Loaded<Workflow | null> {
  return useLoad(
    async (signal): Promise<Workflow | null> => {
      if (!renderingId || !workflowId) return null;
      const workflows = await allPages(
        (pageToken) => admin.listWorkflows({ renderingId, pageSize: 1000, pageToken }, { signal }),
        (r) => r.workflows,
      );
      const found = workflows.find((w) => w.id === workflowId);
      if (!found) throw new ConnectError("This workflow is not in this rendering.", Code.NotFound);
      return found;
    },
    [renderingId, workflowId],
  );
}

/** A link to a run's page (`short`: its id's first 8 characters, the whole id in a tooltip). */
/** A run's state, and the first line of its failure when it has one (a list's cell). */
export function RunOutcome({ run }: { run: Pick<Run, "state" | "error"> }) {
  return (
    <>
      <span class={`state ${run.state.toLowerCase()}`}>{run.state}</span>
      {run.error && <span class="run-failure">{run.error.split("\n", 1)[0]}</span>}
    </>
  );
}

export function RunLink({ runId, short = false }: { runId: string; short?: boolean }) {
  return (
    <a href={href(["runs", runId])} class="run-link" title={short ? `Run ${runId}` : undefined}>
      run <code>{short ? runId.slice(0, 8) : runId}</code>
    </a>
  );
}

/** Why a value opens no run: what a run id looks like, and where one comes from (the value itself is not echoed). */
function notARunId(value: string): string {
  const what = value.trim() === "" ? "Nothing to open" : "That is not a run id";
  return `${what}: paste a run's id (a UUID such as 0b6f9d0e-3c1a-4e7b-9f2d-5a8c7b6e4d3f), or the whole answer of the webhook call or API call that started it ({"runId": "…"}).`;
}

/**
 * "Open a run": by its id, or by a start's whole answer pasted (`{"runId": "…"}`, a 202 body);
 * a value that holds neither is explained here, and nothing is asked of the server.
 */
export function OpenRunForm({ initial = "" }: { initial?: string }) {
  const [value, setValue] = useState(initial);
  const [problem, setProblem] = useState<string | null>(null);
  const open = (e: Event) => {
    e.preventDefault();
    const runId = runIdOf(value);
    setProblem(runId ? null : notARunId(value));
    if (runId) go(["runs", runId]);
  };
  return (
    <form class="open-run inline" onSubmit={open}>
      <label>
        Open a run
        <input
          name="runId"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
          placeholder='its id, or {"runId": "…"} as a start answered'
          aria-invalid={problem ? "true" : undefined}
          aria-describedby={problem ? "open-run-problem" : undefined}
        />
      </label>
      <button type="submit">Open</button>
      {problem && (
        <p class="error" role="alert" id="open-run-problem">
          {problem}
        </p>
      )}
    </form>
  );
}

/** Why a run was not started: the server's words, or the run already ongoing on the record. */
export interface Refusal {
  message: string;
  ongoingRunId: string | null;
}

export const refusalOf = (err: unknown, message: string): Refusal => ({ message, ongoingRunId: ongoingRunOf(err) });

/** A refused start, in words on the page: an ongoing run on the record is named and linked. */
export function RefusalText({ refusal }: { refusal: Refusal | null }) {
  if (!refusal) return null;
  return (
    <p class="error" role="alert">
      {refusal.ongoingRunId ? (
        <>
          A run of this workflow is already ongoing on this record: <RunLink runId={refusal.ongoingRunId} />. Wait until it finishes (or cancel it), then start
          again.
        </>
      ) : (
        `Not started: ${refusal.message}`
      )}
    </p>
  );
}

/** The trail above a page: runhook › project › … (each a link but the last). */
export function Crumbs({ project, trail = [] }: { project?: { id: string; name: string }; trail?: [string, string | null][] }) {
  const items: [string, string | null][] = [["Projects", href([])]];
  if (project) items.push([project.name || "project", href(["p", project.id])]);
  items.push(...trail);
  return (
    <nav class="crumbs" aria-label="Breadcrumb">
      {items.map(([label, link], i) => (
        <span key={i}>
          {i > 0 && " › "}
          {link && i < items.length - 1 ? <a href={link}>{label}</a> : <span aria-current={i === items.length - 1 ? "page" : undefined}>{label}</span>}
        </span>
      ))}
    </nav>
  );
}

/** A page: its trail, its heading (a text heading is also the document's title), its content. */
export function Page({ title, children, crumbs }: { title: ComponentChildren; children: ComponentChildren; crumbs?: ComponentChildren }) {
  useTitle(typeof title === "string" ? title : null);
  return (
    <section class="page">
      {crumbs}
      <h1>{title}</h1>
      {children}
    </section>
  );
}

/**
 * What a page shows when what its address names does not exist or is not the reader's (the
 * server answered NotFound or PermissionDenied): the same words either way, and nothing of the
 * address (a typed id is not echoed).
 */
export function NotFound({ what }: { what: string }) {
  useTitle("Not found");
  return (
    <section class="page not-found">
      <Crumbs trail={[["Not found", null]]} />
      <h1>Not found</h1>
      <p class="error" role="alert">
        No such {what} for you: it does not exist, or your account has no access to it. <a href={href([])}>Back to your projects</a>
      </p>
    </section>
  );
}

/** A control that starts a run (StartRun, RetryRun): busy while the call is out, then the new run's page, or the refusal in words. */
export function useRunStart(): { busy: boolean; refusal: Refusal | null; start(call: () => Promise<{ runId: string }>): Promise<void> } {
  const fail = useFail();
  const [busy, setBusy] = useState(false);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const start = async (call: () => Promise<{ runId: string }>) => {
    setBusy(true);
    setRefusal(null);
    try {
      const { runId } = await call();
      arrive(["runs", runId]);
    } catch (err) {
      setRefusal(refusalOf(err, fail(err)));
    } finally {
      setBusy(false);
    }
  };
  return { busy, refusal, start };
}
