// Telling database failures apart, without the driver's classes leaking out of the store.
import {
  MongoBulkWriteError,
  MongoClientClosedError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerClosedError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from "mongodb";

/** The server stopped an operation at its time limit (maxTimeMS: MaxTimeMSExpired). */
export function isTimeLimitExceeded(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 50;
}

/** A unique index refused the write (E11000). */
export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

/**
 * Server answers that mean "not now, this server cannot serve you" (shutting down, stepped
 * down, not primary, lost its own network) rather than "this operation is wrong".
 */
const UNAVAILABLE_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  64, // WriteConcernFailed: the write concern's members did not confirm within wtimeoutMS (connection.ts)
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  9001, // SocketException
  10058, // LegacyNotPrimary
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/**
 * Socket errors the driver sometimes lets through unwrapped — seen: a plain `Error` with code
 * EPIPE ("This socket has been ended by the other party") from a write to a connection the
 * server had just closed. runhook's handlers open no other sockets, so these come from the driver.
 */
const SOCKET_ERRORS = new Set([
  "EPIPE",
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "ENOTCONN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_WRITE_AFTER_END",
]);

/**
 * The database could not be reached: the operation may succeed later. What an outage
 * produces (measured against a stopped server, test/crash/db-outage.test.ts): operations in flight
 * when it goes fail at once with MongoNetworkError (connection closed; MongoPoolClearedError,
 * a subclass, for those queued in the pool; or a raw EPIPE, above), later ones with
 * MongoServerSelectionError after serverSelectionTimeoutMS (RUNHOOK_DB_TIMEOUT_MS). A failover
 * answers with the server codes above; a client closed by our own shutdown with the *Closed /
 * NotConnected errors.
 */
export function isUnavailable(err: unknown): boolean {
  // A grouped insert (insertMany) that never reached the server: the bulk error wraps the cause.
  if (err instanceof MongoBulkWriteError && !(err.writeErrors as unknown[] | undefined)?.length) {
    const cause = (err as { errorResponse?: unknown }).errorResponse ?? err.cause;
    if (cause !== err && cause instanceof Error) return isUnavailable(cause);
  }
  if (err instanceof MongoNetworkError || err instanceof MongoServerSelectionError) return true;
  if (err instanceof Error && SOCKET_ERRORS.has((err as NodeJS.ErrnoException).code ?? "")) return true;
  if (
    err instanceof MongoTopologyClosedError ||
    err instanceof MongoClientClosedError ||
    err instanceof MongoNotConnectedError ||
    err instanceof MongoServerClosedError
  )
    return true;
  return err instanceof MongoServerError && typeof err.code === "number" && UNAVAILABLE_CODES.has(err.code);
}

/** The driver's error classes behind the failures above, for tests that build them. */
export { MongoBulkWriteError, MongoNetworkError, MongoServerError } from "mongodb";
