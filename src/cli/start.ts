// `runhook runs start` and `runhook runs retry`: start a run on a record, or retry a finished run,
// through the public REST API (POST /v1/runs, POST /v1/runs/{runId}/retry) as the token's user.
// stdout carries only the new run's id (or, with --json, the raw answer body).
import { randomUUID } from "node:crypto";
import {
  CliError,
  EXIT,
  EXIT_CODES_HELP,
  NetworkError,
  answerError,
  baseUrlOf,
  errorBody,
  errorMessage,
  parse,
  report,
  request,
  str,
  terminalSafe,
  tokenOf,
  UsageError,
  type Answer,
  type Parsed,
} from "./common.js";
import { answerStarted, conflictError } from "./trigger.js";

const COMMON_OPTIONS_HELP = `  --idempotency-key KEY  send this Idempotency-Key (1-255 printable ASCII characters); by default a
                         fresh one is sent and printed on stderr when the call gets no answer: run the
                         command again with it to get that call's run, never a second one
  --json                 print the raw answer body on stdout, also for errors
  --base-url URL         the runhook server (default: $RUNHOOK_URL, else http://localhost:8080)
  --token TOKEN          an application token (default: $RUNHOOK_TOKEN); the run acts as its user`;

export const START_USAGE = `usage: runhook runs start --workflow ID --record R [--project P --environment E]
                        [--idempotency-key KEY] [--json] [--base-url URL] [--token TOKEN]

Starts a run of the workflow's latest active version on one record, as the token's user, with
the webhook's checks (POST /v1/runs), and prints the new run's id. Follow it with:
runhook runs watch <runId>

  --workflow ID          the workflow's id (runhook admin workflows get prints it)
  --record R             the record's primary key; composite keys packed as "a|b"
  --project P  --environment E
                         where the workflow must be (otherwise 404)
${COMMON_OPTIONS_HELP}
${EXIT_CODES_HELP}`;

export const RETRY_USAGE = `usage: runhook runs retry <runId> [--from-failed-step] [--idempotency-key KEY] [--json]
                        [--base-url URL] [--token TOKEN]

Starts a new run of a finished run's workflow on the same record, as the token's user
(POST /v1/runs/{runId}/retry), and prints the new run's id. By default the latest active
version runs from its first step; with --from-failed-step the failed run's version runs from its
failed step, and the steps before it are not run again (the new run shows them SKIPPED, done
in the run where they ran).

  --from-failed-step     start at the failed step (the run must have failed at a step, and its
                         version must still be active)
${COMMON_OPTIONS_HELP}
${EXIT_CODES_HELP}`;

const OPTIONS = {
  token: { type: "string" },
  "base-url": { type: "string" },
  json: { type: "boolean" },
  "idempotency-key": { type: "string" },
} as const;

const HINTS: Record<number, (a: Answer) => string> = {
  400: (a) =>
    /not finished|did not fail|no longer active|failed before any step/.test(errorMessage(a))
      ? "see the run with runhook runs watch <runId>; without --from-failed-step the latest active version runs from the start"
      : "check the ids given: a workflow id and a run id are UUIDs, a record id is not empty",
  401: () => "the token is missing, unknown, expired or revoked: use a valid application token (account settings; runhook admin tokens create)",
  403: () =>
    "the token's user may not start this workflow (organization, team, role allowed to trigger it, SSO), or it is a project API token: runs are started with an application token",
  404: () => "no such workflow or run in this organization (or, with --project/--environment, not there)",
};

/** POSTs `body` to `path` and explains the answer; prints the new run's id. */
async function post(prefix: string, values: Parsed["values"], env: NodeJS.ProcessEnv, path: string, body: unknown, onRecord: string): Promise<number> {
  const token = tokenOf(values, env, "an application token");
  const json = values.json === true;
  const key = str(values, "idempotency-key") ?? randomUUID();
  let a: Answer;
  try {
    a = await request("POST", `${baseUrlOf(values, env)}${path}`, {
      token,
      body: JSON.stringify(body),
      headers: { "idempotency-key": key },
      timeoutMs: 60_000,
    });
  } catch (err) {
    const retry = `run the command again with --idempotency-key '${key}' to get that call's run if it was started`;
    if (err instanceof NetworkError) throw new CliError(err.message, EXIT.UNAVAILABLE, `the run may or may not have been created; ${retry}`);
    throw err;
  }
  if (json) process.stdout.write(`${terminalSafe(a.text.trimEnd())}\n`);
  if (a.status === 202 || a.status === 429 || (a.status === 409 && errorBody(a).code !== "aborted"))
    return answerStarted(a, prefix, json, () => conflictError(a, onRecord));
  throw answerError(a, HINTS[a.status]?.(a) ?? (a.status === 409 ? "run the same command again with the same --idempotency-key" : undefined));
}

export async function runStart(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const prefix = "runhook runs start";
  try {
    const options = {
      ...OPTIONS,
      workflow: { type: "string" },
      record: { type: "string" },
      project: { type: "string" },
      environment: { type: "string" },
    } as const;
    const { values, help } = parse(args, options, 0);
    if (help) {
      process.stdout.write(`${START_USAGE}\n`);
      return EXIT.OK;
    }
    const workflowId = str(values, "workflow");
    const recordId = str(values, "record");
    if (!workflowId || recordId === undefined) throw new UsageError("give --workflow and --record");
    if (recordId === "") throw new UsageError("the record id must not be empty");
    const project = str(values, "project");
    const environment = str(values, "environment");
    if ((project === undefined) !== (environment === undefined)) throw new UsageError("give --project and --environment together, or neither");
    const path = project ? `/v1/project/${encodeURIComponent(project)}/environment/${encodeURIComponent(environment!)}/runs` : "/v1/runs";
    return await post(prefix, values, env, path, { workflowId, recordId }, `record "${recordId}"`);
  } catch (err) {
    return report(err, prefix, START_USAGE);
  }
}

export async function runRetry(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const prefix = "runhook runs retry";
  try {
    const { values, positionals, help } = parse(args, { ...OPTIONS, "from-failed-step": { type: "boolean" } } as const, 1);
    if (help) {
      process.stdout.write(`${RETRY_USAGE}\n`);
      return EXIT.OK;
    }
    const [runId] = positionals;
    if (!runId) throw new UsageError("give the id of the run to retry");
    const body = { fromFailedStep: values["from-failed-step"] === true };
    return await post(prefix, values, env, `/v1/runs/${encodeURIComponent(runId)}/retry`, body, "the run's record");
  } catch (err) {
    return report(err, prefix, RETRY_USAGE);
  }
}
