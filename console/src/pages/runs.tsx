// The run search of an environment (ListRuns): its filters in the route's query (a workflow by
// its name, picked from the environment's workflows where the caller may list them, or by its
// id; a record id alone), newest first, each row a link to its run that names its workflow and
// why it failed; "more" pages, and live: the first page is asked again every 2 s while the page
// is visible (and at once when it becomes visible), new runs on top and changed ones updated in
// place. Admins see every run of the environment, others the runs of the workflows they may
// trigger. Rows are selected with checkboxes; the selected runs, or every run the filters match,
// are retried or cancelled in a batch (run-batch.tsx): an admin's on any run, anyone else's on
// their own.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { RefObject } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListRunsRequestSchema, Run } from "../../../gen/runhook/v1/run_pb.js";
import { admin, allPages, runs } from "../api.js";
import { go, href, useRoute } from "../route.js";
import { isAdmin, type Me, mayChangeWorkflows, roleOn, useFail, useLoad, useMe } from "../session.js";
import { dateOf, duration } from "../time.js";
import { ErrorText, Field, FilterForm, ListHead, Loading, More, When } from "../ui.js";
import { isUuid } from "../ids.js";
import { Crumbs, NotFound, Page, RunOutcome, useProject } from "./common.js";
import { NoRunsYet } from "./next-steps.js";
import { RecordLink, UserName, WorkflowLink } from "./links.js";
import { type BatchAction, BatchPanel, type BatchPlan } from "./run-batch.js";

const STATES = ["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"];
const PAGE = 50;
const POLL_MS = 2000;

interface Filters {
  workflow: string;
  collection: string;
  record: string;
  states: string[];
  via: string;
  from: string;
  to: string;
}

function filtersOf(q: URLSearchParams): Filters {
  const get = (k: string) => q.get(k) ?? "";
  return {
    workflow: get("workflow"),
    collection: get("collection"),
    record: get("record"),
    states: q.getAll("state"),
    via: get("via"),
    from: get("from"),
    to: get("to"),
  };
}

/** datetime-local's value (the reader's time zone) as a Timestamp; unset when empty. */
const at = (local: string) => (local ? timestampFromDate(new Date(local)) : undefined);

/** The workflow filter: a full id is the workflow's id, anything else a name (the server says when it names none). */
const workflowFilter = (workflow: string) => (isUuid(workflow) ? { workflowId: workflow } : { workflowName: workflow });

const runFilter = (f: Filters) => ({ ...workflowFilter(f.workflow), collection: f.collection, recordId: f.record, states: f.states, via: f.via });

function request(project: string, environment: string, f: Filters, cursor: string): MessageInitShape<typeof ListRunsRequestSchema> {
  return {
    projectName: project,
    environmentName: environment,
    options: { limit: PAGE, cursor, order: "desc", fromTime: at(f.from), toTime: at(f.to) },
    filter: runFilter(f),
  };
}

/** A batch on the selected runs (`runIds`), or on every run the filters match (null). */
function batchPlan(project: string, environment: string, f: Filters, action: BatchAction, runIds: string[] | null, fromFailedStep: boolean): BatchPlan {
  const all = runIds === null;
  return {
    action,
    what: all ? "every run that matches the filters" : `the ${runIds.length === 1 ? "selected run" : `${runIds.length} selected runs`}`,
    request: (dryRun) => ({
      projectName: project,
      environmentName: environment,
      action,
      dryRun,
      fromFailedStep: action === "retry" && fromFailedStep,
      runIds: runIds ?? [],
      filter: all ? runFilter(f) : {},
      createdFrom: all ? at(f.from) : undefined,
      createdTo: all ? at(f.to) : undefined,
    }),
  };
}

interface WorkflowChoice {
  id: string;
  name: string;
}

/**
 * The workflows of the environment, for the workflow picker: listed for the project's editors
 * and admins (ListRenderings, ListWorkflows); null for anyone else, who types a name or an id.
 */
function useEnvironmentWorkflows(projectId: string, environment: string, allowed: boolean) {
  return useLoad(
    async (signal): Promise<WorkflowChoice[] | null> => {
      if (!allowed) return null;
      const page = { pageSize: 1000 };
      const environments = await allPages(
        (pageToken) => admin.listEnvironments({ projectId, ...page, pageToken }, { signal }),
        (r) => r.environments,
      );
      const environmentId = environments.find((e) => e.name === environment)?.id;
      if (!environmentId) return null;
      const renderings = await allPages(
        (pageToken) => admin.listRenderings({ projectId, environmentId, ...page, pageToken }, { signal }),
        (r) => r.renderings,
      );
      const lists = await Promise.all(
        renderings.map((r) =>
          allPages(
            (pageToken) => admin.listWorkflows({ renderingId: r.id, ...page, pageToken }, { signal }),
            (x) => x.workflows,
          ),
        ),
      );
      return lists
        .flat()
        .map((w) => ({ id: w.id, name: w.name }))
        .sort((a, b) => a.name.localeCompare(b.name));
    },
    [projectId, environment, allowed],
  );
}

/** Merges a fresh first page into what is shown: new runs on top, changed ones replaced in place. */
function merge(shown: Run[], fresh: Run[]): Run[] {
  const byId = new Map(fresh.map((r) => [r.id, r]));
  const known = new Set(shown.map((r) => r.id));
  return [...fresh.filter((r) => !known.has(r.id)), ...shown.map((r) => byId.get(r.id) ?? r)];
}

export function RunsPage({ projectId, environment }: { projectId: string; environment: string }) {
  const fail = useFail();
  const me = useMe();
  const project = useProject(projectId);
  const route = useRoute();
  const query = route.query.toString();
  const filters = filtersOf(route.query);
  const name = project.data?.name;
  const [shown, setShown] = useState<Run[] | null>(null);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const workflows = useEnvironmentWorkflows(projectId, environment, mayChangeWorkflows(me, projectId));
  const latest = useRef({ shown, filters });
  latest.current = { shown, filters };

  useEffect(() => {
    if (!name) return;
    let stopped = false;
    const first = async (initial: boolean) => {
      try {
        const res = await runs.listRuns(request(name, environment, latest.current.filters, ""));
        if (stopped) return;
        setError(null);
        if (initial) {
          setShown(res.runs);
          setCursor(res.nextCursor);
        } else setShown((s) => merge(s ?? [], res.runs));
      } catch (err) {
        if (stopped) return;
        setError(fail(err));
        // A refused search (a bad filter, access gone) is not asked again every two seconds.
        if (ConnectError.from(err).code !== Code.Unavailable) stopPolling();
      }
    };
    const stopPolling = () => {
      clearInterval(timer);
      document.removeEventListener("visibilitychange", poll);
    };
    setShown(null);
    void first(true);
    const poll = () => document.visibilityState === "visible" && void first(false);
    const timer = setInterval(poll, POLL_MS);
    document.addEventListener("visibilitychange", poll);
    return () => {
      stopped = true;
      stopPolling();
    };
  }, [name, environment, query]);

  const more = async () => {
    if (!name || !cursor) return;
    setBusy(true);
    try {
      const res = await runs.listRuns(request(name, environment, filters, cursor));
      setShown((s) => [...(s ?? []), ...res.runs.filter((r) => !s?.some((x) => x.id === r.id))]);
      setCursor(res.nextCursor);
    } catch (err) {
      setError(fail(err));
    } finally {
      setBusy(false);
    }
  };

  if (project.missing) return <NotFound what="project" />;
  return (
    <Page title={`Runs in ${environment}`} crumbs={<Crumbs project={project.data} trail={[[`${environment}: runs`, null]]} />}>
      <ErrorText error={project.error} />
      <RunFilters
        key={query}
        initial={filters}
        workflows={workflows.data ?? null}
        onApply={({ states, ...rest }) => go(["p", projectId, "env", environment, "runs"], { ...rest, state: states })}
      />
      <ErrorText error={error} />
      {shown === null && !error && <Loading what="the runs" />}
      {shown?.length === 0 && !query && <NoRunsYet projectId={projectId} environment={environment} />}
      {shown?.length === 0 && query && (
        <p class="muted">
          No run matches. Change the filters above, or <a href={href(["p", projectId, "env", environment, "runs"])}>show every run</a>.
        </p>
      )}
      {shown && shown.length > 0 && name && (
        <RunList
          key={query}
          runs={shown}
          environment={environment}
          mayAct={roleOn(me, projectId) !== null}
          admin={isAdmin(me, projectId)}
          plan={(action, runIds, fromFailed) => batchPlan(name, environment, filters, action, runIds, fromFailed)}
        />
      )}
      <More show={!!cursor} onMore={more} busy={busy} />
    </Page>
  );
}

/** Whether the caller may put `run` in a batch: an admin any run, anyone else the runs they started. */
const selectable = (me: Me, admin: boolean, run: Run) => admin || run.user?.id === me.who.user?.id;

interface RunListProps {
  runs: Run[];
  environment: string;
  /** The caller has a role on the project: the selection and the batch actions show. */
  mayAct: boolean;
  admin: boolean;
  plan: (action: BatchAction, runIds: string[] | null, fromFailedStep: boolean) => BatchPlan;
}

/** The runs shown, with their selection and the batch actions (and the batch under way). */
function RunList({ runs: list, environment, mayAct, admin, plan: planOf }: RunListProps) {
  const me = useMe();
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const [plan, setPlan] = useState<BatchPlan | null>(null);
  const opener = useRef<HTMLElement | null>(null);
  const open = (action: BatchAction, runIds: string[] | null, fromFailedStep: boolean) => {
    opener.current = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    setPlan(planOf(action, runIds, fromFailedStep));
  };
  const toolbar = useRef<HTMLDivElement>(null);
  const close = () => {
    setPlan(null);
    setSelected(new Set());
    // The focus was in the panel, now gone: back to the button that opened it, or (a button for
    // the selection, disabled now that nothing is selected) to "Select all on this page".
    setTimeout(() => {
      const back = opener.current;
      const usable = back?.isConnected && !(back instanceof HTMLButtonElement && back.disabled);
      (usable ? back : toolbar.current?.querySelector<HTMLElement>("input[name=selectAll]"))?.focus();
    });
  };
  const canSelect = (r: Run) => mayAct && selectable(me, admin, r);
  return (
    <>
      {mayAct && (
        <BatchToolbar box={toolbar} runs={list.filter(canSelect)} selected={selected} onSelect={setSelected} admin={admin} busy={plan !== null} onAct={open} />
      )}
      {plan && <BatchPanel plan={plan} onClose={close} />}
      <RunTable runs={list} environment={environment} selection={mayAct ? { selected, canSelect, onSelect: setSelected } : null} />
    </>
  );
}

function BatchToolbar(props: {
  box: RefObject<HTMLDivElement | null>;
  runs: Run[];
  selected: ReadonlySet<string>;
  onSelect: (s: ReadonlySet<string>) => void;
  admin: boolean;
  busy: boolean;
  onAct: (action: BatchAction, runIds: string[] | null, fromFailedStep: boolean) => void;
}) {
  const { runs: selectableRuns, selected, busy } = props;
  const [fromFailedStep, setFromFailedStep] = useState(false);
  const ids = selectableRuns.map((r) => r.id).filter((id) => selected.has(id));
  const all = selectableRuns.length > 0 && ids.length === selectableRuns.length;
  const act = (action: BatchAction, picked: boolean) => props.onAct(action, picked ? ids : null, fromFailedStep);
  return (
    <div class="batch-toolbar" ref={props.box}>
      <label class="check">
        <input
          type="checkbox"
          name="selectAll"
          checked={all}
          indeterminate={ids.length > 0 && !all}
          disabled={selectableRuns.length === 0}
          onChange={(e) => props.onSelect(new Set(e.currentTarget.checked ? selectableRuns.map((r) => r.id) : []))}
        />
        Select all on this page
      </label>
      <span class="muted" role="status">
        {ids.length === 0 ? "No run selected" : `${ids.length} selected`}
      </span>
      <div class="actions">
        <button type="button" disabled={busy || ids.length === 0} onClick={() => act("retry", true)}>
          Retry the selected
        </button>
        <button type="button" class="secondary" disabled={busy || ids.length === 0} onClick={() => act("cancel", true)}>
          Cancel the selected
        </button>
        <button type="button" class="secondary" disabled={busy} onClick={() => act("retry", false)}>
          Retry all that match
        </button>
        <button type="button" class="secondary" disabled={busy} onClick={() => act("cancel", false)}>
          Cancel all that match
        </button>
        <label class="check">
          <input type="checkbox" name="fromFailedStep" checked={fromFailedStep} onChange={(e) => setFromFailedStep(e.currentTarget.checked)} />
          Retries start from the failed step
        </label>
      </div>
      {!props.admin && <p class="muted">Batches act on the runs you started; retries run as you.</p>}
    </div>
  );
}

interface Selection {
  selected: ReadonlySet<string>;
  canSelect: (r: Run) => boolean;
  onSelect: (s: ReadonlySet<string>) => void;
}

function RunTable({ runs: list, environment, selection }: { runs: Run[]; environment: string; selection: Selection | null }) {
  const toggle = (id: string, on: boolean) => {
    if (!selection) return;
    const next = new Set(selection.selected);
    if (on) next.add(id);
    else next.delete(id);
    selection.onSelect(next);
  };
  return (
    <table class={`list runs${selection ? " selectable" : ""}`}>
      <ListHead columns={[!!selection && "Select", "Created", "State", "Record", "Workflow", "As, via", "Took"]} />
      <tbody>
        {list.map((r) => {
          const start = dateOf(r.createdAt);
          const end = dateOf(r.finishedAt);
          return (
            <tr key={r.id} data-run={r.id} class={`run-row ${r.state.toLowerCase()}`}>
              {selection && (
                <td>
                  {selection.canSelect(r) && (
                    <input
                      type="checkbox"
                      name="run"
                      value={r.id}
                      aria-label={`Select the run on ${r.collection} / ${r.recordId} created ${start?.toLocaleString(undefined, { hour12: false }) ?? ""}`}
                      checked={selection.selected.has(r.id)}
                      onChange={(e) => toggle(r.id, e.currentTarget.checked)}
                    />
                  )}
                </td>
              )}
              <td>
                {/* The row's one link: it covers the whole row (app.css), the checkbox above it. */}
                <a class="row-link" href={href(["runs", r.id])} title={`Run ${r.id}`}>
                  <When at={r.createdAt} />
                </a>
              </td>
              <td>
                <RunOutcome run={r} />
              </td>
              <td>
                <RecordLink projectId={r.projectId} environment={environment} collection={r.collection} recordId={r.recordId} />
              </td>
              <td>
                <WorkflowLink projectId={r.projectId} renderingId={r.renderingId} workflowId={r.workflowId} name={r.workflowName} /> v{r.workflowVersion}
              </td>
              <td>
                <UserName user={r.user} />, {r.via}
              </td>
              <td>{start && end ? duration(end.getTime() - start.getTime()) : "–"}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/**
 * The workflow filter: a picker of the environment's workflows by name (a name shared by several
 * teams' workflows selects all of them) when they are listed, else a name or an id typed.
 */
function WorkflowFilter({ value, workflows, onValue }: { value: string; workflows: WorkflowChoice[] | null; onValue: (v: string) => void }) {
  const names = [...new Set((workflows ?? []).map((w) => w.name))];
  // From the address: one workflow's id (its page's "Its runs"), shown by its name; anything
  // else that names none here stays as typed, in a text field (an option would echo it into the page).
  const byId = workflows?.find((w) => w.id === value.toLowerCase());
  if (!workflows || (value && !names.includes(value) && !byId)) return <Field name="workflow" label="Workflow (name or id)" value={value} onValue={onValue} />;
  const extra = byId && !names.includes(value) ? [{ value, label: `${byId.name} (only ${value.slice(0, 8)})` }] : [];
  return (
    <label>
      Workflow
      <select name="workflow" value={value} onChange={(e) => onValue(e.currentTarget.value)}>
        <option value="">any</option>
        {[...extra, ...names.map((n) => ({ value: n, label: n }))].map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </label>
  );
}

function RunFilters({ initial, workflows, onApply }: { initial: Filters; workflows: WorkflowChoice[] | null; onApply: (f: Filters) => void }) {
  const [f, setF] = useState(initial);
  const text = (k: keyof Omit<Filters, "states">, label: string, type: "text" | "datetime-local" = "text") => (
    <Field name={k} label={label} type={type} value={f[k]} onValue={(v) => setF({ ...f, [k]: v })} />
  );
  return (
    <FilterForm onSearch={() => onApply(f)}>
      <WorkflowFilter value={f.workflow} workflows={workflows} onValue={(workflow) => setF({ ...f, workflow })} />
      {text("collection", "Collection")}
      {text("record", "Record id (in any collection)")}
      <label>
        Via
        <select name="via" value={f.via} onChange={(e) => setF({ ...f, via: e.currentTarget.value })}>
          <option value="">any</option>
          <option value="webhook">webhook</option>
          <option value="grpc">grpc</option>
          <option value="api">api</option>
          <option value="console">console</option>
        </select>
      </label>
      {text("from", "Created from", "datetime-local")}
      {text("to", "Created before", "datetime-local")}
      <fieldset>
        <legend>States</legend>
        {STATES.map((s) => (
          <label key={s} class="check">
            <input
              type="checkbox"
              name="state"
              value={s}
              checked={f.states.includes(s)}
              onChange={(e) => setF({ ...f, states: e.currentTarget.checked ? [...f.states, s] : f.states.filter((x) => x !== s) })}
            />
            {s.toLowerCase()}
          </label>
        ))}
      </fieldset>
    </FilterForm>
  );
}
