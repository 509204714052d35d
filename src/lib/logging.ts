// Structured logs that never contain tokens or webhook keys.
import { pino, type Logger } from "pino";

/** A token anywhere in a text. */
const TOKEN = /rh_(?:app|api|org)_/i;
/** A path segment that could be a secret: a token, or a long opaque string (a webhook key is ~75 characters). */
const SECRET_SEGMENT = /rh_(?:app|api|org)_|[A-Za-z0-9_-]{40,}/i;

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
 * in a wildcard (the webhook's key) shows `[redacted]` there. Otherwise every path segment that,
 * decoded, could be a key or a token is redacted. Query values holding a token are redacted.
 */
export function redactUrl(url: string, route?: string): string {
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? "" : url.slice(q + 1);
  const shownPath = route?.endsWith("*")
    ? `${route.slice(0, -1)}[redacted]`
    : path
        .split("/")
        .map((s) => (SECRET_SEGMENT.test(decoded(s)) ? "[redacted]" : s))
        .join("/");
  const shownQuery = query
    .split("&")
    .map((kv) => {
      const i = kv.indexOf("=");
      return i >= 0 && TOKEN.test(decoded(kv.slice(i + 1).replace(/\+/g, " "))) ? `${kv.slice(0, i)}=[redacted]` : TOKEN.test(decoded(kv)) ? "[redacted]" : kv;
    })
    .join("&");
  return query ? `${shownPath}?${shownQuery}` : shownPath;
}

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: "runhook" },
    redact: { paths: ["authorization", "*.authorization", "headers.authorization", "token", "plaintext", "*.plaintext"], censor: "[redacted]" },
  });
}
