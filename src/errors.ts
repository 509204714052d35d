// The one table that maps Connect codes to HTTP statuses and error bodies, and the one
// mapping of anything a handler throws to the ConnectError its caller sees (REST, webhook,
// Connect, gRPC-Web and native gRPC alike).
import { Code, ConnectError, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { isUnavailable } from "./store/errors.js";

const STATUS: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** Connect's wire names: `not_found`, `invalid_argument`, … */
export function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

export function httpStatusOf(code: Code): number {
  return STATUS[code] ?? 500;
}

/** Inverse of the table, for callers that only have an HTTP status. */
export function codeOfHttpStatus(status: number): Code {
  if (status === 413) return Code.ResourceExhausted;
  for (const [code, s] of Object.entries(STATUS)) if (s === status) return Number(code) as Code;
  return status >= 500 ? Code.Internal : Code.Unknown;
}

/** Response metadata carrying error facts to HTTP clients and gRPC trailers alike. */
export const RETRY_AFTER = "retry-after";
export const ONGOING_RUN_ID = "runhook-ongoing-run-id";

/** Retry-After (seconds) of a 503 `unavailable` while the database cannot be reached. */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

export const fail = {
  invalid: (msg: string) => new ConnectError(msg, Code.InvalidArgument),
  unauthenticated: (msg = "missing, expired or invalid bearer token") => new ConnectError(msg, Code.Unauthenticated),
  denied: (msg: string) => new ConnectError(msg, Code.PermissionDenied),
  notFound: (msg: string) => new ConnectError(msg, Code.NotFound),
  exists: (msg: string) => new ConnectError(msg, Code.AlreadyExists),
  precondition: (msg: string) => new ConnectError(msg, Code.FailedPrecondition),
  throttled: (retryAfterSeconds: number, msg = "rate limit exceeded") =>
    new ConnectError(msg, Code.ResourceExhausted, { [RETRY_AFTER]: String(retryAfterSeconds) }),
  unavailable: (msg = "the database is unavailable; retry later", cause?: unknown) =>
    new ConnectError(msg, Code.Unavailable, { [RETRY_AFTER]: String(UNAVAILABLE_RETRY_AFTER_S) }, undefined, cause),
};

/**
 * What a caller is told about anything a handler threw: a ConnectError as it is; the database
 * being unreachable (store/errors.ts isUnavailable) as UNAVAILABLE (503) with Retry-After;
 * anything else is a bug of ours, reported as INTERNAL without its message.
 */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (isUnavailable(err)) return fail.unavailable(undefined, err);
  return new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}

/** Whether toConnectError(err) reports a bug (worth an error log) rather than a refusal or an outage. */
export function isInternal(err: unknown): boolean {
  return !(err instanceof ConnectError) && !isUnavailable(err);
}

/**
 * The server interceptor of every Connect router (gateway and native gRPC): errors of unary
 * calls and of streams, at any point, go out as toConnectError makes them; bugs are reported
 * to `onInternal` first.
 */
export function errorInterceptor(onInternal: (err: unknown, procedure: string, values: ContextValues) => void): Interceptor {
  return (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const map = (err: unknown): ConnectError => {
      // Connect's own translation of a client's cancellation (AbortError) is kept.
      if (err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError")) return ConnectError.from(err);
      if (isInternal(err)) onInternal(err, procedure, req.contextValues);
      return toConnectError(err);
    };
    let res;
    try {
      res = await next(req);
    } catch (err) {
      throw map(err);
    }
    if (!res.stream) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* messages;
        } catch (err) {
          throw map(err);
        }
      })(),
    };
  };
}

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: { error: string; code: string; runId?: string };
}

/** Turns anything thrown by a handler into the gateway's error answer. */
export function toHttpError(err: unknown): HttpError {
  // Anything that is neither a ConnectError nor an outage is a bug of ours: `internal`, never its message.
  const ce = toConnectError(err);
  const headers: Record<string, string> = {};
  const retryAfter = ce.metadata.get(RETRY_AFTER);
  if (retryAfter) headers["retry-after"] = retryAfter;
  const body: HttpError["body"] = {
    error: ce.code === Code.Internal || ce.code === Code.Unknown ? "internal error" : ce.rawMessage,
    code: codeName(ce.code),
  };
  const runId = ce.metadata.get(ONGOING_RUN_ID);
  if (runId) body.runId = runId;
  return { status: httpStatusOf(ce.code), headers, body };
}
