// `runhook logs tail`: follows `nextCursor` (order=asc) of the activity log or the admin log
// forever and prints every entry once, as one NDJSON line on stdout. The cursor is saved
// atomically after every page and resumed from at start; 429 waits Retry-After, network
// errors and 5xx back off exponentially with jitter; SIGINT/SIGTERM stop after the page in hand.
import { once } from "node:events";
import { open, readFile, rename, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import {
  CliError,
  EXIT,
  EXIT_CODES_HELP,
  answerError,
  backoffMs,
  baseUrlOf,
  errorBody,
  errorMessage,
  parse,
  report,
  seconds,
  sleep,
  str,
  tokenOf,
  tryGet,
  terminalSafe,
  UsageError,
  type Answer,
} from "./common.js";

/** The /v1 lists' largest page (the published document's; not imported: the command loads no server code). */
const MAX_PAGE = 100;

export const TAIL_USAGE = `usage: runhook logs tail --project P --environment E [filters] [--cursor-file F] [--limit N]
                         [--interval SECONDS] [--base-url URL] [--token TOKEN]
       runhook logs tail --project P --admin [--type T] [--user-id N] [--user-email EMAIL] …

Prints every entry of an environment's activity log (or, with --admin, of the project's admin
log) once, oldest first, as one JSON object per line (NDJSON, each as the /v1 list shows it) on
stdout, and keeps following new entries until stopped (Ctrl-C or SIGTERM, exit 0). Messages go
to stderr.

  --project P          project name
  --environment E      environment name (activity log; not with --admin)
  --admin              the project's admin log instead
  --user-id N  --user-email EMAIL  --type T                filters of both logs (N: the user's number)
  --action A  --team T  --collection C  --record-id R  --run-id RUN
                       filters of the activity log (A: a published action, such as createNote)
  --initiator I  --resource R                              filters of the admin log
  --cursor-file F      resume from the cursor saved in F, and save it there (atomically) after
                       every page: a restarted tail continues where it stopped. Entries are
                       printed before their page's cursor is saved, so a crash in between
                       repeats at most that page; a stop by signal repeats nothing.
                       The cursor is bound to the log and filters: change them → new file.
  --limit N            page size, 1-${MAX_PAGE} (default ${MAX_PAGE})
  --interval SECONDS   pause when caught up (default 1)
  --base-url URL       the runhook server (default: $RUNHOOK_URL, else http://localhost:8080)
  --token TOKEN        project API token (default: $RUNHOOK_TOKEN)

429 waits Retry-After; network errors and 5xx are retried with exponential backoff and
jitter (1 s, 2 s, 4 s … 60 s), forever. 400, 401, 403 and 404 stop with the reason.
${EXIT_CODES_HELP}`;

/** Each filter flag, the /v1 query parameter it sets, and the log it filters. */
const FILTERS: Record<string, { param: string; of: "both" | "activity" | "admin" }> = {
  "user-id": { param: "userId", of: "both" },
  "user-email": { param: "userEmail", of: "both" },
  type: { param: "type", of: "both" },
  action: { param: "action", of: "activity" },
  team: { param: "teamName", of: "activity" },
  collection: { param: "collectionName", of: "activity" },
  "record-id": { param: "recordId", of: "activity" },
  "run-id": { param: "runId", of: "activity" },
  initiator: { param: "initiator", of: "admin" },
  resource: { param: "resource", of: "admin" },
};

/** The cursor saved in `file`; "" when there is none yet. */
async function readCursor(file: string): Promise<string> {
  try {
    return (await readFile(file, "utf8")).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw new CliError(`cannot read the cursor file ${file}: ${(err as Error).message}`, EXIT.ERROR);
  }
}

/** Writes a temporary file next to `file`, flushes it, and renames it over `file`. */
export async function saveCursor(file: string, cursor: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    const fh = await open(tmp, "w", 0o600);
    try {
      await fh.writeFile(`${cursor}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw new CliError(`cannot save the cursor to ${file}: ${(err as Error).message}`, EXIT.ERROR, `check that ${dirname(file)} exists and is writable`);
  }
  // Make the rename itself durable (best effort: not every platform can fsync a directory).
  try {
    const dir = await open(dirname(file), "r");
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  } catch {
    /* ignore */
  }
}

function hintFor(
  a: Answer,
  ctx: { token: string; cursorFromFile: string | undefined; admin: boolean; project: string; environment?: string },
): string | undefined {
  const m = errorMessage(a);
  switch (a.status) {
    case 400:
      if (errorBody(a).code === "failed_precondition") {
        return `entries after the cursor were removed by retention (RUNHOOK_LOG_RETENTION_DAYS on the server) and cannot be printed; ${ctx.cursorFromFile ? `delete ${ctx.cursorFromFile}` : "start again"} to follow from the oldest entry kept`;
      }
      if (/cursor/i.test(m) && ctx.cursorFromFile)
        return `the cursor saved in ${ctx.cursorFromFile} was issued for another log, other filters or an older runhook: delete the file (to start from the oldest entry) or use another --cursor-file`;
      return "a filter value was refused; see the message";
    case 401:
      return ctx.token.startsWith("rh_app_")
        ? "this is an application token (rh_app_…); the public API needs a project API token (rh_api_…), generated by a project admin under API access (runhook admin api-tokens create)"
        : "the project API token is missing, unknown, expired or revoked: generate one under the project's API access (runhook admin api-tokens create)";
    case 403:
      return `the token does not belong to project "${ctx.project}" (check the name), or its creator is no longer an admin of the project`;
    case 404:
      return ctx.admin ? undefined : `project "${ctx.project}" has no environment "${ctx.environment}": check --environment`;
    default:
      return undefined;
  }
}

/** What a tail follows and how, from its arguments. */
interface TailPlan {
  admin: boolean;
  project: string;
  environment: string | undefined;
  /** The list's URL, and its query without the cursor. */
  url: string;
  query: URLSearchParams;
  intervalMs: number;
  cursorFile: string | undefined;
  base: string;
  token: string;
}

const TAIL_OPTIONS = {
  project: { type: "string" },
  environment: { type: "string" },
  admin: { type: "boolean" },
  "cursor-file": { type: "string" },
  limit: { type: "string" },
  interval: { type: "string" },
  "base-url": { type: "string" },
  token: { type: "string" },
  ...Object.fromEntries(Object.keys(FILTERS).map((k) => [k, { type: "string" }])),
} as const;

/** The plan of a tail, or undefined when the arguments ask for help. */
function planTail(args: string[], env: NodeJS.ProcessEnv): TailPlan | undefined {
  const { values, help } = parse(args, TAIL_OPTIONS, 0);
  if (help) return undefined;
  const admin = values.admin === true;
  const project = str(values, "project");
  const environment = str(values, "environment");
  if (!project) throw new UsageError("--project is required");
  if (admin && environment !== undefined) throw new UsageError("--admin tails the project's admin log: drop --environment");
  if (!admin && !environment) throw new UsageError("--environment is required (or --admin for the admin log)");
  const query = new URLSearchParams({ order: "asc" });
  for (const [flag, f] of Object.entries(FILTERS)) {
    const v = str(values, flag);
    if (v === undefined) continue;
    if (admin && f.of === "activity") throw new UsageError(`--${flag} filters the activity log only (not with --admin)`);
    if (!admin && f.of === "admin") throw new UsageError(`--${flag} filters the admin log only (with --admin)`);
    query.set(f.param, v);
  }
  const limitRaw = str(values, "limit") ?? String(MAX_PAGE);
  if (!/^\d+$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > MAX_PAGE)
    throw new UsageError(`--limit must be a whole number from 1 to ${MAX_PAGE}`);
  query.set("limit", limitRaw);
  const intervalRaw = str(values, "interval") ?? "1";
  const intervalMs = Number(intervalRaw) * 1000;
  if (!/^\d+(\.\d+)?$/.test(intervalRaw) || intervalMs > 3_600_000) throw new UsageError("--interval must be a number of seconds (at most 3600)");
  const cursorFile = str(values, "cursor-file");
  const base = baseUrlOf(values, env);
  const token = tokenOf(values, env, "a project API token");
  const p = encodeURIComponent(project);
  const url = admin ? `${base}/v1/project/${p}/admin-logs` : `${base}/v1/project/${p}/environment/${encodeURIComponent(environment!)}/activity-logs`;
  return { admin, project, environment, url, query, intervalMs, cursorFile, base, token };
}

const PREFIX = "runhook logs tail";

interface StopWatch {
  /** Aborted by SIGINT/SIGTERM, or when stdout breaks. */
  stop: AbortSignal;
  stdoutBroken: boolean;
  dispose(): void;
}

/** SIGINT/SIGTERM and a broken stdout stop the tail; a second signal exits at once. */
function watchForStop(): StopWatch {
  const stop = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    if (++signals > 1) process.exit(EXIT.INTERRUPTED);
    if (sig === "SIGINT" && process.stderr.isTTY) process.stderr.write("\n");
    stop.abort();
  };
  const watch: StopWatch = {
    stop: stop.signal,
    stdoutBroken: false,
    dispose() {
      process.removeListener("SIGINT", onSignal);
      process.removeListener("SIGTERM", onSignal);
      process.stdout.removeListener("error", onStdoutError);
    },
  };
  const onStdoutError = (err: NodeJS.ErrnoException) => {
    watch.stdoutBroken = true;
    stop.abort();
    if (err.code !== "EPIPE") process.stderr.write(`${PREFIX}: cannot write to stdout: ${err.message}\n`);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.stdout.on("error", onStdoutError);
  return watch;
}

export async function runTail(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const stopWatch = watchForStop();
  try {
    const plan = planTail(args, env);
    if (!plan) {
      process.stdout.write(`${TAIL_USAGE}\n`);
      return EXIT.OK;
    }
    await follow(plan, stopWatch);
    return EXIT.OK;
  } catch (err) {
    return report(err, PREFIX, TAIL_USAGE);
  } finally {
    stopWatch.dispose();
  }
}

/** Where a tail stands: its cursor, and whether that is still the one read from the file (for the 400 hint). */
interface TailPosition {
  cursor: string;
  cursorFromFile: string | undefined;
}

/** Pages through the log until stopped. */
async function follow(plan: TailPlan, stopWatch: StopWatch): Promise<void> {
  const { cursorFile, admin, project, environment } = plan;
  const stop = stopWatch.stop;
  const cursor = cursorFile ? await readCursor(cursorFile) : "";
  const at: TailPosition = { cursor, cursorFromFile: cursor ? cursorFile : undefined };
  process.stderr.write(
    `${PREFIX}: following the ${admin ? `admin log of project ${project}` : `activity log of ${project}/${environment}`} at ${plan.base}, ${cursor ? `from the cursor in ${cursorFile}` : "from the oldest entry"}\n`,
  );
  let failures = 0;
  const retry = async (why: string, waitMs: number) => {
    process.stderr.write(`${PREFIX}: ${why}; retrying in ${seconds(waitMs)}\n`);
    await sleep(waitMs, stop);
  };
  while (!stop.aborted) {
    const q = new URLSearchParams(plan.query);
    if (at.cursor) q.set("cursor", at.cursor);
    const got = await tryGet(`${plan.url}?${q}`, { token: plan.token, signal: stop, timeoutMs: 120_000 });
    if (!got) break;
    if ("transient" in got) {
      failures++;
      await retry(got.transient, got.retryAfterMs !== undefined ? got.retryAfterMs + Math.random() * 500 : backoffMs(failures));
      continue;
    }
    const a = got.answer;
    if (a.status !== 200) throw answerError(a, hintFor(a, { token: plan.token, cursorFromFile: at.cursorFromFile, admin, project, environment }));
    failures = 0;
    if (!(await takePage(plan, a, at, stopWatch))) break;
  }
}

/** Prints a page, saves its cursor, and waits as the page says; false when stdout broke. */
async function takePage(plan: TailPlan, a: Answer, at: TailPosition, stopWatch: StopWatch): Promise<boolean> {
  const stop = stopWatch.stop;
  const body = a.json as { hasMore?: boolean; nextCursor?: string; data?: unknown };
  const items = body?.data;
  if (!Array.isArray(items)) throw new CliError(`unexpected answer: ${a.text.slice(0, 200)}`, EXIT.ERROR);
  if (items.length > 0) {
    if (!process.stdout.write(`${items.map((e) => terminalSafe(JSON.stringify(e))).join("\n")}\n`))
      await Promise.race([once(process.stdout, "drain"), once(stop, "abort")]);
    if (stopWatch.stdoutBroken) return false;
  }
  if (typeof body.nextCursor === "string" && body.nextCursor !== "" && body.nextCursor !== at.cursor) {
    at.cursor = body.nextCursor;
    at.cursorFromFile = undefined;
    if (plan.cursorFile) await saveCursor(plan.cursorFile, at.cursor);
  }
  if (body.hasMore !== true) await sleep(plan.intervalMs, stop);
  else if (a.headers.get("x-ratelimit-remaining") === "0") {
    // The window is used up: wait for it to free rather than collect a 429.
    const reset = Number(a.headers.get("x-ratelimit-reset")) * 1000;
    if (Number.isFinite(reset) && reset > Date.now()) await sleep(Math.min(60_000, reset - Date.now() + Math.random() * 500), stop);
  }
  return true;
}
