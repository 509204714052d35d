// The refusals of the rules, named by what they mean and free of any transport: the edge
// (rpc/errors.ts, the one error table) turns each into its Connect code, metadata and HTTP answer.
// Domain code, the services and the worker throw and catch only these.

export type DomainErrorKind =
  | "invalid"
  | "unauthenticated"
  | "denied"
  | "notFound"
  /** Already exists; `ongoingRunId` names the run that holds the slot, when there is one. */
  | "exists"
  /** A state the call needs does not hold (a full note, a reused idempotency key). */
  | "precondition"
  /** Lost a race with a concurrent change: the same call may succeed when retried. */
  | "aborted"
  /** Over a rate limit; `retryAfterSeconds` says when to retry. */
  | "throttled"
  /** A dependency (the database) cannot be reached: retry later. */
  | "unavailable";

export class DomainError extends Error {
  override readonly name = "DomainError";

  constructor(
    readonly kind: DomainErrorKind,
    message: string,
    readonly facts: { retryAfterSeconds?: number; ongoingRunId?: string } = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const fail = {
  invalid: (msg: string) => new DomainError("invalid", msg),
  unauthenticated: (msg = "missing, expired or invalid bearer token") => new DomainError("unauthenticated", msg),
  denied: (msg: string) => new DomainError("denied", msg),
  notFound: (msg: string) => new DomainError("notFound", msg),
  exists: (msg: string, ongoingRunId?: string) => new DomainError("exists", msg, ongoingRunId === undefined ? {} : { ongoingRunId }),
  precondition: (msg: string) => new DomainError("precondition", msg),
  aborted: (msg: string) => new DomainError("aborted", msg),
  throttled: (retryAfterSeconds: number, msg = "rate limit exceeded") => new DomainError("throttled", msg, { retryAfterSeconds }),
  unavailable: (msg = "the database is unavailable; retry later", cause?: unknown) => new DomainError("unavailable", msg, {}, { cause }),
};

/** Whether `err` is the refusal `kind`. */
export function isDomainError(err: unknown, kind?: DomainErrorKind): err is DomainError {
  return err instanceof DomainError && (kind === undefined || err.kind === kind);
}
