// Structured logs that never show a secret: a token of any kind, a console session's cookie, a
// webhook key, or a secret the process is configured with. One rule says what could be a secret
// by its shape (holdsSecret): a URL is shown with every part that holds one (decoded) redacted,
// and every line the logger writes has each one, and each configured secret, replaced, whatever
// field carries it.
import { destination, pino, type DestinationStream, type Logger } from "pino";

const REDACTED = "[redacted]";
/**
 * What could be a secret, by its shape: a token of any kind runhook issues (application, project
 * API, organization API, console session) with what follows its prefix, whatever its case; or a
 * long opaque string of mixed case (a webhook key is ~75 base64url characters; a token's secret
 * part alone, 43). Ids of one case however long (UUIDs, hex trace ids, `client-<uuid>` request
 * ids) are no secret's shape.
 */
const TOKEN_SOURCE = "rh_(?:app|api|org|ses)_[A-Za-z0-9_-]*";
const TOKEN = new RegExp(TOKEN_SOURCE, "i");
const TOKENS = new RegExp(TOKEN_SOURCE, "gi");
// Runs are found first and their case judged after: a pattern that looked ahead for both cases
// would rescan a long one-case run from each position (seconds for a 16 KiB URL).
const LONG_RUNS = /[A-Za-z0-9_-]{40,}/g;
const isOpaque = (run: string) => /[a-z]/.test(run) && /[A-Z]/.test(run);

/** Whether a text (as the server reads it: escapes decoded) holds what could be a secret. */
export function holdsSecret(text: string): boolean {
  return TOKEN.test(text) || (text.match(LONG_RUNS) ?? []).some(isOpaque);
}

/** A part of a URL as the server reads it (escapes decoded), or as given when it does not decode. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/**
 * What a log line shows of a request's URL, with its secrets removed whatever their spelling
 * (escapes, case, repeated slashes). A routed request is shown by its route: a route that ends
 * in a wildcard (the webhook's key) shows `[redacted]` there. Otherwise every path segment, and
 * every query name or value, that holds a secret (decoded) is redacted.
 */
export function redactUrl(url: string, route?: string): string {
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? "" : url.slice(q + 1);
  const shownPath = route?.endsWith("*")
    ? `${route.slice(0, -1)}${REDACTED}`
    : path
        .split("/")
        .map((s) => (holdsSecret(decoded(s)) ? REDACTED : s))
        .join("/");
  const shown = (part: string) => (holdsSecret(decoded(part.replace(/\+/g, " "))) ? REDACTED : part);
  const shownQuery = query
    .split("&")
    .map((kv) => {
      const i = kv.indexOf("=");
      return i < 0 ? shown(kv) : `${shown(kv.slice(0, i))}=${shown(kv.slice(i + 1))}`;
    })
    .join("&");
  return query ? `${shownPath}?${shownQuery}` : shownPath;
}

/**
 * A log line with every spelling of each configured secret a line can hold (as given,
 * JSON-escaped, URL-encoded), then everything that could be a secret by its shape, replaced.
 */
export function lineRedactor(secrets: readonly string[]): (line: string) => string {
  const spellings = [...new Set(secrets.filter((s) => s !== "").flatMap((s) => [s, JSON.stringify(s).slice(1, -1), encodeURIComponent(s)]))];
  return (line) => {
    let out = line;
    for (const s of spellings) if (out.includes(s)) out = out.split(s).join(REDACTED);
    return out.replace(TOKENS, REDACTED).replace(LONG_RUNS, (run) => (isOpaque(run) ? REDACTED : run));
  };
}

export interface LoggerOptions {
  /** Secrets the process was configured with (the operator's bootstrap secret): never written, in any field. */
  secrets?: readonly string[];
  /** Where the lines go (default: standard output). */
  destination?: DestinationStream;
}

export function createLogger(level: string, opts: LoggerOptions = {}): Logger {
  const redact = lineRedactor(opts.secrets ?? []);
  const out = opts.destination ?? destination({ dest: process.stdout.fd ?? 1, sync: false });
  return pino(
    {
      level,
      base: { service: "runhook" },
      // Whole fields that hold a credential, whatever its shape.
      redact: { paths: ["authorization", "*.authorization", "headers.authorization", "token", "plaintext", "*.plaintext"], censor: REDACTED },
    },
    { write: (line: string) => out.write(redact(line)) },
  );
}
