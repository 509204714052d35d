// The one table that maps Connect codes to HTTP statuses and error bodies.
import { Code, ConnectError } from "@connectrpc/connect";

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

export const fail = {
  invalid: (msg: string) => new ConnectError(msg, Code.InvalidArgument),
  unauthenticated: (msg = "missing, expired or invalid bearer token") => new ConnectError(msg, Code.Unauthenticated),
  denied: (msg: string) => new ConnectError(msg, Code.PermissionDenied),
  notFound: (msg: string) => new ConnectError(msg, Code.NotFound),
  exists: (msg: string) => new ConnectError(msg, Code.AlreadyExists),
  precondition: (msg: string) => new ConnectError(msg, Code.FailedPrecondition),
  throttled: (retryAfterSeconds: number, msg = "rate limit exceeded") =>
    new ConnectError(msg, Code.ResourceExhausted, { [RETRY_AFTER]: String(retryAfterSeconds) }),
};

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: { error: string; code: string; runId?: string };
}

/** Turns anything thrown by a handler into the gateway's error answer. */
export function toHttpError(err: unknown): HttpError {
  // Anything that is not a ConnectError is a bug of ours: report `internal`, never its message.
  const ce = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
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
