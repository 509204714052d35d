// Structured logs that never contain tokens or webhook keys.
import { pino, type Logger } from "pino";

/** Removes secrets from a URL before it is logged: webhook keys and token-like query values. */
export function redactUrl(url: string): string {
  return url.replace(/\/hooks\/[^/?#]*/, "/hooks/[redacted]").replace(/rh_(app|api)_[A-Za-z0-9_-]+/g, "rh_$1_[redacted]");
}

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: "runhook" },
    redact: { paths: ["authorization", "*.authorization", "headers.authorization", "token", "plaintext", "*.plaintext"], censor: "[redacted]" },
  });
}
