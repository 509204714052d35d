// `runhook runs list`: the run search (GET /v1/project/{p}/environment/{e}/runs) from a shell.
// A table on a terminal; one run a line as JSON (NDJSON) when stdout is a pipe or a file, so
// that `| jq` gets every field GET /v1/runs/{runId} answers. Pages are followed until --limit
// runs are printed or none are left.
import {
  alignedRows,
  CliError,
  EXIT,
  EXIT_CODES_HELP,
  answerError,
  backoffMs,
  baseUrlOf,
  parse,
  report,
  seconds,
  sleep,
  str,
  terminalSafe,
  terminalSafeJson,
  tokenOf,
  tryGet,
  UsageError,
  type Parsed,
} from "./common.js";
import { isUuid } from "../domain/ids.js";

export const LIST_USAGE = `usage: runhook runs list --project P --environment E [filters] [--order desc|asc] [--limit N]
                        [--format table|ndjson] [--base-url URL] [--token TOKEN]

Prints the runs of an environment, newest first: a table on a terminal, one JSON object per
run (NDJSON, each as GET /v1/runs/{runId} answers it) when stdout is a pipe or a file.

  --project P  --environment E   where the runs are
  --workflow W                   runs of this workflow: its name, or its full id
  --collection C                 runs on this collection
  --record R                     runs on this record id (in --collection when given, else in any)
  --state S                      runs in this state: QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED;
                                 repeat it or give a comma list (--state FAILED,CANCELLED)
  --via V                        runs started by webhook, grpc, api (/v1) or console
  --user ID                      runs acting as this user id
  --since T  --until T           created at or after / before T: a duration back from now
                                 (90s, 30m, 1h, 2d) or an RFC 3339 time
  --finished-since T  --finished-until T    the same on the finish time
  --order desc|asc               newest first (default) or oldest first
  --limit N                      print at most N runs (default 100, at most 100000)
  --format table|ndjson          instead of choosing by stdout
  --base-url URL                 the runhook server (default: $RUNHOOK_URL, else http://localhost:8080)
  --token TOKEN                  a project API token, or an application token (default: $RUNHOOK_TOKEN):
                                 a project admin's sees every run, another user's those of the workflows it may trigger

429 waits Retry-After; network errors and 5xx are retried with backoff for up to a minute.
${EXIT_CODES_HELP}`;

const PREFIX = "runhook runs list";
const MAX_PAGE = 1000;
const MAX_PRINTED = 100_000;
const GIVE_UP_MS = 60_000;

/** The run filters' flags (`runs batch` takes them too). */
export const FILTER_OPTIONS = {
  token: { type: "string" },
  "base-url": { type: "string" },
  project: { type: "string" },
  environment: { type: "string" },
  workflow: { type: "string" },
  collection: { type: "string" },
  record: { type: "string" },
  state: { type: "string", multiple: true },
  via: { type: "string" },
  user: { type: "string" },
  since: { type: "string" },
  until: { type: "string" },
  "finished-since": { type: "string" },
  "finished-until": { type: "string" },
} as const;

const OPTIONS = {
  ...FILTER_OPTIONS,
  order: { type: "string" },
  limit: { type: "string" },
  format: { type: "string" },
} as const;

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `1h`, `30m`, `2d`, `90s` back from `now`, or an RFC 3339 time, as the API takes it. */
export function timeArg(flag: string, raw: string, now = Date.now()): string {
  const rel = /^(\d{1,9})([smhd])$/.exec(raw);
  if (rel) return new Date(now - Number(rel[1]) * UNITS[rel[2]!]!).toISOString();
  if (/^\d{4}-\d{2}-\d{2}[Tt]/.test(raw) && !Number.isNaN(Date.parse(raw))) return raw;
  throw new UsageError(`--${flag} must be a duration such as 1h, 30m, 2d, or an RFC 3339 time, got "${raw}"`);
}

interface ListPlan {
  url: string;
  token: string;
  query: URLSearchParams;
  limit: number;
  table: boolean;
}

/** The query string of the flags (the /v1 run search's parameters). */
export function queryOf(values: Parsed["values"]): URLSearchParams {
  const q = new URLSearchParams();
  const put = (param: string, flag: string) => {
    const v = str(values, flag);
    if (v !== undefined) q.set(param, v);
  };
  const workflow = str(values, "workflow");
  if (workflow !== undefined) q.set(isUuid(workflow) ? "workflowId" : "workflowName", workflow);
  put("collection", "collection");
  put("recordId", "record");
  put("via", "via");
  put("userId", "user");
  put("order", "order");
  const states = (values.state as unknown as string[] | undefined) ?? [];
  if (states.length) q.set("state", states.join(","));
  for (const [param, flag] of [
    ["from", "since"],
    ["to", "until"],
    ["finishedFrom", "finished-since"],
    ["finishedTo", "finished-until"],
  ] as const) {
    const v = str(values, flag);
    if (v !== undefined) q.set(param, timeArg(flag, v));
  }
  return q;
}

function planList(args: string[], env: NodeJS.ProcessEnv): ListPlan | undefined {
  const { values, help } = parse(args, OPTIONS as never, 0);
  if (help) return undefined;
  const project = str(values, "project");
  const environment = str(values, "environment");
  if (!project || !environment) throw new UsageError("give --project and --environment");
  const rawLimit = str(values, "limit") ?? "100";
  if (!/^\d{1,6}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > MAX_PRINTED) throw new UsageError(`--limit must be from 1 to ${MAX_PRINTED}`);
  const format = str(values, "format");
  if (format !== undefined && format !== "table" && format !== "ndjson") throw new UsageError(`--format must be table or ndjson, got "${format}"`);
  const base = baseUrlOf(values, env);
  return {
    url: `${base}/v1/project/${encodeURIComponent(project)}/environment/${encodeURIComponent(environment)}/runs`,
    token: tokenOf(values, env, "a project API token or an application token"),
    query: queryOf(values),
    limit: Number(rawLimit),
    table: format === undefined ? process.stdout.isTTY === true : format === "table",
  };
}

/** The fields of a run the table shows. */
interface RunRow {
  id: string;
  workflowId?: string;
  workflowName?: string;
  workflowVersion?: number;
  collection?: string;
  recordId?: string;
  state?: string;
  via?: string;
  user?: { email?: string };
  createdAt?: string;
  finishedAt?: string;
  error?: string;
}

function duration(r: RunRow): string {
  if (!r.createdAt || !r.finishedAt) return "";
  const ms = Date.parse(r.finishedAt) - Date.parse(r.createdAt);
  return ms < 1000 ? `${ms} ms` : ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60_000)} min`;
}

const COLUMNS: [string, (r: RunRow) => string][] = [
  ["CREATED", (r) => r.createdAt ?? ""],
  ["RUN", (r) => r.id],
  ["STATE", (r) => r.state ?? ""],
  ["TOOK", duration],
  ["RECORD", (r) => `${r.collection ?? ""}/${r.recordId ?? ""}`],
  ["USER", (r) => r.user?.email ?? ""],
  ["VIA", (r) => r.via ?? ""],
  ["WORKFLOW", (r) => `${r.workflowName || r.workflowId || ""} v${r.workflowVersion ?? 0}`],
  ["ERROR", (r) => (r.error ?? "").slice(0, 80)],
];

/** The runs as an aligned table (strings already terminal-safe). */
export function table(runs: RunRow[]): string {
  return alignedRows([COLUMNS.map(([h]) => h), ...runs.map((r) => COLUMNS.map(([, f]) => f(r)))]);
}

/** Every page, up to the plan's limit; the runs as answered. */
async function fetchRuns(plan: ListPlan, onPage: (runs: unknown[]) => void): Promise<number> {
  const stop = new AbortController().signal;
  let cursor = "";
  let printed = 0;
  let failingSince = 0;
  let failures = 0;
  while (printed < plan.limit) {
    const q = new URLSearchParams(plan.query);
    q.set("limit", String(Math.min(MAX_PAGE, plan.limit - printed)));
    if (cursor) q.set("cursor", cursor);
    const got = await tryGet(`${plan.url}?${q}`, { token: plan.token, signal: stop, timeoutMs: 60_000 });
    if (!got) break;
    if ("transient" in got) {
      if (failures++ === 0) failingSince = Date.now();
      if (Date.now() - failingSince > GIVE_UP_MS)
        throw new CliError(`${got.transient}; giving up after ${seconds(Date.now() - failingSince)}`, EXIT.UNAVAILABLE);
      const waitMs = got.retryAfterMs ?? backoffMs(failures);
      process.stderr.write(`${PREFIX}: ${got.transient}; retrying in ${seconds(waitMs)}\n`);
      await sleep(waitMs);
      continue;
    }
    failures = 0;
    const a = got.answer;
    if (a.status !== 200) throw answerError(a);
    const body = a.json as { runs?: unknown[]; hasMore?: boolean; nextCursor?: string } | undefined;
    if (!body || !Array.isArray(body.runs)) throw new CliError(`unexpected answer: ${a.text.slice(0, 200)}`, EXIT.ERROR);
    onPage(body.runs);
    printed += body.runs.length;
    if (body.hasMore !== true || !body.nextCursor) break;
    cursor = body.nextCursor;
  }
  return printed;
}

export async function runList(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    const plan = planList(args, env);
    if (!plan) {
      process.stdout.write(`${LIST_USAGE}\n`);
      return EXIT.OK;
    }
    const rows: RunRow[] = [];
    const count = await fetchRuns(plan, (runs) => {
      // The table shows the first line of an error (made terminal-safe after it is cut).
      if (plan.table) rows.push(...(terminalSafeJson((runs as RunRow[]).map((r) => ({ ...r, error: r.error?.split("\n", 1)[0] }))) as RunRow[]));
      else if (runs.length > 0) process.stdout.write(`${runs.map((r) => terminalSafe(JSON.stringify(r))).join("\n")}\n`);
    });
    if (plan.table) process.stdout.write(count === 0 ? "no runs\n" : `${table(rows)}\n`);
    return EXIT.OK;
  } catch (err) {
    return report(err, PREFIX, LIST_USAGE);
  }
}
