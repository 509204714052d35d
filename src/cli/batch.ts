// `runhook runs batch retry|cancel [filters]`: creates a run batch (RunService.CreateRunBatch,
// over the Connect protocol's JSON) for the runs the filters match — the filters of
// `runhook runs list` — and follows it (GetRunBatch) until it is finished: a progress line
// redrawn in place on a terminal, a plain line per change otherwise. Ctrl-C stops following,
// not the batch, which goes on in the server.
import {
  CliError,
  EXIT,
  EXIT_CODES_HELP,
  answerError,
  backoffMs,
  baseUrlOf,
  NetworkError,
  parse,
  report,
  request,
  seconds,
  sleep,
  str,
  terminalSafe,
  terminalSafeJson,
  tokenOf,
  UsageError,
  type Answer,
} from "./common.js";
import { FILTER_OPTIONS, queryOf } from "./list.js";

export const BATCH_USAGE = `usage: runhook runs batch retry|cancel --project P --environment E [filters] [--dry-run] [--from-failed-step]
                        [--base-url URL] [--token TOKEN]

Retries (or cancels) every run of an environment that the filters match — the filters of
runhook runs list: --workflow, --collection, --record, --state, --via, --user, --since, --until,
--finished-since, --finished-until — as one batch that the server works through in the
background, and follows it until it is finished: a progress line on a terminal, one line per
change otherwise. Ctrl-C stops following; the batch goes on (RunService.GetRunBatch follows it).

  --dry-run             count what the batch would do, and do nothing
  --from-failed-step    retry each failed run's version from its failed step
  --token TOKEN         an application token (default: $RUNHOOK_TOKEN): a project admin's acts on
                        any run, another user's on the runs that user started

Exits 0 when the batch SUCCEEDED, 10 when it FAILED and 11 when it was CANCELLED.
${EXIT_CODES_HELP}`;

const PREFIX = "runhook runs batch";
const POLL_MS = 1000;
const GIVE_UP_MS = 120_000;
const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

const OPTIONS = { ...FILTER_OPTIONS, "dry-run": { type: "boolean" }, "from-failed-step": { type: "boolean" } } as const;

/** A batch as the Connect protocol's JSON answers it (64-bit counts are strings; zero values are left out). */
interface BatchView {
  id: string;
  action?: string;
  state?: string;
  dryRun?: boolean;
  matched?: string;
  done?: string;
  skipped?: string;
  failed?: string;
  reasons?: { outcome?: string; reason?: string; count?: string; runIds?: string[] }[];
  error?: string;
}

interface BatchPlan {
  base: string;
  token: string;
  body: Record<string, unknown>;
}

/** The CreateRunBatch request of the flags: the run search's parameters, as the RPC names them. */
function createRequest(action: string, values: Record<string, string | boolean | undefined>): Record<string, unknown> {
  const q = queryOf(values);
  const filter: Record<string, unknown> = {};
  for (const name of ["workflowId", "workflowName", "collection", "recordId", "via", "userId", "finishedFrom", "finishedTo"]) {
    const v = q.get(name);
    if (v) filter[name] = v;
  }
  const states = q.get("state");
  if (states) filter.states = states.split(",");
  return {
    projectName: str(values, "project"),
    environmentName: str(values, "environment"),
    action,
    filter,
    dryRun: values["dry-run"] === true,
    fromFailedStep: values["from-failed-step"] === true,
    ...(q.get("from") ? { createdFrom: q.get("from") } : {}),
    ...(q.get("to") ? { createdTo: q.get("to") } : {}),
  };
}

function planBatch(args: string[], env: NodeJS.ProcessEnv): BatchPlan | undefined {
  const [action, ...rest] = args;
  if (action === undefined || action === "--help" || action === "-h" || action === "help") return undefined;
  if (action !== "retry" && action !== "cancel") throw new UsageError(`the action is retry or cancel, got "${action}"`);
  const { values, help } = parse(rest, OPTIONS as never, 0);
  if (help) return undefined;
  if (!str(values, "project") || !str(values, "environment")) throw new UsageError("give --project and --environment");
  if (values["from-failed-step"] === true && action !== "retry") throw new UsageError("--from-failed-step is for retry");
  return { base: baseUrlOf(values, env), token: tokenOf(values, env, "an application token"), body: createRequest(action, values) };
}

/** One RunService call over the Connect protocol's JSON. */
function call(plan: BatchPlan, method: string, body: unknown, signal?: AbortSignal): Promise<Answer> {
  return request("POST", `${plan.base}/runhook.v1.RunService/${method}`, { token: plan.token, body: JSON.stringify(body), signal, timeoutMs: 60_000 });
}

const n = (v: string | undefined) => Number(v ?? 0);

function progressText(b: BatchView): string {
  const what = b.dryRun ? `${b.action} batch (dry run)` : `${b.action} batch`;
  return `${what} ${b.id}: ${n(b.matched)} runs handled — ${n(b.done)} ${b.dryRun ? "would be done" : "done"}, ${n(b.skipped)} skipped, ${n(b.failed)} failed`;
}

/** How the batch is shown while it goes on: redrawn on a terminal, a line per change otherwise. */
function progressView(out: NodeJS.WriteStream): { show(b: BatchView): void; end(): void } {
  let last = "";
  let frame = 0;
  return out.isTTY
    ? {
        show: (b) => out.write(`\r\x1b[K${SPINNER[frame++ % SPINNER.length]} ${progressText(b)}`),
        end: () => out.write("\r\x1b[K"),
      }
    : {
        show(b) {
          const text = progressText(b);
          if (text !== last) out.write(`${text}\n`);
          last = text;
        },
        end: () => {},
      };
}

/** The batch now; transient failures (no answer, 429, 5xx) are retried with backoff for up to GIVE_UP_MS. */
async function currentBatch(plan: BatchPlan, id: string, signal: AbortSignal): Promise<BatchView> {
  let failingSince = 0;
  for (let failures = 0; ; failures++) {
    let why: string;
    try {
      const a = await call(plan, "GetRunBatch", { batchId: id }, signal);
      if (a.status === 200) return terminalSafeJson((a.json as { batch: BatchView }).batch) as BatchView;
      if (a.status !== 429 && a.status < 500) throw answerError(a);
      why = `server answered ${a.status}`;
    } catch (err) {
      if (!(err instanceof NetworkError)) throw err;
      why = err.message;
    }
    if (failures === 0) failingSince = Date.now();
    if (Date.now() - failingSince > GIVE_UP_MS) throw new CliError(`${why}; giving up after ${seconds(Date.now() - failingSince)}`, EXIT.UNAVAILABLE);
    await sleep(backoffMs(failures + 1), signal);
  }
}

function summary(b: BatchView): string {
  const lines = [`${progressText(b)}: ${b.state}${b.error ? ` (${b.error})` : ""}`];
  for (const r of b.reasons ?? []) {
    const some = (r.runIds ?? []).slice(0, 5).join(", ");
    lines.push(`  ${r.outcome} ${n(r.count)}: ${r.reason}${some ? ` (runs ${some}${n(r.count) > 5 ? ", …" : ""})` : ""}`);
  }
  return `${lines.join("\n")}\n`;
}

const EXIT_BY_STATE: Record<string, number> = { SUCCEEDED: EXIT.OK, FAILED: EXIT.RUN_FAILED, CANCELLED: EXIT.RUN_CANCELLED };

export async function runBatch(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  try {
    const plan = planBatch(args, env);
    if (!plan) {
      process.stdout.write(`${BATCH_USAGE}\n`);
      return EXIT.OK;
    }
    const created = await call(plan, "CreateRunBatch", plan.body);
    if (created.status !== 200) throw answerError(created);
    let batch = terminalSafeJson((created.json as { batch: BatchView }).batch) as BatchView;
    process.once("SIGINT", onSigint);
    const view = progressView(process.stdout);
    while (batch.state === "RUNNING" && !stop.signal.aborted) {
      view.show(batch);
      await sleep(POLL_MS, stop.signal);
      if (!stop.signal.aborted) batch = await currentBatch(plan, batch.id, stop.signal);
    }
    view.end();
    if (stop.signal.aborted) {
      process.stderr.write(`${PREFIX}: stopped following; batch ${terminalSafe(batch.id)} goes on in the server\n`);
      return EXIT.INTERRUPTED;
    }
    process.stdout.write(summary(batch));
    return EXIT_BY_STATE[batch.state ?? ""] ?? EXIT.ERROR;
  } catch (err) {
    if (stop.signal.aborted) return EXIT.INTERRUPTED;
    return report(err, PREFIX, BATCH_USAGE);
  } finally {
    process.off("SIGINT", onSigint);
  }
}
