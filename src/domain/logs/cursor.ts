// The one cursor format of every list (activity logs, admin logs, notes), and the
// validation of the paging parameters they share.
//
// A cursor is opaque base64url: a 16-byte HMAC followed by a small JSON payload
// `{v, k, p, h}` — format version, signing key id, position (the sequence number of
// the last entry considered, or for keyset lists such as runs the last item's sort key as a
// string) and a hash of everything the cursor is bound to (list,
// scope, filters, order, from/to). The HMAC uses a key derived from the server's
// signing key, so a cursor cannot be forged or edited; a cursor used with other
// filters than it was issued with is INVALID_ARGUMENT.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Config } from "../../config.js";
import { fail } from "../errors.js";

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
const MAC_BYTES = 16;
const MAX_CURSOR_CHARS = 512;

export type Order = "asc" | "desc";

/** The paging parameters of a list request, validated. */
export interface Paging {
  limit: number;
  order: Order;
  /** At or after this time, in microseconds since the epoch (a bound given in nanoseconds is rounded up: the same selection). */
  fromMicros: number | undefined;
  /** Before this time, in microseconds (rounded up likewise). */
  toMicros: number | undefined;
  /** The same bounds to the millisecond, rounded up likewise (what lists of millisecond times compare with). */
  from: Date | undefined;
  to: Date | undefined;
  /** Raw cursor, checked by `openCursor` against the binding hash. */
  cursor: string;
}

interface ListOptionsLike {
  limit: number;
  cursor: string;
  order: string;
  fromTime?: Timestamp;
  toTime?: Timestamp;
}

/** A time bound in whole microseconds, rounded up: t ≥ bound (or t < bound) selects the same times of whole microseconds. */
function toMicros(ts: Timestamp | undefined, name: string): number | undefined {
  if (!ts) return undefined;
  const micros = Number(ts.seconds) * 1_000_000 + Math.ceil(ts.nanos / 1000);
  if (!Number.isSafeInteger(micros) || Number.isNaN(timestampDate(ts).getTime())) throw fail.invalid(`${name} is not a valid time`);
  return micros;
}

const toDate = (micros: number | undefined) => (micros === undefined ? undefined : new Date(Math.ceil(micros / 1000)));

/** Validates ListOptions (the same rules for gRPC and REST callers); `defaultOrder` when none is given (asc unless said). */
export function paging(o: ListOptionsLike | undefined, opts: { ignoreLimit?: boolean; defaultOrder?: Order } = {}): Paging {
  const limit = opts.ignoreLimit ? MAX_LIMIT : o?.limit || DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw fail.invalid(`limit must be between 1 and ${MAX_LIMIT}`);
  const order = o?.order || opts.defaultOrder || "asc";
  if (order !== "asc" && order !== "desc") throw fail.invalid(`order must be "asc" or "desc"`);
  const fromMicros = toMicros(o?.fromTime, "from");
  const toMicros_ = toMicros(o?.toTime, "to");
  if (fromMicros !== undefined && toMicros_ !== undefined && fromMicros > toMicros_) throw fail.invalid("from must not be after to");
  return { limit, order, fromMicros, toMicros: toMicros_, from: toDate(fromMicros), to: toDate(toMicros_), cursor: o?.cursor ?? "" };
}

/** A stable hash of what a cursor is bound to: list kind, scope, filters, order, time range. */
export function bindingHash(binding: Record<string, string | boolean | number | undefined | null>): string {
  const norm = Object.keys(binding)
    .sort()
    .filter((k) => binding[k] !== undefined && binding[k] !== null && binding[k] !== "")
    .map((k) => [k, binding[k]]);
  return createHash("sha256").update(JSON.stringify(norm)).digest("base64url").slice(0, 22);
}

export interface CursorCodec {
  encode(pos: number, hash: string): string;
  /** The position carried by `cursor`; INVALID_ARGUMENT when forged, malformed or bound to other filters. */
  decode(cursor: string, hash: string): number;
  /** A cursor at a sort key (keyset paging), signed and bound like any other. */
  encodeKey(key: string, hash: string): string;
  /** The sort key carried by `cursor`; INVALID_ARGUMENT as `decode` (a numeric cursor is malformed here, and the other way round). */
  decodeKey(cursor: string, hash: string): string;
}

function derive(secret: Buffer): Buffer {
  return createHmac("sha256", secret).update("runhook list cursor v1").digest();
}

export function cursorCodec(config: Pick<Config, "signingKeys" | "signingKeyId">): CursorCodec {
  const keys = new Map<string, Buffer>();
  for (const [kid, secret] of config.signingKeys) keys.set(kid, derive(secret));
  const kid = config.signingKeyId;
  const mac = (key: Buffer, payload: Buffer) => createHmac("sha256", key).update(payload).digest().subarray(0, MAC_BYTES);
  const encode = (pos: number | string, hash: string) => {
    const payload = Buffer.from(JSON.stringify({ v: 1, k: kid, p: pos, h: hash }));
    return Buffer.concat([mac(keys.get(kid)!, payload), payload]).toString("base64url");
  };
  const bad = () => fail.invalid("cursor is malformed or was not issued by this server");
  /** The verified position (a number or a key) of a cursor bound to `hash`. */
  const open = (cursor: string, hash: string): unknown => {
    if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
    const raw = Buffer.from(cursor, "base64url");
    if (raw.length <= MAC_BYTES) throw bad();
    const payload = raw.subarray(MAC_BYTES);
    let p: { v?: unknown; k?: unknown; p?: unknown; h?: unknown };
    try {
      p = JSON.parse(payload.toString("utf8")) as typeof p;
    } catch {
      throw bad();
    }
    const key = typeof p.k === "string" ? keys.get(p.k) : undefined;
    if (!key || p.v !== 1 || !timingSafeEqual(mac(key, payload), raw.subarray(0, MAC_BYTES))) throw bad();
    if (p.h !== hash) throw fail.invalid("cursor was issued for other filters, order or time range; start again without a cursor");
    return p.p;
  };
  return {
    encode,
    decode(cursor, hash) {
      const pos = open(cursor, hash);
      if (typeof pos !== "number" || !Number.isSafeInteger(pos) || pos < 0) throw bad();
      return pos;
    },
    encodeKey: encode,
    decodeKey(cursor, hash) {
      const key = open(cursor, hash);
      if (typeof key !== "string") throw bad();
      return key;
    },
  };
}

/** The same format with a string position: lists ordered by a key (an id) rather than a sequence number. */
export interface KeyCursorCodec {
  encode(key: string, hash: string): string;
  /** The key carried by `cursor`; INVALID_ARGUMENT as CursorCodec.decode. */
  decode(cursor: string, hash: string): string;
}

export function keyCursorCodec(config: Pick<Config, "signingKeys" | "signingKeyId">): KeyCursorCodec {
  // A key rides in the hash's place of a numeric cursor (position 0): one MAC, one validation.
  const codec = cursorCodec(config);
  const KEY_CHARS = 200;
  return {
    encode: (key, hash) => codec.encode(0, `${hash}.${Buffer.from(key).toString("base64url")}`),
    decode(cursor, hash) {
      const bad = () => fail.invalid("page token is malformed or was not issued by this server");
      if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
      let bound: unknown;
      try {
        bound = JSON.parse(Buffer.from(cursor, "base64url").subarray(MAC_BYTES).toString("utf8")).h;
      } catch {
        throw bad();
      }
      if (typeof bound !== "string") throw bad();
      codec.decode(cursor, bound); // the MAC: a forged or edited token is refused
      if (!bound.startsWith(`${hash}.`)) throw fail.invalid("page token was issued for another query or caller; start again without one");
      const key = Buffer.from(bound.slice(hash.length + 1), "base64url").toString("utf8");
      if (key.length === 0 || key.length > KEY_CHARS) throw bad();
      return key;
    },
  };
}
