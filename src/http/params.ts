// Query and body values of the /v1 routes: how each is parsed, and (for the values with a
// syntax of their own) the schema the OpenAPI document gives it, side by side.
//
// Query strings are parsed strictly: an unknown parameter, a repeated one or a value that
// does not parse is a 400 naming the parameter (a mistyped filter must not silently
// return everything). Bodies are JSON objects; unknown body fields are ignored.
import { timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { FastifyRequest } from "fastify";
import { fail } from "../domain/errors.js";
import { MAX_LIMIT } from "../domain/logs/cursor.js";
import { MAX_WAIT_SECONDS } from "../services/runs.js";
import type { Schema } from "./openapi-schemas.js";

/** A query parameter's value by name (undefined when absent). */
export type QueryReader = (name: string) => string | undefined;

type RawQuery = Record<string, string | string[] | undefined>;

/** The query string as single strings, read at once; 400 for unknown or repeated parameters. */
export function strictQuery(req: FastifyRequest, allowed: readonly string[]): QueryReader {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries((req.query ?? {}) as RawQuery)) {
    if (!allowed.includes(k)) throw fail.invalid(`unknown query parameter "${k}" (allowed: ${allowed.join(", ")})`);
    if (Array.isArray(v)) throw fail.invalid(`query parameter "${k}" is given more than once`);
    if (v !== undefined) out[k] = v;
  }
  return (name) => out[name];
}

/** The query string read a parameter at a time: others are ignored, a repeated one is a 400 when read. */
export function lenientQuery(req: FastifyRequest): QueryReader {
  const raw = (req.query ?? {}) as RawQuery;
  return (name) => {
    const v = raw[name];
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw fail.invalid(`query parameter "${name}" must be given once`);
    return v;
  };
}

// ---------------------------------------------------------------- times

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 time, exactly as the OpenAPI document describes it (TIME_SCHEMA: `format:
 * date-time` with at most 9 fractional digits, no leap second): every field is range-checked,
 * so `2025-02-30` or `24:00` is refused rather than rolled over as `Date` would.
 */
export function parseRfc3339(v: string): Date | undefined {
  const m = RFC3339.exec(v);
  if (!m) return undefined;
  const [offH, offM] = [Number(m[9] ?? 0), Number(m[10] ?? 0)];
  const seconds = utcSeconds(m.slice(1, 7).map(Number) as Civil);
  if (seconds === undefined || offH > 23 || offM > 59) return undefined;
  const offsetMinutes = (m[8] === "-" ? -1 : 1) * (offH * 60 + offM);
  return new Date((seconds - offsetMinutes * 60) * 1000 + Math.floor(Number(`0${m[7] ?? ""}`) * 1000));
}

/** Year, month, day, hour, minute, second of a civil time in UTC. */
export type Civil = [number, number, number, number, number, number];

/**
 * The Unix seconds of a civil time in UTC, every field range-checked (`2025-02-30` or `24:00`
 * is undefined rather than rolled over as `Date` would), no leap second.
 */
export function utcSeconds([year, month, day, hour, minute, second]: Civil): number | undefined {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  if (day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined;
  // Date.UTC maps years 0–99 to 1900–1999: set the full year separately.
  const d = new Date(Date.UTC(2000, month - 1, day, hour, minute, second));
  d.setUTCFullYear(year);
  return d.getTime() / 1000;
}

/** RFC 3339 times as the list parameters take them (`from`, `to`), or "" for no bound. */
export const TIME_SCHEMA: Schema = {
  anyOf: [
    {
      type: "string",
      format: "date-time",
      pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-5][0-9](\\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$",
    },
    { type: "string", maxLength: 0 },
  ],
};

export function timeParam(query: QueryReader, name: string): Timestamp | undefined {
  const v = query(name);
  if (v === undefined || v === "") return undefined;
  const d = parseRfc3339(v);
  if (!d) throw fail.invalid(`${name} must be an RFC 3339 time such as 2025-01-31T12:00:00Z, got "${v}"`);
  return timestampFromDate(d);
}

// ---------------------------------------------------------------- lists and flags

/** Paging of the list routes (the query parameters LIST_QUERY documents). */
export function listOptions(query: QueryReader) {
  let limit = 0;
  const rawLimit = query("limit");
  if (rawLimit !== undefined) {
    if (!/^\d{1,7}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > MAX_LIMIT)
      throw fail.invalid(`limit must be a whole number from 1 to ${MAX_LIMIT}, got "${rawLimit}"`);
    limit = Number(rawLimit);
  }
  const order = query("order") ?? "";
  if (order !== "" && order !== "asc" && order !== "desc") throw fail.invalid(`order must be "asc" or "desc", got "${order}"`);
  return { limit, cursor: query("cursor") ?? "", order, fromTime: timeParam(query, "from"), toTime: timeParam(query, "to") };
}

/** String filters by name, "" when absent. */
export function stringFilters<K extends string>(query: QueryReader, names: readonly K[]): Record<K, string> {
  return Object.fromEntries(names.map((k) => [k, query(k) ?? ""])) as Record<K, string>;
}

/** A comma-separated list (`state=FAILED,CANCELLED`); [] when absent or empty. */
export function listParam(query: QueryReader, name: string): string[] {
  return (query(name) ?? "").split(",").filter((v) => v !== "");
}

export function boolParam(query: QueryReader, name: string): boolean | undefined {
  const v = query(name);
  if (v === undefined || v === "") return undefined;
  if (v === "true") return true;
  if (v === "false") return false;
  throw fail.invalid(`${name} must be "true" or "false", got "${v}"`);
}

// ---------------------------------------------------------------- runs

/** `30`, `30s`, `1m`, `500ms` (rounded up to whole seconds) → seconds; undefined when malformed. */
export function parseWait(raw: string): number | undefined {
  const m = /^(\d{1,6})(ms|s|m)?$/.exec(raw);
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  return unit === "ms" ? Math.ceil(n / 1000) : unit === "m" ? n * 60 : n;
}

/**
 * `wait` as parseWait takes it: empty, or at most MAX_WAIT_SECONDS (60) as seconds (`30`,
 * `30s`), milliseconds (`500ms`, rounded up) or minutes (`1m`), in at most 6 digits.
 */
export const WAIT_SCHEMA: Schema = {
  type: "string",
  pattern:
    "^(" +
    [
      "",
      "0{0,4}[0-9](s)?",
      "0{0,4}[1-5][0-9](s)?",
      "0{0,4}60(s)?",
      "0{0,5}[0-9]ms",
      "0{0,4}[1-9][0-9]ms",
      "0{0,3}[1-9][0-9]{2}ms",
      "0{0,2}[1-9][0-9]{3}ms",
      "0?[1-5][0-9]{4}ms",
      "0?60000ms",
      "0{0,5}[01]m",
    ].join("|") +
    ")$",
};

/** The long-poll of GET /v1/runs/{runId}: `wait` in seconds (0: none) and the `version` the caller has (0n: none). */
export function runWait(query: QueryReader): { waitSeconds: number; knownVersion: bigint } {
  let waitSeconds = 0;
  let knownVersion = 0n;
  const wait = query("wait");
  if (wait !== undefined && wait !== "") {
    const s = parseWait(wait);
    if (s === undefined || s > MAX_WAIT_SECONDS) throw fail.invalid(`wait must be a duration of at most ${MAX_WAIT_SECONDS}s, like 30s`);
    waitSeconds = s;
  }
  const version = query("version");
  if (version !== undefined && version !== "") {
    if (!/^\d{1,15}$/.test(version)) throw fail.invalid("version must be a whole number (the run's `version`)");
    knownVersion = BigInt(version);
  }
  return { waitSeconds, knownVersion };
}

// ---------------------------------------------------------------- body fields

export function stringField(b: Record<string, unknown>, name: string): string | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw fail.invalid(`"${name}" must be a string`);
  return v;
}

export function boolField(b: Record<string, unknown>, name: string): boolean | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw fail.invalid(`"${name}" must be true or false`);
  return v;
}
