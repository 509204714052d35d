// `runhook trigger <webhook-url> <record-id>`: POST the webhook as any integrator does and
// explain the answer. stdout carries only the run id (or, with --json, the raw answer body).
import { randomUUID } from "node:crypto";
import {
  CliError,
  EXIT,
  EXIT_CODES_HELP,
  NetworkError,
  answerError,
  errorBody,
  errorMessage,
  parse,
  report,
  request,
  retryAfterMs,
  seconds,
  tokenOf,
  terminalSafe,
  UsageError,
  type Answer,
} from "./common.js";

export const TRIGGER_USAGE = `usage: runhook trigger <webhook-url> <record-id> [--token TOKEN] [--idempotency-key KEY | --no-idempotency-key] [--json]

Starts a run of the webhook's workflow on one record (POST <webhook-url> {"record_id": …})
and prints the new run's id. Follow it with: runhook runs watch <runId>

  <webhook-url>    the URL from the workflow's trigger settings (a credential: never build it)
  <record-id>      the record's primary key; composite keys packed as "a|b" ("\\|" for a literal |)
  --token TOKEN    application token (default: $RUNHOOK_TOKEN); the run acts as its user
  --idempotency-key KEY
                   send this Idempotency-Key (1-255 printable ASCII characters); by default a
                   fresh random one is sent and printed on stderr when the call gets no answer:
                   run the command again with it to get that call's run, never a second one
  --no-idempotency-key
                   send none: after the run finished, a repeat starts a new run
  --json           print the raw answer body on stdout, also for errors

An answer that repeats an earlier call with the same key says so on stderr ("replayed").
On an error the message and its usual cause go to stderr: 409 names the run already ongoing
on the record, 429 says how long to wait (Retry-After).
${EXIT_CODES_HELP}`;

const HINTS: Record<number, (a: Answer, token: string) => string> = {
  400: (a) => {
    const m = errorMessage(a);
    if (/superseded|regenerated/i.test(m))
      return "the webhook URL was regenerated and this one no longer works: copy the new URL from the workflow's trigger settings (runhook admin workflows get --workflow <id> prints webhook.url)";
    if (/Idempotency-Key was already used/i.test(m))
      return "this key was used for a call on another record: give a new --idempotency-key, or leave it out for a fresh one";
    if (/Idempotency-Key/i.test(m)) return "give an --idempotency-key of 1 to 255 printable ASCII characters (letters, digits, punctuation)";
    if (/record_id|body|json/i.test(m)) return "the request body was refused: give a non-empty record id";
    return "the webhook URL is malformed, truncated or was altered: copy it again, whole, from the workflow's trigger settings";
  },
  401: (_a, token) =>
    token.startsWith("rh_api_")
      ? "this is a project API token (rh_api_…); the webhook needs an application token (rh_app_…) from the user's account settings (runhook admin tokens create)"
      : "the token is missing, unknown, expired or revoked: use a valid application token (account settings; runhook admin tokens create)",
  403: () =>
    "the token's user may not trigger this workflow: check that they belong to the organization, have a role on the project, are in the rendering's team (admins always are) and have a role allowed to trigger it; an SSO project needs a token generated in an SSO session",
  404: (a) => {
    const m = errorMessage(a);
    if (/disabled/i.test(m))
      return "the workflow's webhook trigger is disabled; an editor can enable it again (runhook admin webhook enable --workflow <id>) and the URL stays the same";
    if (/active/i.test(m)) return "the workflow has no active version for this rendering: publish one (runhook admin workflows publish)";
    return "no webhook answers at this URL: the workflow was deleted, or the URL belongs to another server";
  },
  413: () => "the request body is larger than the server accepts: use a shorter record id",
};

/** The key to send: --idempotency-key, none with --no-idempotency-key, else a fresh one. */
function idempotencyKeyOf(values: Record<string, unknown>): string | undefined {
  const given = values["idempotency-key"];
  if (typeof given === "string" && values["no-idempotency-key"] === true)
    throw new UsageError("give either --idempotency-key or --no-idempotency-key, not both");
  if (typeof given === "string") return given;
  return values["no-idempotency-key"] === true ? undefined : randomUUID();
}

/** A 409: the run already ongoing on the record, or the first call with the key still being answered. */
export function conflictError(a: Answer, onRecord: string): CliError {
  const body = errorBody(a);
  if (body.code === "aborted") {
    return new CliError(
      `${errorMessage(a)} (409)`,
      EXIT.ALREADY_RUNNING,
      "this call started nothing; run the same command again with the same --idempotency-key",
    );
  }
  const ongoing = body.runId;
  return new CliError(
    `a run of this workflow is already ongoing on ${onRecord}${ongoing ? `: ${ongoing}` : ""}`,
    EXIT.ALREADY_RUNNING,
    ongoing
      ? `nothing was started. Follow the ongoing run with: runhook runs watch ${ongoing}\ntrigger again once it has finished`
      : "nothing was started; trigger again once the ongoing run has finished",
  );
}

/**
 * The answer of a call that starts a run (the webhook, POST …/runs, …/retry): 202 prints the run id
 * (says so on stderr when it was replayed); 409 is `conflict()`; 429 says how long to wait.
 */
export function answerStarted(a: Answer, prefix: string, json: boolean, conflict: () => CliError): number {
  if (a.status === 202) {
    const runId = (a.json as { runId?: unknown } | undefined)?.runId;
    if (typeof runId !== "string") throw new CliError(`unexpected answer 202 ${a.text.slice(0, 200)}`, EXIT.ERROR);
    if (!json) process.stdout.write(`${runId}\n`);
    if (a.headers.get("idempotent-replayed") === "true")
      process.stderr.write(`${prefix}: replayed: an earlier call with this idempotency key started run ${runId}; nothing new was started\n`);
    return EXIT.OK;
  }
  if (a.status === 409) throw conflict();
  const wait = retryAfterMs(a.headers);
  throw new CliError(
    `rate limited (429): ${wait !== undefined ? `retry in ${seconds(wait)} (Retry-After: ${a.headers.get("retry-after")})` : "retry later"}`,
    EXIT.RATE_LIMITED,
    /ongoing runs/.test(errorMessage(a))
      ? "the project has as many ongoing runs as it may have: retry once some have finished"
      : "each webhook accepts a limited number of calls per minute (60 by default); a caller that waits Retry-After is accepted",
  );
}

export async function runTrigger(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const prefix = "runhook trigger";
  try {
    const options = {
      token: { type: "string" },
      json: { type: "boolean" },
      "idempotency-key": { type: "string" },
      "no-idempotency-key": { type: "boolean" },
    } as const;
    const { values, positionals, help } = parse(args, options, 2);
    if (help) {
      process.stdout.write(`${TRIGGER_USAGE}\n`);
      return EXIT.OK;
    }
    const [url, recordId] = positionals;
    if (!url || recordId === undefined) throw new UsageError("give the webhook URL and the record id");
    if (recordId === "") throw new UsageError("the record id must not be empty");
    if (!/^https?:\/\//i.test(url)) throw new UsageError(`"${url}" is not an http(s) URL: copy the webhook URL from the workflow's trigger settings`);
    const token = tokenOf(values, env, "an application token");
    const json = values.json === true;
    const key = idempotencyKeyOf(values);
    const retry =
      key === undefined
        ? "retrying is safe (you get 202, or 409 with the run already ongoing)"
        : `retry with --idempotency-key '${key}' to get that call's run if it was started`;

    let a: Answer;
    try {
      a = await request("POST", url, {
        token,
        body: JSON.stringify({ record_id: recordId }),
        headers: key === undefined ? {} : { "idempotency-key": key },
        timeoutMs: 60_000,
      });
    } catch (err) {
      if (err instanceof NetworkError) throw new CliError(err.message, EXIT.UNAVAILABLE, `the run may or may not have been created; ${retry}`);
      throw err;
    }
    if (json) process.stdout.write(`${terminalSafe(a.text.trimEnd())}\n`);

    if (a.status === 202 || a.status === 409 || a.status === 429) return answerStarted(a, prefix, json, () => conflictError(a, `record "${recordId}"`));
    const hint = HINTS[a.status]?.(a, token) ?? (a.status >= 500 ? `a server error: ${retry}` : undefined);
    throw answerError(a, hint);
  } catch (err) {
    return report(err, prefix, TRIGGER_USAGE);
  }
}
