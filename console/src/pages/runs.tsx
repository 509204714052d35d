// The run search of an environment (ListRuns): its filters in the route's query, newest first,
// "more" pages, and live: the first page is asked again every 2 s while the page is visible (and
// at once when it becomes visible), new runs on top and changed ones updated in place. Admins
// see every run of the environment, others their own.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { useEffect, useRef, useState } from "preact/hooks";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListRunsRequestSchema, Run } from "../../../gen/runhook/v1/run_pb.js";
import { runs } from "../api.js";
import { go, href, useRoute } from "../route.js";
import { useFail } from "../session.js";
import { dateOf, duration } from "../time.js";
import { ErrorText, Field, FilterForm, ListHead, Loading, More, When } from "../ui.js";
import { Crumbs, NotFound, Page, useProject } from "./common.js";

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

function request(project: string, environment: string, f: Filters, cursor: string): MessageInitShape<typeof ListRunsRequestSchema> {
  return {
    projectName: project,
    environmentName: environment,
    options: { limit: PAGE, cursor, order: "desc", fromTime: at(f.from), toTime: at(f.to) },
    filter: { workflowId: f.workflow, collection: f.collection, recordId: f.record, states: f.states, via: f.via },
  };
}

/** Merges a fresh first page into what is shown: new runs on top, changed ones replaced in place. */
function merge(shown: Run[], fresh: Run[]): Run[] {
  const byId = new Map(fresh.map((r) => [r.id, r]));
  const known = new Set(shown.map((r) => r.id));
  return [...fresh.filter((r) => !known.has(r.id)), ...shown.map((r) => byId.get(r.id) ?? r)];
}

export function RunsPage({ projectId, environment }: { projectId: string; environment: string }) {
  const fail = useFail();
  const project = useProject(projectId);
  const route = useRoute();
  const query = route.query.toString();
  const filters = filtersOf(route.query);
  const name = project.data?.name;
  const [shown, setShown] = useState<Run[] | null>(null);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
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
        onApply={({ states, ...rest }) => go(["p", projectId, "env", environment, "runs"], { ...rest, state: states })}
      />
      <ErrorText error={error} />
      {shown === null && !error && <Loading what="the runs" />}
      {shown?.length === 0 && <p class="muted">No run matches.</p>}
      {shown && shown.length > 0 && <RunTable runs={shown} />}
      <More show={!!cursor} onMore={more} busy={busy} />
    </Page>
  );
}

function RunTable({ runs: list }: { runs: Run[] }) {
  return (
    <table class="list runs">
      <ListHead columns={["Created", "State", "Record", "Workflow", "As, via", "Took"]} />
      <tbody>
        {list.map((r) => {
          const start = dateOf(r.createdAt);
          const end = dateOf(r.finishedAt);
          return (
            <tr key={r.id} data-run={r.id} class={`run-row ${r.state.toLowerCase()}`}>
              <td>
                <a href={href(["runs", r.id])} title={`Run ${r.id}`}>
                  <When at={r.createdAt} />
                </a>
              </td>
              <td>
                <span class={`state ${r.state.toLowerCase()}`}>{r.state}</span>
              </td>
              <td>
                {r.collection} / <code>{r.recordId}</code>
              </td>
              <td>
                <code title={r.workflowId}>{r.workflowId.slice(0, 8)}</code> v{r.workflowVersion}
              </td>
              <td>
                {r.user?.email}, {r.via}
              </td>
              <td>{start && end ? duration(end.getTime() - start.getTime()) : "–"}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function RunFilters({ initial, onApply }: { initial: Filters; onApply: (f: Filters) => void }) {
  const [f, setF] = useState(initial);
  const text = (k: keyof Omit<Filters, "states">, label: string, type: "text" | "datetime-local" = "text") => (
    <Field name={k} label={label} type={type} value={f[k]} onValue={(v) => setF({ ...f, [k]: v })} />
  );
  return (
    <FilterForm onSearch={() => onApply(f)}>
      {text("workflow", "Workflow id")}
      {text("collection", "Collection")}
      {text("record", "Record id")}
      <label>
        Via
        <select name="via" value={f.via} onChange={(e) => setF({ ...f, via: e.currentTarget.value })}>
          <option value="">any</option>
          <option value="webhook">webhook</option>
          <option value="grpc">grpc</option>
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
