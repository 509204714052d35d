// Telling database failures apart, without the driver's classes leaking out of the store.
import { MongoNetworkError, MongoServerError, MongoServerSelectionError } from "mongodb";

/** A unique index refused the write (E11000). */
export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

/** The database could not be reached: the operation may succeed later. */
export function isUnavailable(err: unknown): boolean {
  return err instanceof MongoNetworkError || err instanceof MongoServerSelectionError;
}
