// The /v1 public REST API (activity logs, admin logs, notes) over the very same LogService
// and NoteService implementations as gRPC and Connect, plus the per-token rate limit
// that every /v1 response carries.
//
// Query strings are parsed strictly: an unknown parameter, a repeated one or a value that
// does not parse is a 400 naming the parameter (a mistyped filter must not silently
// return everything). Bodies are JSON objects; unknown body fields are ignored. The /v1
// plugin has one body parser (body.ts, acceptRawBodies): routes without a body accept an
// empty one whatever its Content-Type, and only routes that take one parse it.
import { Readable } from "node:stream";
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ActivityLogEntrySchema, AdminLogEntrySchema, ListActivityLogsResponseSchema, ListAdminLogsResponseSchema, LogService } from "../../gen/runhook/v1/log_pb.js";
import { NoteMessageSchema, NoteSchema, ListNotesResponseSchema, NoteService } from "../../gen/runhook/v1/note_pb.js";
import { apiRateBucket, hitApiRateLimit } from "../api/rate-limit.js";
import type { Deps } from "../deps.js";
import { fail } from "../errors.js";
import { MAX_LIMIT } from "../domain/logs/cursor.js";
import type { Services } from "../api/services.js";
import { jsonObjectBody } from "./body.js";
import { registerOpenApiRoute } from "./openapi.js";
import { callServerStream, callUnary } from "../api/call.js";
import { callOptions, protoJson, sendError } from "./bridge.js";

export const NDJSON = "application/x-ndjson";
const NDJSON_CHUNK = 64 * 1024;

// ---------------------------------------------------------------- rate limit

/**
 * Per-token rate limit of the public API, on the root instance so that it covers every
 * route under /v1 (including /v1/runs). Keyed by the sha256 of the bearer token (by
 * client address without one); one shared fixed-window counter in MongoDB for all
 * instances, the same one the LogService / NoteService RPCs count in (api-rate-limit.ts).
 * Every /v1 response carries the X-RateLimit-* headers and the IETF draft `RateLimit` /
 * `RateLimit-Policy` headers; over the limit → 429 with Retry-After.
 */
export function registerApiRateLimit(app: FastifyInstance, deps: Deps): void {
  app.addHook("onRequest", async (req, reply) => {
    if (!isApiRequest(req)) return;
    const { headers, error } = await hitApiRateLimit(deps, apiRateBucket(req.headers.authorization, req.ip));
    reply.headers(headers);
    if (error) return sendError(reply, error);
  });
}

const V1_PATH = /^\/v1(\/|$)/i;

/**
 * Whether a request is for the public API (/v1): decided by the route Fastify matched —
 * the handler that will run — and never by the raw request target, which can spell the
 * same route differently (`/%761/…`, `/v1/project/%70…`, a trailing slash, the absolute
 * form `http://host/v1/…`). A request that matches no route is judged by its decoded path,
 * so that 404s under /v1 also carry the headers and count.
 */
export function isApiRequest(req: FastifyRequest): boolean {
  if (!req.is404) {
    const route = req.routeOptions.url ?? "";
    return route === "/v1" || route.startsWith("/v1/");
  }
  return V1_PATH.test(normalizedPath(req.url));
}

/** The path of a request target: without scheme and host, query, fragment or `;` parameters, percent-decoded, slashes collapsed. */
function normalizedPath(target: string): string {
  let p = target.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, "");
  p = p.split(/[?#;]/, 1)[0]!;
  try {
    p = decodeURIComponent(p);
  } catch {
    /* malformed escapes: judge the raw path */
  }
  return p.replace(/\/+/g, "/");
}

// ---------------------------------------------------------------- parameters

type Query = Record<string, string>;

/** The query string as single strings; 400 for unknown or repeated parameters. */
function queryOf(req: FastifyRequest, allowed: readonly string[]): Query {
  const raw = (req.query ?? {}) as Record<string, string | string[] | undefined>;
  const out: Query = {};
  for (const [k, v] of Object.entries(raw)) {
    if (!allowed.includes(k)) throw fail.invalid(`unknown query parameter "${k}" (allowed: ${allowed.join(", ")})`);
    if (Array.isArray(v)) throw fail.invalid(`query parameter "${k}" is given more than once`);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 time, exactly as the OpenAPI document describes it (`format: date-time` with at
 * most 9 fractional digits, no leap second): every field is range-checked, so `2025-02-30`
 * or `24:00` is refused rather than rolled over as `Date` would.
 */
export function parseRfc3339(v: string): Date | undefined {
  const m = RFC3339.exec(v);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
  const [offH, offM] = [Number(m[9] ?? 0), Number(m[10] ?? 0)];
  if (day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59 || offH > 23 || offM > 59) return undefined;
  // Date.UTC maps years 0–99 to 1900–1999: set the full year separately.
  const d = new Date(Date.UTC(2000, month - 1, day, hour, minute, second, Math.floor(Number(`0${m[7] ?? ""}`) * 1000)));
  d.setUTCFullYear(year);
  const offsetMinutes = (m[8] === "-" ? -1 : 1) * (offH * 60 + offM);
  return new Date(d.getTime() - offsetMinutes * 60_000);
}

function timeParam(q: Query, name: string): Timestamp | undefined {
  const v = q[name];
  if (v === undefined || v === "") return undefined;
  const d = parseRfc3339(v);
  if (!d) throw fail.invalid(`${name} must be an RFC 3339 time such as 2025-01-31T12:00:00Z, got "${v}"`);
  return timestampFromDate(d);
}

const LIST_PARAMS = ["limit", "cursor", "order", "from", "to"] as const;

function listOptions(q: Query) {
  let limit = 0;
  if (q.limit !== undefined) {
    if (!/^\d{1,7}$/.test(q.limit) || Number(q.limit) < 1 || Number(q.limit) > MAX_LIMIT) throw fail.invalid(`limit must be a whole number from 1 to ${MAX_LIMIT}, got "${q.limit}"`);
    limit = Number(q.limit);
  }
  const order = q.order ?? "";
  if (order !== "" && order !== "asc" && order !== "desc") throw fail.invalid(`order must be "asc" or "desc", got "${order}"`);
  return { limit, cursor: q.cursor ?? "", order, fromTime: timeParam(q, "from"), toTime: timeParam(q, "to") };
}

function boolParam(q: Query, name: string): boolean | undefined {
  const v = q[name];
  if (v === undefined || v === "") return undefined;
  if (v === "true") return true;
  if (v === "false") return false;
  throw fail.invalid(`${name} must be "true" or "false", got "${v}"`);
}

function stringField(b: Record<string, unknown>, name: string): string | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw fail.invalid(`"${name}" must be a string`);
  return v;
}

function boolField(b: Record<string, unknown>, name: string): boolean | undefined {
  const v = b[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw fail.invalid(`"${name}" must be true or false`);
  return v;
}

function wantsNdjson(req: FastifyRequest): boolean {
  return (req.headers.accept ?? "").toLowerCase().includes(NDJSON);
}

/**
 * Streams `{entry}` messages as NDJSON (one ProtoJSON entry per line). The first item is
 * awaited before answering, so authentication and parameter errors still get their
 * status and error body; after that, lines go out in ~64 KiB chunks pulled only as fast
 * as the client reads (Readable.from → pipe), so memory stays constant.
 */
async function sendNdjson<D extends DescMessage>(reply: FastifyReply, items: AsyncIterable<{ entry?: unknown }>, schema: D): Promise<FastifyReply> {
  const it = items[Symbol.asyncIterator]();
  let r: IteratorResult<{ entry?: unknown }>;
  try {
    r = await it.next();
  } catch (err) {
    return sendError(reply, err);
  }
  async function* chunks(): AsyncGenerator<string> {
    let buf = "";
    try {
      while (!r.done) {
        if (r.value.entry) buf += JSON.stringify(protoJson(schema, r.value.entry as MessageShape<D>)) + "\n";
        if (buf.length >= NDJSON_CHUNK) {
          yield buf;
          buf = "";
        }
        r = await it.next();
      }
      if (buf) yield buf;
    } finally {
      if (!r.done) await it.return?.(undefined);
    }
  }
  return reply.code(200).header("content-type", `${NDJSON}; charset=utf-8`).send(Readable.from(chunks(), { objectMode: false }));
}

// ---------------------------------------------------------------- routes

const ACTIVITY_FILTERS = ["userId", "userEmail", "action", "collection", "recordId", "runId"] as const;
const ADMIN_FILTERS = ["userId", "userEmail", "action"] as const;
const NOTE_FILTERS = ["collection", "recordId", "userId", "archived"] as const;

interface EnvParams { projectName: string; environmentName: string }
interface NoteParams extends EnvParams { noteId: string }

export async function registerV1Routes(app: FastifyInstance, deps: Deps, services: Services): Promise<void> {
  const ENV = "/v1/project/:projectName/environment/:environmentName";

  app.get<{ Params: EnvParams }>(`${ENV}/activity-logs`, async (req, reply) => {
    try {
      const q = queryOf(req, [...LIST_PARAMS, ...ACTIVITY_FILTERS]);
      const filter = Object.fromEntries(ACTIVITY_FILTERS.map((k) => [k, q[k] ?? ""]));
      const init = { projectName: req.params.projectName, environmentName: req.params.environmentName, options: listOptions(q), filter };
      if (wantsNdjson(req)) {
        const method = LogService.method.exportActivityLogs;
        const items = callServerStream(services.log, method, init, callOptions(req, reply, "api"));
        return sendNdjson(reply, items as AsyncIterable<{ entry?: unknown }>, ActivityLogEntrySchema);
      }
      const out = await callUnary(services.log, LogService.method.listActivityLogs, init, callOptions(req, reply, "api"));
      return reply.send(protoJson(ListActivityLogsResponseSchema, out));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.get<{ Params: { projectName: string } }>("/v1/project/:projectName/admin-logs", async (req, reply) => {
    try {
      const q = queryOf(req, [...LIST_PARAMS, ...ADMIN_FILTERS]);
      const filter = Object.fromEntries(ADMIN_FILTERS.map((k) => [k, q[k] ?? ""]));
      const init = { projectName: req.params.projectName, options: listOptions(q), filter };
      if (wantsNdjson(req)) {
        const method = LogService.method.exportAdminLogs;
        const items = callServerStream(services.log, method, init, callOptions(req, reply, "api"));
        return sendNdjson(reply, items as AsyncIterable<{ entry?: unknown }>, AdminLogEntrySchema);
      }
      const out = await callUnary(services.log, LogService.method.listAdminLogs, init, callOptions(req, reply, "api"));
      return reply.send(protoJson(ListAdminLogsResponseSchema, out));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  const scopeOf = (p: EnvParams) => ({ projectName: p.projectName, environmentName: p.environmentName });

  app.get<{ Params: EnvParams }>(`${ENV}/notes`, async (req, reply) => {
    try {
      const q = queryOf(req, [...LIST_PARAMS, ...NOTE_FILTERS]);
      const filter = { collection: q.collection ?? "", recordId: q.recordId ?? "", userId: q.userId ?? "", archived: boolParam(q, "archived") };
      const out = await callUnary(services.note, NoteService.method.listNotes, { scope: scopeOf(req.params), options: listOptions(q), filter }, callOptions(req, reply, "api"));
      return reply.send(protoJson(ListNotesResponseSchema, out));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.post<{ Params: EnvParams }>(`${ENV}/notes`, async (req, reply) => {
    try {
      queryOf(req, []);
      const b = jsonObjectBody(req);
      const init = {
        scope: scopeOf(req.params),
        collection: stringField(b, "collection") ?? "",
        recordId: stringField(b, "recordId") ?? "",
        title: stringField(b, "title") ?? "",
        content: stringField(b, "content") ?? "",
      };
      const out = await callUnary(services.note, NoteService.method.createNote, init, callOptions(req, reply, "api"));
      return reply.code(201).send(protoJson(NoteSchema, out.note ?? create(NoteSchema)));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.get<{ Params: NoteParams }>(`${ENV}/notes/:noteId`, async (req, reply) => {
    try {
      queryOf(req, []);
      const out = await callUnary(services.note, NoteService.method.getNote, { scope: scopeOf(req.params), noteId: req.params.noteId }, callOptions(req, reply, "api"));
      return reply.send(protoJson(NoteSchema, out.note ?? create(NoteSchema)));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.patch<{ Params: NoteParams }>(`${ENV}/notes/:noteId`, async (req, reply) => {
    try {
      queryOf(req, []);
      const b = jsonObjectBody(req);
      const init = { scope: scopeOf(req.params), noteId: req.params.noteId, title: stringField(b, "title"), archived: boolField(b, "archived") };
      const out = await callUnary(services.note, NoteService.method.updateNote, init, callOptions(req, reply, "api"));
      return reply.send(protoJson(NoteSchema, out.note ?? create(NoteSchema)));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.delete<{ Params: NoteParams }>(`${ENV}/notes/:noteId`, async (req, reply) => {
    try {
      queryOf(req, []);
      await callUnary(services.note, NoteService.method.deleteNote, { scope: scopeOf(req.params), noteId: req.params.noteId }, callOptions(req, reply, "api"));
      return reply.code(204).send();
    } catch (err) {
      return sendError(reply, err);
    }
  });

  app.post<{ Params: NoteParams }>(`${ENV}/notes/:noteId/messages`, async (req, reply) => {
    try {
      queryOf(req, []);
      const b = jsonObjectBody(req);
      const init = { scope: scopeOf(req.params), noteId: req.params.noteId, content: stringField(b, "content") ?? "" };
      const out = await callUnary(services.note, NoteService.method.addNoteMessage, init, callOptions(req, reply, "api"));
      return reply.code(201).send(protoJson(NoteMessageSchema, out.message ?? create(NoteMessageSchema)));
    } catch (err) {
      return sendError(reply, err);
    }
  });

  registerOpenApiRoute(app, { serverUrl: deps.config.publicBaseUrl, rateLimitPerMinute: deps.config.apiRateLimitPerMinute });
}
