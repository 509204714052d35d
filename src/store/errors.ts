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
 * A write refused because the database is full: 146 ExceededMemoryLimit (the embedded memory
 * backend's heap, embedded/…/MemoryGuard.java), 14031 OutOfDiskSpace (the file backend's disk,
 * DiskGuard.java; MongoDB's own for a disk without room).
 */
const FULL_CODES = new Set([146, 14031]);

const namesFull = (e: unknown) => FULL_CODES.has((e as { code?: unknown } | null)?.code as number);

/**
 * The database refused a write for want of room (memory or disk): the same write may succeed
 * once room is made. As an error of the command, of a write (a grouped insert's write errors),
 * or of its write concern.
 */
export function isDatabaseFull(err: unknown): boolean {
  if (!(err instanceof MongoServerError)) return false;
  if (namesFull(err)) return true;
  // A grouped insert (insertMany): the bulk error names its write errors, or wraps the command's.
  if (err instanceof MongoBulkWriteError) {
    const cause = (err as { errorResponse?: unknown }).errorResponse ?? err.cause;
    return [err.writeErrors].flat().some(namesFull) || (cause !== err && isDatabaseFull(cause));
  }
  return false;
}

/** Whether a command's reply (ok, with write errors or a write concern error) says the database is full. */
export function repliesFull(reply: unknown): boolean {
  const r = reply as { writeErrors?: unknown; writeConcernError?: unknown } | null;
  return (Array.isArray(r?.writeErrors) && r.writeErrors.some(namesFull)) || namesFull(r?.writeConcernError);
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
 * The database cannot serve the operation now, and it may succeed later: it could not be
 * reached, or it is full (isDatabaseFull: waiting for room is waiting, not a bug). What an outage
 * produces (measured against a stopped server, test/crash/db-outage.test.ts): operations in flight
 * when it goes fail at once with MongoNetworkError (connection closed; MongoPoolClearedError,
 * a subclass, for those queued in the pool; or a raw EPIPE, above), later ones with
 * MongoServerSelectionError after serverSelectionTimeoutMS (RUNHOOK_DB_TIMEOUT_MS). A failover
 * answers with the server codes above; a client closed by our own shutdown with the *Closed /
 * NotConnected errors.
 */
export function isUnavailable(err: unknown): boolean {
  if (isDatabaseFull(err)) return true;
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
