// Shared by the integrator commands (`trigger`, `runs watch`, `logs tail`): argument parsing,
// exit codes, HTTP over the built-in fetch, Retry-After and backoff. These commands use the
// public REST API exactly as any integrator does: nothing here (or in what it imports) may
// reach the database, `mongodb` or the server's configuration (src/config.ts).
import { sleep as plainSleep, sleepUnlessAborted } from "../lib/sleep.js";
import { parseArgs, type ParseArgsConfig } from "node:util";

/** Exit codes of the integrator commands (docs/integrators.md: "Command line for integrators"). */
export const EXIT = {
  OK: 0,
  /** An answer the command does not understand, or any other unexpected failure. */
  ERROR: 1,
  /** Bad or missing arguments, no token. */
  USAGE: 2,
  /** Server unreachable, or it answered 5xx (after the retries of `runs watch`). */
  UNAVAILABLE: 3,
  BAD_REQUEST: 4, // 400 (and 413)
  UNAUTHENTICATED: 5, // 401
  PERMISSION_DENIED: 6, // 403
  NOT_FOUND: 7, // 404
  /** trigger: a run is already ongoing on the record (409); its id is printed. */
  ALREADY_RUNNING: 8,
  /** trigger: rate limited (429); the wait is printed. */
  RATE_LIMITED: 9,
  /** runs watch: the run FAILED. */
  RUN_FAILED: 10,
  /** runs watch: the run was CANCELLED. */
  RUN_CANCELLED: 11,
  /** logs verify: the export does not match its digests. */
  VERIFY_FAILED: 12,
  /** A second Ctrl-C (or `runs watch` interrupted): 128 + SIGINT. */
  INTERRUPTED: 130,
} as const;

export const EXIT_CODES_HELP = `exit codes: 0 ok, 1 unexpected answer, 2 usage, 3 server unreachable or 5xx, 4 bad request (400),
  5 bad token (401), 6 not allowed (403), 7 not found (404), 8 run already ongoing (409),
  9 rate limited (429), 10 run FAILED, 11 run CANCELLED, 12 log export not verified, 130 interrupted`;

export const DEFAULT_BASE_URL = "http://localhost:8080";
const USER_AGENT = "runhook-cli/0.1";

export class UsageError extends Error {}

/** A failure that ends the command with `code` after printing `message` (and `hint`) on stderr. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly hint?: string,
  ) {
    super(message);
  }
}

type Options = NonNullable<ParseArgsConfig["options"]>;

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  help: boolean;
}

/** Strict parsing: unknown flags, missing values and stray words are usage errors. */
export function parse(args: string[], options: Options, maxPositionals: number): Parsed {
  let out: ReturnType<typeof parseArgs>;
  try {
    out = parseArgs({ args, options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message.split("\n")[0]!.replace(/\. To specify a positional argument.*$/, "") : String(err));
  }
  const values = out.values as Parsed["values"];
  if (out.positionals.length > maxPositionals && !values.help) throw new UsageError(`unexpected argument "${out.positionals[maxPositionals]}"`);
  return { values, positionals: out.positionals, help: values.help === true };
}

export function str(values: Parsed["values"], name: string): string | undefined {
  const v = values[name];
  return typeof v === "string" ? v : undefined;
}

/** `--token` or RUNHOOK_TOKEN. */
export function tokenOf(values: Parsed["values"], env: NodeJS.ProcessEnv, kind: string): string {
  const t = str(values, "token") ?? env.RUNHOOK_TOKEN;
  if (!t) throw new UsageError(`no token: set RUNHOOK_TOKEN or pass --token (${kind})`);
  return t;
}

/** `--base-url`, RUNHOOK_URL, or http://localhost:8080; without a trailing slash. */
export function baseUrlOf(values: Parsed["values"], env: NodeJS.ProcessEnv): string {
  const raw = str(values, "base-url") ?? (env.RUNHOOK_URL || DEFAULT_BASE_URL);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new UsageError(`base URL "${raw}" is not a URL`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new UsageError(`base URL "${raw}" must be http(s)`);
  return raw.replace(/\/+$/, "");
}

export interface Answer {
  status: number;
  headers: Headers;
  /** The raw body text. */
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

/**
 * Characters a terminal would act on instead of showing: C0 and C1 controls, DEL, line and
 * paragraph separators, bidirectional overrides. A record id, a step error or any other
 * string a tenant wrote could otherwise move the cursor, rewrite the screen or set the
 * clipboard (OSC 52).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this strips
const TERMINAL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * The one escaping of what runhook prints: each such character as `\uXXXX`. Applied to JSON
 * text it keeps it valid JSON that parses to the same value (JSON.stringify already escaped
 * the C0 controls; the rest is only ever inside strings).
 */
export function terminalSafe(s: string): string {
  return s.replace(TERMINAL_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Every string of a JSON value, made terminal-safe (an answer about to be shown as text). */
export function terminalSafeJson(v: unknown): unknown {
  if (typeof v === "string") return terminalSafe(v);
  if (Array.isArray(v)) return v.map(terminalSafeJson);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [terminalSafe(k), terminalSafeJson(x)]));
  return v;
}

/** The `{"code", "message", "error", …}` body of an error answer, as far as present. */
export function errorBody(a: Answer): { message?: string; error?: string; code?: string; runId?: string } {
  const j = a.json;
  return j && typeof j === "object" && !Array.isArray(j) ? (j as { message?: string; error?: string; code?: string; runId?: string }) : {};
}

export function errorMessage(a: Answer): string {
  const b = errorBody(a);
  return b.message ?? b.error ?? (a.text.trim().slice(0, 200) || `HTTP ${a.status}`);
}

/** A network-level failure (no HTTP answer): connection refused, reset, timeout. */
export class NetworkError extends Error {}

/** One request; throws NetworkError when no answer arrives, or the abort reason when `signal` fires. */
export async function request(
  method: string,
  url: string,
  opts: { token?: string; body?: string; headers?: Record<string, string>; signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { "user-agent": USER_AGENT, accept: "application/json", ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const signals = [opts.signal, opts.timeoutMs ? AbortSignal.timeout(opts.timeoutMs) : undefined].filter((s): s is AbortSignal => s !== undefined);
  const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  try {
    const res = await fetch(url, { method, headers, body: opts.body, signal });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  } catch (err) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const why = (err as Error).name === "TimeoutError" ? "timed out" : (cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err)));
    throw new NetworkError(`could not reach ${new URL(url).origin}: ${why}`);
  }
}

/** A GET's outcome: an answer to act on, or a transient failure (no answer, 429, 5xx) to retry by the caller's policy. */
export type Attempt = { answer: Answer } | { transient: string /** Retry-After of a 429. */; retryAfterMs?: number };

/** One GET, its transient failures told apart from answers; undefined when `signal` stopped it. */
export async function tryGet(url: string, opts: { token: string; signal: AbortSignal; timeoutMs: number }): Promise<Attempt | undefined> {
  let a: Answer;
  try {
    a = await request("GET", url, opts);
  } catch (err) {
    if (opts.signal.aborted) return undefined;
    if (!(err instanceof NetworkError)) throw err;
    return { transient: err.message };
  }
  if (a.status === 429) return { transient: "rate limited (429)", retryAfterMs: retryAfterMs(a.headers) };
  if (a.status >= 500) return { transient: `server error ${a.status}: ${errorMessage(a)}` };
  return { answer: a };
}

/** `Retry-After` in milliseconds (delta-seconds or an HTTP date); undefined when absent or bad. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const raw = headers.get("retry-after");
  if (raw === null || raw.trim() === "") return undefined;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim()) * 1000;
  const t = Date.parse(raw);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

/** Exponential backoff with jitter for the `attempt`-th consecutive failure (1, 2, …): 1 s, 2 s, 4 s … capped at 60 s, each drawn from [d/2, d]. */
export function backoffMs(attempt: number, baseMs = 1000, capMs = 60_000): number {
  const d = Math.min(capMs, baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 30)));
  return d / 2 + Math.random() * (d / 2);
}

/** Waits `ms`, or less when `signal` aborts (without throwing). */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await (signal ? sleepUnlessAborted(ms, signal) : plainSleep(ms));
}

export function seconds(ms: number): string {
  return `${Math.max(1, Math.ceil(ms / 1000))} s`;
}

const EXIT_BY_STATUS: Readonly<Record<number, number>> = {
  400: EXIT.BAD_REQUEST,
  413: EXIT.BAD_REQUEST,
  401: EXIT.UNAUTHENTICATED,
  403: EXIT.PERMISSION_DENIED,
  404: EXIT.NOT_FOUND,
  409: EXIT.ALREADY_RUNNING,
  429: EXIT.RATE_LIMITED,
};

/** The exit code for an error answer of the server. */
export function statusExit(status: number): number {
  return EXIT_BY_STATUS[status] ?? (status >= 500 ? EXIT.UNAVAILABLE : EXIT.ERROR);
}

/** The error that ends a command on an answer it cannot go on from: status, code and message, with the command's hint. */
export function answerError(a: Answer, hint?: string): CliError {
  const code = errorBody(a).code;
  return new CliError(`${a.status} ${code ?? ""}${code ? ": " : ""}${errorMessage(a)}`, statusExit(a.status), hint);
}

/** Prints a CliError or UsageError (with the command's usage) and returns the exit code. */
export function report(err: unknown, prefix: string, usage: string): number {
  if (err instanceof Error) err.message = terminalSafe(err.message);
  if (err instanceof UsageError) {
    process.stderr.write(`${prefix}: ${err.message}\n${usage.split("\n")[0]}\n(${prefix} --help for more)\n`);
    return EXIT.USAGE;
  }
  if (err instanceof CliError) {
    process.stderr.write(`${prefix}: ${err.message}\n${err.hint ? `  ${err.hint.replace(/\n/g, "\n  ")}\n` : ""}`);
    return err.code;
  }
  if (err instanceof NetworkError) {
    process.stderr.write(`${prefix}: ${err.message}\n  is the server running? check --base-url / RUNHOOK_URL\n`);
    return EXIT.UNAVAILABLE;
  }
  process.stderr.write(`${prefix}: ${err instanceof Error ? err.message : String(err)}\n`);
  return EXIT.ERROR;
}

/** Rows of cells as text columns, each as wide as its widest cell (the last one unpadded); one line a row. */
export function alignedRows(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
