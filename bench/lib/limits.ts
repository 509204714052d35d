// The limits a runhook server puts on its callers, as the benchmark meets them. A load phase
// that meets one measures the limit, not runhook: every runhook process of the bench runs with
// each limit set out of reach (serverEnv), the limiters still running on every call, and an
// answer that is a limit's refusal (HTTP 429, gRPC RESOURCE_EXHAUSTED) fails its scenario with
// the limit's name instead of leaving a partial figure behind.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./procs.js";

/**
 * Every limit variable of the server (src/config.ts) at the highest value it takes: a project's
 * ongoing runs, a token's calls a minute, an hour and a day, an organization's calls a minute,
 * failed authentications per address, and a new webhook's rate (benchWorld sets each webhook's
 * own higher still).
 */
export const LIMITS_OUT_OF_REACH: Readonly<Record<string, string>> = {
  RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT: "100000000",
  RUNHOOK_WEBHOOK_RATE_LIMIT: "1000000",
  RUNHOOK_API_RATE_LIMIT: "1000000",
  RUNHOOK_API_RATE_LIMIT_HOURLY: "60000000",
  RUNHOOK_API_RATE_LIMIT_DAILY: "1440000000",
  RUNHOOK_ORG_API_RATE_LIMIT: "1000000",
  RUNHOOK_ORG_API_RATE_LIMIT_HOURLY: "60000000",
  RUNHOOK_ORG_API_RATE_LIMIT_DAILY: "1440000000",
  RUNHOOK_ADMIN_RATE_LIMIT: "1000000",
  RUNHOOK_ADMIN_ORG_RATE_LIMIT: "1000000",
  RUNHOOK_AUTH_FAILURE_LIMIT: "1000000",
};

/** A webhook's own rate limit a minute (a workflow's setting, which benchWorld sets): above the API's maximum. */
export const WEBHOOK_RATE_LIMIT_PER_MINUTE = 10_000_000;

/** Limit variables the bench leaves as they are, and why no scenario can meet them. */
const NOT_MET: Readonly<Record<string, string>> = {
  RUNHOOK_BODY_LIMIT_BYTES: "every body the bench sends is under 1 KB",
};

/**
 * The server's limit variables (named *_LIMIT* in src/config.ts) that the bench neither sets
 * out of reach nor knows it cannot meet: a limit added to the server and not to the bench.
 */
export function limitsNotCovered(): string[] {
  const names = readFileSync(join(ROOT, "src/config.ts"), "utf8").match(/RUNHOOK_[A-Z0-9_]*LIMIT[A-Z0-9_]*/g) ?? [];
  return [...new Set(names)].filter((n) => !(n in LIMITS_OUT_OF_REACH) && !(n in NOT_MET)).sort();
}

/** A scenario met a limit: its figures would be the limit's, so it has none. */
export class LimitMet extends Error {
  override readonly name = "LimitMet";

  constructor(
    readonly limit: string,
    refusal: string,
  ) {
    super(
      `met ${limit}: "${refusal.slice(0, 300)}"; the bench sets its limits out of reach (bench/lib/limits.ts), so a figure measured against one would be partial`,
    );
  }
}

/** The limit a refusal's message names (the server's wording of each). */
export function limitOf(message: string): string {
  if (/ongoing runs, its limit/.test(message)) return "RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT (the project's ongoing runs)";
  if (/exceeded for this webhook/.test(message)) return "the webhook's rate limit (its workflow's rateLimitPerMinute, set by benchWorld)";
  if (/failed authentications/.test(message)) return "RUNHOOK_AUTH_FAILURE_LIMIT (failed authentications per address)";
  const [, limit, per] = /rate limit of (\d+) requests per (minute|hour|day)/.exec(message) ?? [];
  if (limit !== undefined) {
    const window = `${per === "hour" ? "an" : "a"} ${per}`;
    const set = Object.entries(LIMITS_OUT_OF_REACH).filter(([, v]) => v === limit);
    return set.length
      ? `a rate limit of ${limit} ${window} (${set.map(([k]) => k).join(" or ")})`
      : `a rate limit of ${limit} ${window} that the bench does not set (a token's console sign-ins, or a new one)`;
  }
  return "a limit the bench does not know";
}

/** The LimitMet of an HTTP answer that is a limit's refusal (429; `body` is its text), else undefined. */
export function httpLimitMet(status: number, body: string): LimitMet | undefined {
  if (status !== 429) return undefined;
  let message = body;
  try {
    message = String((JSON.parse(body) as { error?: unknown }).error ?? body);
  } catch {
    /* not JSON: the text as it is */
  }
  return new LimitMet(limitOf(message), message);
}

/** A grpc-message as sent (percent-encoded; grpc-js leaves %2C and the like as they are), decoded where it can be. */
function percentDecoded(message: string): string {
  try {
    return decodeURIComponent(message);
  } catch {
    return message;
  }
}

/** gRPC's RESOURCE_EXHAUSTED (Connect's resource_exhausted has the same number). */
const RESOURCE_EXHAUSTED = 8;

/** The LimitMet of a gRPC error that is a limit's refusal (RESOURCE_EXHAUSTED), else undefined; `whose` names a server other than runhook. */
export function grpcLimitMet(err: { code?: number | string; details?: string } | null | undefined, whose?: string): LimitMet | undefined {
  if (!err || Number(err.code) !== RESOURCE_EXHAUSTED) return undefined;
  const message = percentDecoded(err.details ?? "");
  return new LimitMet(whose ? `${whose}'s limit` : limitOf(message), message);
}
