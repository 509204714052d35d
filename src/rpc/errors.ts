// The one error table: what a caller is told about anything a handler threw, over every entry
// point (REST, webhook, Connect, gRPC-Web and native gRPC alike). A DomainError becomes its
// Connect code (with its facts as metadata and details), and every Connect code its HTTP
// status and `{error, code}` body.
import { Code, ConnectError, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { OngoingRunSchema } from "../../gen/runhook/v1/trigger_pb.js";
import { DomainError, fail, type DomainErrorKind } from "../domain/errors.js";
import { isDatabaseFull, isUnavailable } from "../store/errors.js";

const CODE: Record<DomainErrorKind, Code> = {
  invalid: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  denied: Code.PermissionDenied,
  notFound: Code.NotFound,
  exists: Code.AlreadyExists,
  precondition: Code.FailedPrecondition,
  aborted: Code.Aborted,
  throttled: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
};

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

/** Response metadata carrying error facts to HTTP clients and gRPC trailers alike. */
export const RETRY_AFTER = "retry-after";
export const ONGOING_RUN_ID = "runhook-ongoing-run-id";

/** Retry-After (seconds) of a 503 `unavailable` while the database cannot be reached. */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/**
 * A write the database refused for want of room: 503 `unavailable` as an outage is, with a
 * longer Retry-After (room comes from an operator, or from retention's next sweep).
 */
export const DATABASE_FULL_RETRY_AFTER_S = 30;
export const DATABASE_FULL_MESSAGE = "the database is full: retry later";

function databaseFull(cause: unknown): DomainError {
  return new DomainError("unavailable", DATABASE_FULL_MESSAGE, { retryAfterSeconds: DATABASE_FULL_RETRY_AFTER_S }, { cause });
}

/** A refusal as Connect tells it: its code, message, metadata (retry-after, the ongoing run's id) and details. */
function connectErrorOf(err: DomainError): ConnectError {
  const metadata: Record<string, string> = {};
  const { retryAfterSeconds, ongoingRunId } = err.facts;
  if (err.kind === "unavailable") metadata[RETRY_AFTER] = String(UNAVAILABLE_RETRY_AFTER_S);
  if (retryAfterSeconds !== undefined) metadata[RETRY_AFTER] = String(retryAfterSeconds);
  if (ongoingRunId !== undefined) metadata[ONGOING_RUN_ID] = ongoingRunId;
  const details = ongoingRunId === undefined ? undefined : [{ desc: OngoingRunSchema, value: { runId: ongoingRunId } }];
  return new ConnectError(err.message, CODE[err.kind], metadata, details, err.cause);
}

/**
 * What a caller is told about anything a handler threw: a ConnectError as it is; a DomainError
 * by the table; the database being full (store/errors.ts isDatabaseFull) or unreachable
 * (isUnavailable) as UNAVAILABLE (503) with Retry-After, each in its words; anything else is a
 * bug of ours, reported as INTERNAL without its message.
 */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof DomainError) return connectErrorOf(err);
  if (isDatabaseFull(err)) return connectErrorOf(databaseFull(err));
  if (isUnavailable(err)) return connectErrorOf(fail.unavailable(undefined, err));
  return new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}

/** Whether toConnectError(err) reports a bug (worth an error log) rather than a refusal, an outage or a full database. */
export function isInternal(err: unknown): boolean {
  return !(err instanceof ConnectError) && !(err instanceof DomainError) && !isUnavailable(err);
}

/** The Connect code toConnectError(err) answers with, without building its error. */
export function codeOf(err: unknown): Code {
  if (err instanceof ConnectError) return err.code;
  if (err instanceof DomainError) return CODE[err.kind];
  return isUnavailable(err) ? Code.Unavailable : Code.Internal;
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
    let res: Awaited<ReturnType<typeof next>>;
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

/**
 * Every error body of the gateway: `code` and `message` as the public API's published document
 * has them, and `error` (the same message) as the webhook's contract has it.
 */
export interface ErrorBody {
  code: string;
  message: string;
  error: string;
  runId?: string;
}

export function errorBody(code: string, message: string): ErrorBody {
  return { code, message, error: message };
}

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: ErrorBody;
}

/** Turns anything thrown by a handler into the gateway's error answer. */
export function toHttpError(err: unknown): HttpError {
  // Anything that is neither a refusal nor an outage is a bug of ours: `internal`, never its message.
  const ce = toConnectError(err);
  const headers: Record<string, string> = {};
  const retryAfter = ce.metadata.get(RETRY_AFTER);
  if (retryAfter) headers["retry-after"] = retryAfter;
  const body = errorBody(codeName(ce.code), ce.code === Code.Internal || ce.code === Code.Unknown ? "internal error" : ce.rawMessage);
  const runId = ce.metadata.get(ONGOING_RUN_ID);
  if (runId) body.runId = runId;
  return { status: httpStatusOf(ce.code), headers, body };
}
