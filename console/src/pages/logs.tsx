// The activity log of an environment and the admin log of a project (project admins): the list
// with its filters, newest first with "more" pages; a live tail that polls the ascending cursor
// (with order asc the server always returns one: every new entry arrives once, in order); and
// the NDJSON export, streamed by ExportActivityLogs / ExportAdminLogs into a file download. The
// activity log's action is picked among the actions runhook writes; an entry's details show as
// fields.
import { type JsonObject, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Fragment } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import {
  type ActivityLogEntry,
  ActivityLogEntrySchema,
  type AdminLogEntry,
  AdminLogEntrySchema,
  type ListOptionsSchema,
} from "../../../gen/runhook/v1/log_pb.js";
import { RUNHOOK_ACTIVITY_ACTIONS } from "../../../src/lib/activity-actions.js";
import { logs } from "../api.js";
import { go, href, useRoute } from "../route.js";
import { isAdmin, useCall, useFail, useMe } from "../session.js";
import { ErrorText, Field, FilterForm, ListHead, Loading, More, When } from "../ui.js";
import { Crumbs, NotFound, Page, useProject } from "./common.js";
import { type ProjectNames, RecordLink, TargetLink, UserName, useProjectNames, WorkflowLink } from "./links.js";

type Kind = "activity" | "admin";
const PAGE = 50;
const TAIL_MS = 2000;

type Person = { id: string; name: string; email: string };

export interface Row {
  id: string;
  timestamp: Timestamp | undefined;
  action: string;
  who: Person | undefined;
  via?: string;
  record?: { collection: string; recordId: string };
  runId?: string;
  workflow?: { id: string; name?: string; renderingId?: string };
  target?: string;
  subject?: Person;
  environment?: string;
  details: JsonObject | undefined;
}

/** The filters that are a choice among fixed values: the activity log's actions, those runhook writes. */
const CHOICES: Record<Kind, Record<string, readonly string[]>> = {
  activity: { action: RUNHOOK_ACTIVITY_ACTIONS },
  admin: {},
};

const FIELDS: Record<Kind, [string, string][]> = {
  activity: [
    ["userEmail", "User e-mail"],
    ["action", "Action"],
    ["collection", "Collection"],
    ["recordId", "Record id"],
    ["runId", "Run id"],
  ],
  admin: [
    ["userEmail", "Actor e-mail"],
    ["action", "Action"],
  ],
};

export function activityRow(e: ActivityLogEntry): Row {
  return {
    id: e.id,
    timestamp: e.timestamp,
    action: e.action,
    who: e.user,
    via: e.via,
    record: e.collection ? { collection: e.collection, recordId: e.recordId ?? "" } : undefined,
    runId: e.runId,
    workflow: e.workflowId ? { id: e.workflowId, name: e.workflowName, renderingId: e.rendering } : undefined,
    details: e.details,
  };
}

function adminRow(e: AdminLogEntry): Row {
  return {
    id: e.id,
    timestamp: e.timestamp,
    action: e.action,
    who: e.actor,
    target: e.target,
    subject: e.subject,
    environment: e.environment,
    details: e.details,
  };
}

interface Query {
  project: string;
  environment?: string;
  filter: Record<string, string>;
  from: string;
  to: string;
}

const at = (local: string) => (local ? timestampFromDate(new Date(local)) : undefined);

/** One page of either log, as rows. */
async function page(
  kind: Kind,
  q: Query,
  options: MessageInitShape<typeof ListOptionsSchema>,
): Promise<{ rows: Row[]; hasMore: boolean; nextCursor?: string }> {
  if (kind === "activity") {
    const res = await logs.listActivityLogs({ projectName: q.project, environmentName: q.environment, options, filter: q.filter });
    return { rows: res.activityLogs.map(activityRow), hasMore: res.hasMore, nextCursor: res.nextCursor };
  }
  const res = await logs.listAdminLogs({ projectName: q.project, options, filter: q.filter });
  return { rows: res.adminLogs.map(adminRow), hasMore: res.hasMore, nextCursor: res.nextCursor };
}

/** Every matching entry as NDJSON (the ProtoJSON of each, one a line), streamed by the export RPC. */
async function exportNdjson(kind: Kind, q: Query): Promise<{ blob: Blob; count: number }> {
  const options = { order: "asc", fromTime: at(q.from), toTime: at(q.to) };
  const lines: string[] = [];
  if (kind === "activity") {
    for await (const { entry } of logs.exportActivityLogs({ projectName: q.project, environmentName: q.environment, options, filter: q.filter }))
      if (entry) lines.push(JSON.stringify(toJson(ActivityLogEntrySchema, entry)));
  } else {
    for await (const { entry } of logs.exportAdminLogs({ projectName: q.project, options, filter: q.filter }))
      if (entry) lines.push(JSON.stringify(toJson(AdminLogEntrySchema, entry)));
  }
  return {
    blob: new Blob(
      lines.map((l) => `${l}\n`),
      { type: "application/x-ndjson" },
    ),
    count: lines.length,
  };
}

function download(blob: Blob, name: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function LogsPage({ kind, projectId, environment }: { kind: Kind; projectId: string; environment?: string }) {
  const me = useMe();
  const fail = useFail();
  const project = useProject(projectId);
  const route = useRoute();
  const query = route.query.toString();
  const allowed = isAdmin(me, projectId);
  const name = allowed ? project.data?.name : undefined;
  const filter = Object.fromEntries(FIELDS[kind].map(([k]) => [k, route.query.get(k) ?? ""]));
  const q: Query | null = name ? { project: name, environment, filter, from: route.query.get("from") ?? "", to: route.query.get("to") ?? "" } : null;
  const [rows, setRows] = useState<Row[] | null>(null);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [following, setFollowing] = useState(true);
  const [exported, setExported] = useState<string | null>(null);
  const loadedAt = useRef(new Date());
  const title = kind === "activity" ? `Activity log of ${environment}` : "Admin log";
  const path = kind === "activity" ? ["p", projectId, "env", environment!, "activity"] : ["p", projectId, "admin-log"];
  const names = useProjectNames(projectId, kind === "admin" && allowed);

  useCall(
    q &&
      (() => {
        setRows(null);
        loadedAt.current = new Date();
        return page(kind, q, { limit: PAGE, order: "desc", fromTime: at(q.from), toTime: at(q.to) });
      }),
    [name, query],
    (res) => {
      setRows(res.rows);
      setCursor(res.nextCursor);
    },
    setError,
  );

  // The tail: ascending from when the list was loaded (or the filter's start, if later), by the
  // cursor the server always returns with `asc`; what it brings goes on top.
  const tailing = following && rows !== null && !q?.to;
  useEffect(() => {
    if (!tailing || !q) return;
    let stopped = false;
    let tailCursor = "";
    const from = q.from && new Date(q.from) > loadedAt.current ? at(q.from) : timestampFromDate(loadedAt.current);
    let timer: ReturnType<typeof setTimeout>;
    const poll = async () => {
      if (document.visibilityState === "visible") {
        try {
          for (let more = true; more && !stopped; ) {
            const res = await page(kind, q, { limit: 1000, order: "asc", cursor: tailCursor, fromTime: from });
            if (stopped) return;
            tailCursor = res.nextCursor ?? tailCursor;
            more = res.hasMore;
            if (res.rows.length) setRows((shown) => [...res.rows.reverse().filter((r) => !shown?.some((s) => s.id === r.id)), ...(shown ?? [])]);
          }
        } catch (err) {
          if (!stopped) setError(fail(err));
        }
      }
      if (!stopped) timer = setTimeout(poll, TAIL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [tailing, name, query]);

  const more = async () => {
    if (!q || !cursor) return;
    try {
      const res = await page(kind, q, { limit: PAGE, order: "desc", cursor, fromTime: at(q.from), toTime: at(q.to) });
      setRows((shown) => [...(shown ?? []), ...res.rows]);
      setCursor(res.nextCursor);
    } catch (err) {
      setError(fail(err));
    }
  };

  const doExport = async () => {
    if (!q) return;
    setExported("Exporting…");
    try {
      const { blob, count } = await exportNdjson(kind, q);
      const file = `${kind === "activity" ? `activity-${q.project}-${environment}` : `admin-${q.project}`}-${new Date().toISOString().slice(0, 19).replaceAll(":", "")}.ndjson`;
      download(blob, file);
      setExported(`Exported ${count} ${count === 1 ? "entry" : "entries"} to ${file}.`);
    } catch (err) {
      setExported(null);
      setError(fail(err));
    }
  };

  const crumbs = <Crumbs project={project.data} trail={[[kind === "activity" ? `${environment}: activity log` : "admin log", null]]} />;
  if (project.missing) return <NotFound what="project" />;
  if (!allowed)
    return (
      <Page title={title} crumbs={crumbs}>
        <p class="error">Only the project's admins read its logs.</p>
      </Page>
    );
  return (
    <Page title={title} crumbs={crumbs}>
      <ErrorText error={project.error} />
      <LogFilters key={query} kind={kind} initial={Object.fromEntries(route.query)} onApply={(f) => go(path, f)} />
      <div class="toolbar">
        <label class="check">
          <input type="checkbox" name="follow" checked={following} onChange={(e) => setFollowing(e.currentTarget.checked)} disabled={!!q?.to} />
          Follow new entries (live)
        </label>
        <button type="button" class="secondary export" onClick={doExport}>
          Export NDJSON
        </button>
        <span class="muted" role="status">
          {exported}
        </span>
      </div>
      <ErrorText error={error} />
      {rows === null && !error && <Loading what="the log" />}
      {rows?.length === 0 && <p class="muted">No entry matches.</p>}
      {rows && rows.length > 0 && <LogTable kind={kind} rows={rows} place={{ projectId, environment }} names={names.data} />}
      <More show={!!cursor} onMore={more} />
    </Page>
  );
}

/** Where the entries are: the project, and the activity log's environment (admin entries name theirs). */
interface Place {
  projectId: string;
  environment?: string;
  /** The record's own page lists its entries: each row's record is that page, and is left out. */
  onRecordPage?: boolean;
}

/** A log's entries: each record, run, workflow and target a link to its page (targets once `names` are known). */
export function LogTable({ kind, rows, place, names }: { kind: Kind; rows: Row[]; place: Place; names?: ProjectNames }) {
  return (
    <table class={`list log ${kind}`}>
      <ListHead
        columns={[
          "When",
          "Action",
          kind === "activity" ? "User, via" : "Actor",
          kind === "admin" ? "Target" : place.onRecordPage ? "Run" : "Record, run",
          "Details",
        ]}
      />
      <tbody>
        {rows.map((r) => (
          <tr key={r.id} data-entry={r.id} data-action={r.action}>
            <td>
              <When at={r.timestamp} />
            </td>
            <td>
              <code>{r.action}</code>
            </td>
            <td>
              <UserName user={r.who} />
              {r.via && `, ${r.via}`}
            </td>
            <td>
              <EntrySubject row={r} place={place} names={names} />
            </td>
            <td>
              <Details details={r.details} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** What an entry is about: its record, run and workflow (activity), or its target and environment (admin). */
function EntrySubject({ row: r, place, names }: { row: Row; place: Place; names?: ProjectNames }) {
  const environment = r.environment ?? place.environment;
  return (
    <>
      {r.record && !place.onRecordPage && (
        <RecordLink projectId={place.projectId} environment={environment} collection={r.record.collection} recordId={r.record.recordId} />
      )}
      {r.runId && (
        <>
          {r.record && !place.onRecordPage && " "}
          <a href={href(["runs", r.runId])} class="run-link" title={`Run ${r.runId}`}>
            run
          </a>
        </>
      )}
      {r.workflow && (
        <>
          {" of "}
          <WorkflowLink projectId={place.projectId} renderingId={r.workflow.renderingId} workflowId={r.workflow.id} name={r.workflow.name} />
        </>
      )}
      {r.target && (names ? <TargetLink target={r.target} names={names} subject={r.subject} /> : <code>{r.target}</code>)}
      {r.environment && (
        <>
          {" ("}
          <a href={href(["p", place.projectId, "env", r.environment, "runs"])}>{r.environment}</a>
          {")"}
        </>
      )}
    </>
  );
}

/** An entry's details as fields, `key: value`: a nested object's by dotted keys, a list of plain values joined. */
function fieldsOf(details: JsonObject, prefix = ""): [string, string][] {
  return Object.entries(details).flatMap(([k, v]): [string, string][] => {
    const key = `${prefix}${k}`;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) return fieldsOf(v, `${key}.`);
    if (Array.isArray(v)) return [[key, v.every((x) => x === null || typeof x !== "object") ? v.map(String).join(", ") : JSON.stringify(v)]];
    return [[key, v === null ? "–" : String(v)]];
  });
}

function Details({ details }: { details: JsonObject | undefined }) {
  const fields = details ? fieldsOf(details) : [];
  if (fields.length === 0) return null;
  return (
    <dl class="details">
      {fields.map(([k, v]) => (
        <Fragment key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </Fragment>
      ))}
    </dl>
  );
}

function LogFilters({ kind, initial, onApply }: { kind: Kind; initial: Record<string, string>; onApply: (f: Record<string, string>) => void }) {
  const [f, setF] = useState(initial);
  const field = (k: string, label: string, type: "text" | "datetime-local" = "text") => {
    const choices = CHOICES[kind][k];
    if (!choices) return <Field key={k} name={k} label={label} type={type} value={f[k] ?? ""} onValue={(v) => setF({ ...f, [k]: v })} />;
    return (
      <label key={k}>
        {label}
        <select name={k} value={f[k] ?? ""} onChange={(e) => setF({ ...f, [k]: e.currentTarget.value })}>
          <option value="">any</option>
          {choices.map((c) => (
            <option key={c} value={c}>
              {c}
            </option>
          ))}
        </select>
      </label>
    );
  };
  return (
    <FilterForm onSearch={() => onApply(f)}>
      {FIELDS[kind].map(([k, label]) => field(k, label))}
      {field("from", "From", "datetime-local")}
      {field("to", "Before", "datetime-local")}
    </FilterForm>
  );
}
