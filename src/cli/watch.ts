// `runhook runs watch <runId>`: follows a run with the version-based long-poll of
// GET /v1/runs/{id}?wait=30s&version=<v> until it is finished. On a terminal the run and its
// steps are redrawn in place with a spinner; otherwise one plain line per change.
import {
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
  terminalSafeJson,
  tokenOf,
  tryGet,
  UsageError,
} from "./common.js";

export const WATCH_USAGE = `usage: runhook runs watch <runId> [--base-url URL] [--token TOKEN]

Shows a run's state and its steps (state, duration) live until it is finished, using the
long-poll GET /v1/runs/{runId}?wait=30s&version=<v>. On a terminal the view is redrawn in
place; otherwise (a pipe, a CI log) one line is printed per change. Ctrl-C stops watching,
not the run.

  --base-url URL   the runhook server (default: $RUNHOOK_URL, else http://localhost:8080)
  --token TOKEN    default $RUNHOOK_TOKEN: the application token that triggered the run (or one
                   of another user allowed to trigger the workflow, or of a project admin), or a project API token of
                   the run's project

Exits 0 when the run SUCCEEDED, 10 when it FAILED and 11 when it was CANCELLED (the step's
error is printed on stderr). Network errors, 5xx and 429 are retried with backoff for up to
2 minutes.
${EXIT_CODES_HELP}`;

const WAIT = "30s";
const GIVE_UP_MS = 120_000;
const FINISHED = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const MARK: Record<string, string> = { SUCCEEDED: "✓", FAILED: "✗", CANCELLED: "⊘", PENDING: "·", SKIPPED: "↷" };

interface StepView {
  type?: string;
  state?: string;
  startedAt?: string;
  finishedAt?: string;
  error?: string;
  /** A SKIPPED step (a retry from the failed step): the run in which it ran. */
  doneInRunId?: string;
}

/** What a step line adds after its state: its error, or the run a skipped step ran in. */
const stepNote = (s: StepView, sep: string) => (s.error ? `${sep}${s.error}` : s.doneInRunId ? `${sep}done in run ${s.doneInRunId}` : "");

interface RunView {
  id?: string;
  state?: string;
  collection?: string;
  recordId?: string;
  steps?: StepView[];
  error?: string;
  createdAt?: string;
  startedAt?: string;
  finishedAt?: string;
  version?: string | number;
  /** Set while the run is parked on a wait step. */
  waitUntil?: string;
}

/** "waiting until <time> (<left> left)" for a parked run, else "". */
export function waitingText(run: RunView, now: number): string {
  const until = time(run.waitUntil);
  if (until === undefined) return "";
  return `waiting until ${new Date(until).toISOString()} (${formatDuration(until - now)} left)`;
}

const time = (s: string | undefined): number | undefined => {
  if (!s) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) || t <= 0 ? undefined : t;
};

export function formatDuration(ms: number): string {
  ms = Math.max(0, ms);
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}

/** How long the step ran (or has been running, by this machine's clock); undefined when not started. */
function stepDuration(s: StepView | RunView, now: number): number | undefined {
  const start = time(s.startedAt);
  if (start === undefined) return undefined;
  return (time(s.finishedAt) ?? now) - start;
}

function target(run: RunView): string {
  return run.collection ? `${run.collection}/${run.recordId ?? ""}` : (run.recordId ?? "");
}

interface View {
  update(run: RunView): void;
  /** A message on stderr that does not break the view. */
  note(message: string): void;
  finish(): void;
}

/** Plain lines, one per change (a pipe, a file, a CI log). */
function plainView(out: NodeJS.WriteStream): View {
  let last: RunView | undefined;
  return {
    update(run) {
      const steps = run.steps ?? [];
      const n = steps.length;
      if (!last) {
        const d = FINISHED.has(run.state ?? "") ? stepDuration(run, Date.now()) : undefined;
        out.write(`run ${run.id} on ${target(run)}: ${run.state}${d !== undefined ? ` in ${formatDuration(d)}` : ""}\n`);
      }
      steps.forEach((s, i) => {
        const before = last?.steps?.[i]?.state ?? "PENDING";
        if (s.state === before) return;
        const d = s.state === "RUNNING" ? undefined : stepDuration(s, Date.now());
        out.write(`step ${i + 1}/${n} ${s.type}: ${s.state}${d !== undefined ? ` in ${formatDuration(d)}` : ""}${stepNote(s, ": ")}\n`);
      });
      if (run.waitUntil && run.waitUntil !== last?.waitUntil) out.write(`run ${waitingText(run, Date.now())}\n`);
      if (last && run.state !== last.state) {
        const d = FINISHED.has(run.state ?? "") ? stepDuration(run, Date.now()) : undefined;
        out.write(`run ${run.state}${d !== undefined ? ` in ${formatDuration(d)}` : ""}\n`);
      }
      last = run;
    },
    note(message) {
      process.stderr.write(`${message}\n`);
    },
    finish() {},
  };
}

/** The run and its steps redrawn in place, with a spinner (a terminal). */
function ttyView(out: NodeJS.WriteStream): View {
  let run: RunView | undefined;
  let drawn = 0;
  let frame = 0;
  const lines = (final: boolean): string[] => {
    if (!run) return [];
    const now = Date.now();
    const spin = SPINNER[frame % SPINNER.length]!;
    const state = run.state ?? "";
    const done = FINISHED.has(state);
    const total = done ? stepDuration(run, now) : time(run.createdAt) !== undefined ? now - time(run.createdAt)! : undefined;
    const waiting = done ? "" : waitingText(run, now);
    const head = `run ${run.id}  ${target(run)}  ${done || final ? (MARK[state] ?? "") : spin} ${state}${total !== undefined ? `  ${formatDuration(total)}` : ""}${waiting ? `  ${waiting}` : ""}`;
    const steps = run.steps ?? [];
    const width = Math.max(...steps.map((s) => (s.type ?? "").length), 4);
    return [
      head,
      ...steps.map((s, i) => {
        const st = s.state ?? "";
        const mark = st === "RUNNING" ? (final ? "…" : spin) : (MARK[st] ?? " ");
        const d = stepDuration(s, now);
        return `  ${mark} ${String(i + 1).padStart(String(steps.length).length)} ${(s.type ?? "").padEnd(width)}  ${st.padEnd(9)}${d !== undefined ? `  ${formatDuration(d)}` : ""}${stepNote(s, "  ")}`;
      }),
    ];
  };
  const clear = () => {
    if (drawn > 0) out.write(`\x1b[${drawn}A\r\x1b[J`);
    drawn = 0;
  };
  const draw = (final = false) => {
    const cols = out.columns || 100;
    const ls = lines(final).map((l) => (l.length >= cols ? l.slice(0, cols - 1) : l).trimEnd());
    clear();
    if (ls.length) out.write(`${ls.join("\n")}\n`);
    drawn = ls.length;
  };
  out.write("\x1b[?25l"); // hide the cursor while redrawing
  const restore = () => out.write("\x1b[?25h");
  process.once("exit", restore);
  const timer = setInterval(() => {
    frame++;
    draw();
  }, 100);
  return {
    update(r) {
      run = r;
      draw();
    },
    note(message) {
      clear();
      process.stderr.write(`${message}\n`);
      draw();
    },
    finish() {
      clearInterval(timer);
      draw(true);
      restore();
      process.removeListener("exit", restore);
    },
  };
}

const HINTS: Record<number, string> = {
  400: "the run id is malformed: give the runId printed by runhook trigger (a UUID)",
  401: "the token is missing, unknown, expired or revoked: use the application token that triggered the run (or a project API token of the run's project)",
  403: "this token may not see the run: use an application token of a user allowed to trigger its workflow or of a project admin, or a project API token of the run's project",
  404: "no run with this id on this server: check the id and --base-url / RUNHOOK_URL",
};

const PREFIX = "runhook runs watch";

export async function runWatch(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let view: View | undefined;
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const { values, positionals, help } = parse(args, { token: { type: "string" }, "base-url": { type: "string" } }, 1);
    if (help) {
      process.stdout.write(`${WATCH_USAGE}\n`);
      return EXIT.OK;
    }
    const runId = positionals[0];
    if (!runId) throw new UsageError("give the run id");
    const base = baseUrlOf(values, env);
    const token = tokenOf(values, env, "an application token or a project API token");
    const url = `${base}/v1/runs/${encodeURIComponent(runId)}`;
    view = process.stdout.isTTY ? ttyView(process.stdout) : plainView(process.stdout);
    const run = await followRun(url, token, view, stop.signal);
    view.finish();
    view = undefined;
    return finishedExit(run);
  } catch (err) {
    view?.finish();
    return report(err, PREFIX, WATCH_USAGE);
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  }
}

/** Long-polls the run at `url`, showing each version in `view`, until it is finished; returns it then. */
async function followRun(url: string, token: string, view: View, stop: AbortSignal): Promise<RunView> {
  let version: string | undefined;
  let failures = 0;
  let failingSince = 0;
  const retry = async (why: string, waitMs: number) => {
    failures++;
    if (failures === 1) failingSince = Date.now();
    const left = GIVE_UP_MS - (Date.now() - failingSince);
    if (left <= 0)
      throw new CliError(
        `${why}; giving up after ${seconds(Date.now() - failingSince)}`,
        EXIT.UNAVAILABLE,
        "the run goes on without this watcher; watch it again later",
      );
    waitMs = Math.min(waitMs, Math.max(left, 1000));
    view.note(`${PREFIX}: ${why}; retrying in ${seconds(waitMs)}`);
    await sleep(waitMs, stop);
  };
  for (;;) {
    if (stop.aborted) throw new CliError("stopped watching (the run goes on)", EXIT.INTERRUPTED);
    const got = await tryGet(version === undefined ? url : `${url}?wait=${WAIT}&version=${encodeURIComponent(version)}`, {
      token,
      signal: stop,
      timeoutMs: 45_000,
    });
    if (!got) continue;
    if ("transient" in got) {
      await retry(got.transient, Math.max(got.retryAfterMs ?? 0, backoffMs(failures + 1)));
      continue;
    }
    const a = got.answer;
    if (a.status !== 200) throw answerError(a, HINTS[a.status]);
    failures = 0;
    // Shown as text: every string the server sent (record id, errors…) escaped once, here.
    const run = terminalSafeJson(a.json) as RunView;
    if (!run || typeof run !== "object" || typeof run.state !== "string") throw new CliError(`unexpected answer: ${a.text.slice(0, 200)}`, EXIT.ERROR);
    version = String(run.version ?? "0");
    view.update(run);
    if (FINISHED.has(run.state)) return run;
  }
}

/** OK for a run that SUCCEEDED; for one that FAILED or was CANCELLED, the error that says where and why. */
function finishedExit(run: RunView): number {
  const steps = run.steps ?? [];
  const at = steps.findIndex((s) => s.state === "FAILED" || s.state === "CANCELLED");
  const where = at >= 0 ? ` at step ${at + 1}/${steps.length} (${steps[at]!.type})` : "";
  const why = (at >= 0 ? steps[at]!.error : "") || run.error || "";
  if (run.state === "FAILED") throw new CliError(`run FAILED${where}${why ? `: ${why}` : ""}`, EXIT.RUN_FAILED);
  if (run.state === "CANCELLED") throw new CliError(`run CANCELLED${where}${why ? `: ${why}` : ""}`, EXIT.RUN_CANCELLED);
  return EXIT.OK;
}
