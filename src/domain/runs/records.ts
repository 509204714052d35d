// Packed record ids (key parts joined with `|`, `|` and `\` escaped with `\`) and how a record is matched as a user sees it.
import type { RecordMatch } from "../../store/records.js";
import { fail } from "../errors.js";

/** The longest record id, in Unicode code points (webhook bodies, TriggerRun, notes). */
export const MAX_RECORD_ID_CHARS = 1024;

/** The one record id rule: a non-empty string of valid Unicode, at most MAX_RECORD_ID_CHARS; INVALID_ARGUMENT naming `field` otherwise. */
export function checkedRecordId(recordId: unknown, field: string): string {
  if (recordId === undefined || recordId === null) throw fail.invalid(`${field} is required`);
  if (typeof recordId !== "string") throw fail.invalid(`${field} must be a string`);
  if (recordId === "") throw fail.invalid(`${field} must not be empty`);
  // An unpaired UTF-16 surrogate (JSON "\ud800") cannot be stored: MongoDB's UTF-8 would turn it
  // into U+FFFD, so two different ids would become one record and share one active-run slot.
  if (/\p{Cs}/u.test(recordId)) throw fail.invalid(`${field} must be valid Unicode text (it contains an unpaired surrogate)`);
  // Characters are Unicode code points (as JSON Schema counts them): the UTF-16 length is a quick upper bound.
  if (recordId.length > MAX_RECORD_ID_CHARS && [...recordId].length > MAX_RECORD_ID_CHARS)
    throw fail.invalid(`${field} is longer than ${MAX_RECORD_ID_CHARS} characters`);
  return recordId;
}

/**
 * Splits a packed record id into its key parts: parts are joined with `|`, and a
 * literal `|` or `\` inside a part is escaped with `\`. Returns null when malformed
 * (a dangling `\` or an escape of any other character).
 */
export function unpackRecordId(packed: string): string[] | null {
  const parts: string[] = [];
  let cur = "";
  for (let i = 0; i < packed.length; i++) {
    const c = packed[i]!;
    if (c === "\\") {
      const next = packed[i + 1];
      if (next !== "|" && next !== "\\") return null;
      cur += next;
      i++;
    } else if (c === "|") {
      parts.push(cur);
      cur = "";
    } else {
      cur += c;
    }
  }
  parts.push(cur);
  return parts;
}

/** The inverse of unpackRecordId. */
export function packRecordId(parts: unknown[]): string {
  return parts.map((p) => String(p).replace(/[\\|]/g, (m) => `\\${m}`)).join("|");
}

/** A number whose canonical string form is exactly `s` ("42", "-1.5"; not "042", "1e3", " 1"). */
function canonicalNumber(s: string): number | undefined {
  if (!/^-?(0|[1-9]\d*)(\.\d*[1-9])?$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isFinite(n) && String(n) === s ? n : undefined;
}

/**
 * How the record `packed` of a collection with key `primaryKey` is found, limited to the
 * rendering's scope (every scope field must equal). Null when the id does not fit the key.
 * A key part matches the stored value as a string, or as a number when it is a canonical number.
 */
export function recordMatch(primaryKey: string[], packed: string, scope: Record<string, unknown>): RecordMatch | null {
  const parts = unpackRecordId(packed);
  if (!parts || parts.length !== primaryKey.length || primaryKey.length === 0) return null;
  const key = primaryKey.map((field, i) => {
    const s = parts[i]!;
    const n = canonicalNumber(s);
    return { field, values: n === undefined ? [s] : [s, n] };
  });
  return { key, scope };
}
