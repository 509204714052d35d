// The rules of log digests, version 1: what an entry's hash covers, what a digest's hash and
// signature cover, and the NDJSON line a digest is exported as. One implementation for the
// server that signs and for `runhook logs verify`, which checks an export offline: this file
// needs nothing but node:crypto (the CLI must not load the server's modules).
// docs/integrators.md, "Proving an archive complete", states the same rules for other verifiers.
import { createHash, createPublicKey, verify, type KeyObject } from "node:crypto";

export const DIGEST_VERSION = 1;
/** The most positions one digest covers: a busy stream gets a digest at every 10,000. */
export const MAX_DIGEST_POSITIONS = 10_000;

/**
 * The fields of an exported item that the server looks up when the item is read (names of
 * users, teams and workflows, which may change, or be gone, by the time an archive is made):
 * left out of the entry's hash, so that the hash covers exactly what the stored entry says.
 */
export const READ_TIME_FIELDS: Readonly<Record<string, readonly string[]>> = {
  activityLog: ["label", "team", "workflow", "user.id", "user.username"],
  adminLog: ["user.id", "user.username", "newValue.user.id", "newValue.user.username"],
};

/** JSON with every object's keys sorted (by UTF-16 code units) and no whitespace; undefined members left out, as JSON.stringify does. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? "null" : canonicalJson(x))).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

/** A copy of `item` without the field at a dotted path. */
function without(item: Record<string, unknown>, path: string): Record<string, unknown> {
  const [head, ...rest] = path.split(".");
  if (!Object.hasOwn(item, head!)) return item;
  const copy = { ...item };
  if (rest.length === 0) delete copy[head!];
  else if (copy[head!] && typeof copy[head!] === "object" && !Array.isArray(copy[head!]))
    copy[head!] = without(copy[head!] as Record<string, unknown>, rest.join("."));
  return copy;
}

/** Whether a parsed NDJSON line is a log entry (a published item whose fields the rules know). */
export function isEntryItem(item: unknown): item is Record<string, unknown> & { object: string; id: string } {
  const o = item as { object?: unknown; id?: unknown } | null;
  return typeof o === "object" && o !== null && typeof o.object === "string" && Object.hasOwn(READ_TIME_FIELDS, o.object) && typeof o.id === "string";
}

/** An entry's hash: SHA-256 (hex) of the canonical JSON of its exported item without READ_TIME_FIELDS. */
export function entryHash(item: Record<string, unknown> & { object: string }): string {
  const fields = READ_TIME_FIELDS[item.object];
  if (!fields) throw new Error(`no hash rule for items of "${item.object}"`);
  return sha256(canonicalJson(fields.reduce(without, item)));
}

/** One entry of a digest's range: its position and its hash. */
export type Leaf = [position: number, hash: string];

/** A digest's hash: SHA-256 (hex) of `<position>:<entry hash>\n` for each leaf, by position. */
export function leavesHash(leaves: readonly Leaf[]): string {
  const h = createHash("sha256");
  for (const [position, hash] of leaves) h.update(`${position}:${hash}\n`, "utf8");
  return h.digest("hex");
}

/** What a digest's signature covers, as the canonical JSON of exactly these fields. */
export interface DigestPayload {
  version: number;
  stream: string;
  from: number;
  to: number;
  entries: number;
  hash: string;
  /** The previous digest's hash (digestHash); "" for a stream's first. */
  previous: string;
  /** RFC 3339, to the millisecond. */
  createdAt: string;
  keyId: string;
}

/** A digest as the NDJSON export writes it: `{"digest": DigestLine}`. */
export interface DigestLine extends DigestPayload {
  /** Ed25519 signature (base64) of the canonical JSON of the payload. */
  signature: string;
  leaves: Leaf[];
}

const PAYLOAD_FIELDS = ["version", "stream", "from", "to", "entries", "hash", "previous", "createdAt", "keyId"] as const;

/** The signed text of a digest: the canonical JSON of its payload fields (and no others). */
export function signedText(d: DigestPayload): string {
  return canonicalJson(Object.fromEntries(PAYLOAD_FIELDS.map((k) => [k, d[k]])));
}

/** A digest's own hash, which the next digest of its stream names as `previous`: SHA-256 (hex) of its signed text. */
export function digestHash(d: DigestPayload): string {
  return sha256(signedText(d));
}

// A raw Ed25519 public key in the DER SubjectPublicKeyInfo node:crypto reads.
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** The public key of a log-keys answer's `publicKey` (the raw 32 bytes, base64). */
export function publicKeyOf(base64: string): KeyObject {
  const raw = Buffer.from(base64, "base64");
  if (raw.length !== 32) throw new Error("an Ed25519 public key is 32 bytes");
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: "der", type: "spki" });
}

/** Whether `signature` (base64) is `key`'s Ed25519 signature of the digest's signed text. */
export function signatureHolds(d: DigestPayload, signature: string, key: KeyObject): boolean {
  try {
    return verify(null, Buffer.from(signedText(d), "utf8"), key, Buffer.from(signature, "base64"));
  } catch {
    return false;
  }
}

const HEX64 = /^[0-9a-f]{64}$/;
const isPosition = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 1;

/** The digest of a parsed `{"digest": …}` line, its shape checked; a string saying what is wrong otherwise. */
export function parseDigestLine(v: unknown): DigestLine | string {
  const d = v as Partial<Record<keyof DigestLine, unknown>> | null;
  if (!d || typeof d !== "object") return "not an object";
  if (d.version !== DIGEST_VERSION) return `version ${JSON.stringify(d.version)} is not ${DIGEST_VERSION}`;
  for (const k of ["stream", "createdAt", "keyId", "signature", "previous"] as const) if (typeof d[k] !== "string") return `${k} is not a string`;
  if (!isPosition(d.from) || !isPosition(d.to) || d.to < d.from) return "from and to are not a range of positions";
  if (typeof d.entries !== "number" || !Number.isSafeInteger(d.entries) || d.entries < 0) return "entries is not a count";
  if (typeof d.hash !== "string" || !HEX64.test(d.hash) || (d.previous !== "" && !HEX64.test(d.previous as string))) return "hash or previous is not a SHA-256";
  if (
    !Array.isArray(d.leaves) ||
    !d.leaves.every((l) => Array.isArray(l) && l.length === 2 && isPosition(l[0]) && typeof l[1] === "string" && HEX64.test(l[1]))
  )
    return "leaves is not a list of [position, hash]";
  return d as DigestLine;
}
