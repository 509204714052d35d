// Idempotent trigger calls (opt-in, by key). The first call with a key reserves it together
// with the id of the run it is about to store; a repeat finds that reservation and answers its
// run (a replay) once the run is stored. Only the holder of a reservation ever stores a run, so
// one key starts at most one run, and a reservation is released when its call is refused.
import { createHash, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { fail } from "./errors.js";
import { sleep } from "../lib/sleep.js";
import type { Store } from "../store/index.js";
import type { IdempotencyKeyDoc, RunDoc } from "../store/types.js";

export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** Printable ASCII: space to `~`. */
export const IDEMPOTENCY_KEY_PATTERN = "^[\\x20-\\x7E]+$";
const KEY_RE = new RegExp(IDEMPOTENCY_KEY_PATTERN);

/** How long a repeat waits for the first call with its key to store its run, before ABORTED (409). */
const IN_FLIGHT_WAIT_MS = 2000;
const IN_FLIGHT_POLL_MS = 50;
/**
 * A reservation whose run is still not stored after this long was left by a call that died
 * between the two writes: a repeat takes it over and stores the reserved run itself.
 */
export const ABANDONED_AFTER_MS = 30_000;

/** INVALID_ARGUMENT unless `key` is 1 to 255 printable ASCII characters. */
export function checkIdempotencyKey(key: string): void {
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) throw fail.invalid(`the Idempotency-Key is longer than ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
  if (!KEY_RE.test(key)) throw fail.invalid(`the Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters (space to ~)`);
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("base64url");

/** What identifies a keyed call: its key's scope, and what the call asks for. */
export interface KeyedCall {
  workflowId: string;
  userId: string;
  key: string;
  /** The canonical request: only what the call does (unknown body fields, ignored by the call, are not part of it). */
  recordId: string;
  /** What else the call asks for (a retry: which run, from which step); part of the canonical request. */
  also?: Record<string, string | boolean>;
}

export interface Outcome {
  runId: string;
  /** The run was started by an earlier call with the key: this one started nothing. */
  replayed: boolean;
}

const mismatch = (call: KeyedCall) =>
  fail.precondition(`this Idempotency-Key was already used with another ${call.also ? "request" : "record_id"}: use a new key for a different call`);
const inFlight = () => fail.aborted("the first call with this Idempotency-Key is still being answered: retry in a moment with the same key");

/** What keyed calls use: the keys and the runs they start, the keys' lifetime, and a log for a key that could not be freed. */
export interface IdempotencyDeps {
  store: Pick<Store, "idempotencyKeys" | "runs" | "logs">;
  config: Pick<Config, "idempotencyTtlMs">;
  logger: Pick<Logger, "warn">;
}

/**
 * Runs `start(runId)` (which stores the run `runId` or throws) at most once per key: a repeat
 * of an accepted call answers its run and starts nothing.
 */
/** Where a key is stored: one per (workflow, user, key). */
export function idempotencyKeyId(call: Pick<KeyedCall, "workflowId" | "userId" | "key">): string {
  return sha256(JSON.stringify([call.workflowId, call.userId, call.key]));
}

export async function startOnce(deps: IdempotencyDeps, call: KeyedCall, start: (runId: string) => Promise<void>): Promise<Outcome> {
  const keys = deps.store.idempotencyKeys;
  const id = idempotencyKeyId(call);
  const requestHash = sha256(JSON.stringify({ record_id: call.recordId, ...call.also }));
  for (let attempt = 0; attempt < 3; attempt++) {
    const now = Date.now();
    const mine: IdempotencyKeyDoc = {
      _id: id,
      runId: randomUUID(),
      requestHash,
      reservedAt: new Date(now),
      expiresAt: new Date(now + deps.config.idempotencyTtlMs),
    };
    const reserved = await keys.reserve(mine);
    if (reserved.stored) return startReserved(deps, mine, start);
    const first = reserved.existing;
    if (!first) continue; // released just now: try again
    // Expired but not yet removed (the TTL monitor and the sweep run once a minute): forgotten all the same.
    if (first.expiresAt.getTime() <= now) {
      if (await keys.replace(first, mine)) return startReserved(deps, mine, start);
      continue;
    }
    if (first.requestHash !== requestHash) throw mismatch(call);
    const seen = await awaitFirst(deps, first);
    if (seen === "stored") return { runId: first.runId, replayed: true };
    if (seen === "busy") throw inFlight();
    // Stored once and removed since by the run retention (a key kept from a longer TTL than
    // today's, config.ts): its start is in the activity log, and the call started nothing.
    if (seen === "abandoned" && (await deps.store.logs.mentionsRun(first.runId))) return { runId: first.runId, replayed: true };
    if (seen === "abandoned") {
      const taken = { ...first, reservedAt: new Date() };
      if (await keys.takeOver(first, taken.reservedAt)) return startReserved(deps, taken, start);
    }
    // Released, or taken over by another repeat: look again.
  }
  throw inFlight();
}

/** Stores the reserved run; when the call is refused, frees the key (unless the run exists after all). */
async function startReserved(deps: IdempotencyDeps, held: IdempotencyKeyDoc, start: (runId: string) => Promise<void>): Promise<Outcome> {
  try {
    await start(held.runId);
    return { runId: held.runId, replayed: false };
  } catch (err) {
    let stored: RunDoc | null;
    try {
      // Stored all the same: by a repeat that took this reservation over while this call stalled.
      stored = await deps.store.runs.get(held.runId);
    } catch {
      throw err; // unknown whether the run exists: the reservation stays (taken over once abandoned)
    }
    if (stored) return { runId: held.runId, replayed: true };
    await deps.store.idempotencyKeys.release(held).catch((e: unknown) => deps.logger.warn({ err: e }, "could not release an idempotency key"));
    throw err;
  }
}

/** Waits briefly for the call holding `held` to store its run, to release the key, or to be found dead. */
async function awaitFirst(deps: IdempotencyDeps, held: IdempotencyKeyDoc): Promise<"stored" | "changed" | "abandoned" | "busy"> {
  const until = Date.now() + IN_FLIGHT_WAIT_MS;
  for (;;) {
    if (await deps.store.runs.get(held.runId)) return "stored";
    const now = Date.now();
    if (now - held.reservedAt.getTime() >= ABANDONED_AFTER_MS) return "abandoned";
    if (now >= until) return "busy";
    await sleep(IN_FLIGHT_POLL_MS);
    const current = await deps.store.idempotencyKeys.get(held._id);
    if (current?.runId !== held.runId || current.reservedAt.getTime() !== held.reservedAt.getTime()) return "changed";
  }
}
