// GET /openapi.json: the OpenAPI 3.1 description of every plain-HTTP route of the gateway.
// Schemas are generated from the protobuf message descriptors (the REST bodies are the
// ProtoJSON of those messages), so they cannot drift from the implementation.
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance } from "fastify";
import { ActivityLogEntrySchema, AdminLogEntrySchema, ListActivityLogsResponseSchema, ListAdminLogsResponseSchema } from "../../gen/runhook/v1/log_pb.js";
import { AddNoteMessageRequestSchema, CreateNoteRequestSchema, ListNotesResponseSchema, NoteMessageSchema, NoteSchema, UpdateNoteRequestSchema } from "../../gen/runhook/v1/note_pb.js";
import { RunSchema } from "../../gen/runhook/v1/run_pb.js";
import { TriggerRunResponseSchema } from "../../gen/runhook/v1/trigger_pb.js";
import { DEFAULT_LIMIT, MAX_LIMIT } from "../domain/logs/cursor.js";
import { MAX_WAIT_SECONDS } from "../api/runs.js";
import { MAX_JSON_DEPTH } from "../json-depth.js";

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

/** Component name of a message: its name for runhook's own, the full name otherwise. */
function nameOf(desc: DescMessage): string {
  return desc.typeName.startsWith("runhook.v1.") ? desc.typeName.slice("runhook.v1.".length) : desc.typeName.replace(/\./g, "_");
}

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int64", minimum: 0 };
    default:
      // 64-bit integers are strings in ProtoJSON (numbers are accepted on input).
      return { type: ["string", "integer"], format: "int64" };
  }
}

/** JSON Schemas of messages, collected into `schemas` by name as they are reached. */
class SchemaBuilder {
  readonly schemas: Record<string, Schema> = {};

  messageRef(desc: DescMessage): Schema {
    switch (desc.typeName) {
      case "google.protobuf.Timestamp":
        return { type: "string", format: "date-time" };
      case "google.protobuf.Duration":
        return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" };
      case "google.protobuf.Struct":
        return { type: "object", additionalProperties: true };
      case "google.protobuf.Value":
        return {};
      case "google.protobuf.ListValue":
        return { type: "array" };
      case "google.protobuf.Empty":
        return { type: "object", additionalProperties: false };
    }
    const name = nameOf(desc);
    if (!this.schemas[name]) {
      this.schemas[name] = {}; // placeholder against recursion
      this.schemas[name] = this.response(desc);
    }
    return ref(name);
  }

  /** The message as an object schema; `omit` drops fields that the REST path carries elsewhere. */
  object(desc: DescMessage, omit: string[] = []): Schema {
    const properties: Record<string, Schema> = {};
    for (const f of desc.fields) if (!omit.includes(f.name)) properties[f.jsonName] = this.field(f);
    return { type: "object", properties };
  }

  /**
   * The message as the gateway answers it (ProtoJSON with implicit defaults emitted): fields
   * with implicit presence (plain scalars, enums, lists, maps) are always there; `optional`
   * scalars, messages and oneof members only when set; nothing else.
   */
  response(desc: DescMessage): Schema {
    const required = desc.fields.filter((f) => f.fieldKind === "list" || f.fieldKind === "map" || ((f.fieldKind === "scalar" || f.fieldKind === "enum") && !f.oneof && f.presence === FeatureSet_FieldPresence.IMPLICIT)).map((f) => f.jsonName);
    return { ...this.object(desc), ...(required.length ? { required } : {}), additionalProperties: false };
  }

  field(f: DescField): Schema {
    switch (f.fieldKind) {
      case "scalar":
        return scalarSchema(f.scalar);
      case "enum":
        return { type: "string", enum: f.enum.values.map((v) => v.name) };
      case "message":
        return this.messageRef(f.message);
      case "list":
        return {
          type: "array",
          items: f.listKind === "scalar" ? scalarSchema(f.scalar) : f.listKind === "enum" ? { type: "string", enum: f.enum.values.map((v) => v.name) } : this.messageRef(f.message),
        };
      case "map":
        return {
          type: "object",
          additionalProperties: f.mapKind === "scalar" ? scalarSchema(f.scalar) : f.mapKind === "enum" ? { type: "string", enum: f.enum.values.map((v) => v.name) } : this.messageRef(f.message),
        };
    }
  }
}

/**
 * A JSON request body as the /v1 routes read it: required fields are non-empty strings; an
 * optional field may also be null, which counts as absent (ProtoJSON); unknown fields are ignored.
 */
function requestBody(obj: Schema, required: string[]): Schema {
  const properties = obj.properties as Record<string, Schema>;
  for (const [name, p] of Object.entries(properties)) {
    if (required.includes(name)) properties[name] = { ...p, minLength: 1 };
    else if (typeof p.type === "string") properties[name] = { ...p, type: [p.type, "null"] };
  }
  return { ...obj, ...(required.length ? { required } : {}) };
}

/** RFC 3339 times as the list parameters take them (`from`, `to`), or "" for no bound. */
const TIME_PARAM: Schema = {
  anyOf: [
    { type: "string", format: "date-time", pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-5][0-9](\\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$" },
    { type: "string", maxLength: 0 },
  ],
};

/**
 * `wait` of GET /v1/runs/{runId}: empty, or at most MAX_WAIT_SECONDS (60) as seconds (`30`,
 * `30s`), milliseconds (`500ms`, rounded up) or minutes (`1m`), in at most 6 digits.
 */
const WAIT_PATTERN =
  "^(" +
  ["", "0{0,4}[0-9](s)?", "0{0,4}[1-5][0-9](s)?", "0{0,4}60(s)?", "0{0,5}[0-9]ms", "0{0,4}[1-9][0-9]ms", "0{0,3}[1-9][0-9]{2}ms", "0{0,2}[1-9][0-9]{3}ms", "0?[1-5][0-9]{4}ms", "0?60000ms", "0{0,5}[01]m"].join("|") +
  ")$";

const ERROR_STATUS: Record<number, string> = {
  400: `Bad parameter or body (not JSON, a Content-Type other than application/json, JSON nested deeper than ${MAX_JSON_DEPTH} levels), or a cursor issued for other filters`,
  401: "Missing, expired, revoked or invalid bearer token",
  403: "Token of another project (or its creator is no longer a project admin)",
  404: "Unknown environment, note or run",
  409: "Conflict",
  413: "Request body too large",
  429: "Throttled (the token's budget is shared with its LogService and NoteService RPCs); wait Retry-After seconds (apply exponential backoff)",
};

export function buildOpenApi(opts: { serverUrl?: string; rateLimitPerMinute?: number } = {}): Schema {
  const b = new SchemaBuilder();
  for (const m of [ListActivityLogsResponseSchema, ListAdminLogsResponseSchema, ListNotesResponseSchema, NoteSchema, NoteMessageSchema, RunSchema, ActivityLogEntrySchema, AdminLogEntrySchema]) b.messageRef(m);
  const schemas = b.schemas;
  schemas.Error = {
    type: "object",
    required: ["error", "code"],
    properties: {
      error: { type: "string", description: "Human-readable message" },
      code: { type: "string", description: "Connect error code, e.g. not_found, invalid_argument, resource_exhausted" },
      runId: { type: "string", description: "The ongoing run (webhook 409 only)" },
    },
    additionalProperties: false,
  };
  schemas.CreateNoteBody = requestBody(b.object(CreateNoteRequestSchema, ["scope"]), ["collection", "recordId", "content"]);
  schemas.UpdateNoteBody = requestBody(b.object(UpdateNoteRequestSchema, ["scope", "note_id"]), []);
  schemas.AddNoteMessageBody = requestBody(b.object(AddNoteMessageRequestSchema, ["scope", "note_id"]), ["content"]);
  schemas.WebhookRequest = {
    type: "object",
    required: ["record_id"],
    properties: { record_id: { type: "string", minLength: 1, maxLength: 1024, description: "Packed record id (composite keys joined with |), at most 1024 characters (Unicode code points; no lone surrogates)" } },
    additionalProperties: true,
  };
  schemas.WebhookAccepted = b.response(TriggerRunResponseSchema);

  const limit = opts.rateLimitPerMinute ?? 600;
  const rateHeaders = {
    "X-RateLimit-Limit": { description: `Requests allowed per minute for this token (default ${600})`, schema: { type: "integer" } },
    "X-RateLimit-Remaining": { description: "Requests left in the current window", schema: { type: "integer" } },
    "X-RateLimit-Reset": { description: "Unix time (seconds) when the window frees", schema: { type: "integer" } },
    RateLimit: { description: "IETF draft form: limit=N, remaining=N, reset=<seconds from now>", schema: { type: "string" } },
    "RateLimit-Policy": { description: `IETF draft form, e.g. ${limit};w=60`, schema: { type: "string" } },
  };
  const json = (schema: Schema) => ({ "application/json": { schema } });
  const BODY_NOTE = "Send `Content-Type: application/json` (parameters such as `; charset=utf-8` are fine, in any case; no Content-Type is read as JSON); any other media type is a 400.";
  const jsonBody = (schema: Schema) => ({ required: true, description: BODY_NOTE, content: json(schema) });
  const errors = (codes: number[], headers?: Schema) =>
    Object.fromEntries(
      codes.map((c) => [
        String(c),
        {
          description: ERROR_STATUS[c],
          content: json(ref("Error")),
          ...(headers || c === 429 ? { headers: { ...(headers ?? {}), ...(c === 429 ? { "Retry-After": { description: "Seconds to wait", schema: { type: "integer" } } } : {}) } } : {}),
        },
      ]),
    );
  const ok = (description: string, content: Schema, status = "200") => ({ [status]: { description, headers: rateHeaders, content } });

  const path = (name: string, description: string) => ({ name, in: "path", required: true, description, schema: { type: "string" } });
  const query = (name: string, description: string, schema: Schema = { type: "string" }) => ({ name, in: "query", required: false, description, schema });
  const runIdParam = (description: string) => ({ name: "runId", in: "path", required: true, description, schema: { type: "string", format: "uuid" } });
  const projectName = path("projectName", "Project name");
  const environmentName = path("environmentName", "Environment name");
  const noteId = path("noteId", "Note id");
  // An empty value (`order=`, `from=`…) is the same as leaving the parameter out, so every
  // optional parameter but `limit` also admits "" (the schemas say exactly what the server takes).
  const listParams = [
    query("limit", `Page size, 1 to ${MAX_LIMIT} (default ${DEFAULT_LIMIT}); ignored by the NDJSON export`, { type: "integer", minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }),
    query("cursor", "Opaque cursor from a previous nextCursor; bound to the filters, order and time range it was issued with"),
    query("order", "asc (default, oldest first) or desc; empty: asc", { type: "string", enum: ["asc", "desc", ""], default: "asc" }),
    query("from", "Only entries at or after this RFC 3339 time (at most 9 fractional digits); empty: no bound", TIME_PARAM),
    query("to", "Only entries before this RFC 3339 time (at most 9 fractional digits); empty: no bound", TIME_PARAM),
  ];
  const apiErrors = (...extra: number[]) => errors([400, 401, 403, 404, ...extra, 429], rateHeaders);
  const ndjsonNote = "With `Accept: application/x-ndjson` the whole selection is streamed, one entry per line, with no page limit.";

  const V = "/v1/project/{projectName}/environment/{environmentName}";
  const paths: Schema = {
    [`${V}/activity-logs`]: {
      get: {
        operationId: "listActivityLogs",
        tags: ["Activity logs"],
        summary: "List the activity log of an environment",
        description: `Stable order by id. With order=asc, nextCursor is always returned: polling it yields every entry exactly once, in order (tailing). ${ndjsonNote}`,
        parameters: [projectName, environmentName, ...listParams, ...["userId", "userEmail", "action", "collection", "recordId", "runId"].map((n) => query(n, `Only entries with this ${n}`))],
        responses: {
          ...ok("A page of entries", { ...json(ref("ListActivityLogsResponse")), "application/x-ndjson": { schema: ref("ActivityLogEntry") } }),
          ...apiErrors(),
        },
      },
    },
    "/v1/project/{projectName}/admin-logs": {
      get: {
        operationId: "listAdminLogs",
        tags: ["Admin logs"],
        summary: "List the admin log of a project",
        description: `Configuration and administrative operations of the project (organization-level entries are not included). ${ndjsonNote}`,
        parameters: [projectName, ...listParams, ...["userId", "userEmail", "action"].map((n) => query(n, `Only entries with this ${n} (of the actor)`))],
        responses: {
          ...ok("A page of entries", { ...json(ref("ListAdminLogsResponse")), "application/x-ndjson": { schema: ref("AdminLogEntry") } }),
          ...apiErrors(),
        },
      },
    },
    [`${V}/notes`]: {
      get: {
        operationId: "listNotes",
        tags: ["Notes"],
        summary: "List notes",
        description: "Ordered by creation; from/to apply to createdAt.",
        parameters: [
          projectName,
          environmentName,
          ...listParams,
          query("collection", "Only notes on this collection"),
          query("recordId", "Only notes on this packed record id"),
          query("userId", "Only notes by this author"),
          query("archived", "true: only archived notes; false: only not archived; empty: both", { type: "string", enum: ["true", "false", ""] }),
        ],
        responses: { ...ok("A page of notes", json(ref("ListNotesResponse"))), ...apiErrors() },
      },
      post: {
        operationId: "createNote",
        tags: ["Notes"],
        summary: "Create a note with its first message",
        description: "The author is the admin who generated the token. content is HTML, sanitized with an allow-list, at most 64 KiB; title at most 500 characters. An unknown collection is a 400.",
        parameters: [projectName, environmentName],
        requestBody: jsonBody(ref("CreateNoteBody")),
        responses: { ...ok("The note", json(ref("Note")), "201"), ...apiErrors(413) },
      },
    },
    [`${V}/notes/{noteId}`]: {
      get: {
        operationId: "getNote",
        tags: ["Notes"],
        summary: "Get a note with its messages",
        parameters: [projectName, environmentName, noteId],
        responses: { ...ok("The note", json(ref("Note"))), ...apiErrors() },
      },
      patch: {
        operationId: "updateNote",
        tags: ["Notes"],
        summary: "Change the title, archive or unarchive",
        parameters: [projectName, environmentName, noteId],
        requestBody: jsonBody(ref("UpdateNoteBody")),
        responses: { ...ok("The note", json(ref("Note"))), ...apiErrors(413) },
      },
      delete: {
        operationId: "deleteNote",
        tags: ["Notes"],
        summary: "Delete a note (afterwards it is 404)",
        parameters: [projectName, environmentName, noteId],
        responses: { "204": { description: "Deleted", headers: rateHeaders }, ...apiErrors() },
      },
    },
    [`${V}/notes/{noteId}/messages`]: {
      post: {
        operationId: "addNoteMessage",
        tags: ["Notes"],
        summary: "Reply to a note",
        parameters: [projectName, environmentName, noteId],
        requestBody: jsonBody(ref("AddNoteMessageBody")),
        responses: { ...ok("The message", json(ref("NoteMessage")), "201"), ...apiErrors(413) },
      },
    },
    "/v1/runs/{runId}": {
      get: {
        operationId: "getRun",
        tags: ["Runs"],
        summary: "Follow a run",
        description:
          "Token: an application token of a user allowed to trigger the workflow, or a project API token of the run's project. " +
          "Without `wait` the run is answered at once. With `wait` and no `version` (or `version=0`) the answer comes once the run is finished (SUCCEEDED, FAILED or CANCELLED) or the wait is over, whichever is first. " +
          "With `wait` and `version` it comes as soon as the run's version differs from it, the run is finished, or the wait is over (then with the same version). A finished run is always answered at once.",
        parameters: [
          runIdParam("Run id (UUID) returned by the webhook"),
          query("wait", `Long-poll for at most this long: \`30s\`, \`30\` (seconds), \`1m\` or \`500ms\` (rounded up to whole seconds); at most ${MAX_WAIT_SECONDS}s; empty: no wait`, { type: "string", pattern: WAIT_PATTERN }),
          query("version", "The run's `version` the caller already has: answer as soon as it changes. Absent, empty or 0: wait until the run is finished", { type: "string", pattern: "^([0-9]{1,15})?$" }),
        ],
        responses: { ...ok("The run", json(ref("Run"))), ...apiErrors() },
      },
    },
    "/v1/runs/{runId}/cancel": {
      post: {
        operationId: "cancelRun",
        tags: ["Runs"],
        summary: "Cancel an ongoing run",
        description: "Takes no body: an empty one (or any) is accepted whatever its Content-Type. Application tokens only (a project API token is 403). A finished run is a 400 failed_precondition.",
        parameters: [runIdParam("Run id")],
        responses: { ...ok("The run", json(ref("Run"))), ...apiErrors(409) },
      },
    },
    "/hooks/{key}": {
      post: {
        operationId: "triggerWebhook",
        tags: ["Webhook"],
        summary: "Start a workflow run on one record",
        description:
          "The full URL is copied from the workflow's trigger settings; treat it as a credential. Asynchronous: answers once the run is queued. " +
          "Checks run in order (key 400, token 401, webhook 404/400, permission 403, rate limit 429, body 400, ongoing run 409); the first that fails answers. " +
          `The body is checked at its place in that order: a Content-Type other than application/json (parameters such as \`; charset=utf-8\` are fine, in any case; none is read as JSON) is a 400 invalid_argument "Content-Type must be application/json, got …", like invalid JSON, JSON nested deeper than ${MAX_JSON_DEPTH} levels or a missing record_id. A body over the size limit is a 413 before any check.`,
        parameters: [path("key", "Signed webhook key (part of the webhook URL)")],
        security: [{ bearer: [] }],
        requestBody: jsonBody(ref("WebhookRequest")),
        responses: {
          "202": { description: "Run created and queued", content: json(ref("WebhookAccepted")) },
          "400": {
            description: `Malformed, tampered or superseded URL; or a bad body: not JSON, not an object, record_id missing, not a string or empty, a Content-Type other than application/json, JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
            content: json(ref("Error")),
          },
          ...errors([401, 403, 404]),
          "409": { description: "A run of this workflow is already ongoing on this record", content: json(ref("Error")) },
          ...errors([413, 429]),
        },
      },
    },
    "/healthz": { get: { operationId: "healthz", tags: ["Operations"], summary: "Liveness", security: [], responses: { "200": { description: "Alive", content: json({ type: "object", properties: { status: { type: "string" } } }) } } } },
    "/readyz": {
      get: {
        operationId: "readyz",
        tags: ["Operations"],
        summary: "Readiness (database reachable)",
        security: [],
        responses: {
          "200": { description: "Ready", content: json({ type: "object", properties: { status: { type: "string" } } }) },
          "503": { description: "Database unreachable", content: json(ref("Error")) },
        },
      },
    },
    "/openapi.json": {
      get: { operationId: "openapi", tags: ["Operations"], summary: "This document", security: [], responses: { "200": { description: "OpenAPI 3.1 document", content: json({ type: "object" }) } } },
    },
  };

  return {
    openapi: "3.1.0",
    info: {
      title: "runhook",
      version: "1.0.0",
      description:
        "Signed webhooks that start workflow runs on one record, and the public API (/v1) for activity logs, admin logs and notes. Every error answer has the body {error, code}. " +
        "Slow clients: request headers must arrive within RUNHOOK_HTTP_HEADERS_TIMEOUT_MS (10 s by default) and the whole request within RUNHOOK_HTTP_REQUEST_TIMEOUT_MS (30 s), otherwise the answer is 408 {error, code: deadline_exceeded} and the connection is closed; answers themselves (long-polls, exports) may take longer.",
    },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
    security: [{ bearer: [] }],
    tags: ["Activity logs", "Admin logs", "Notes", "Runs", "Webhook", "Operations"].map((name) => ({ name })),
    paths,
    components: {
      schemas,
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "Project API token (/v1), or application token (webhook, /v1/runs)" } },
    },
  };
}

export function registerOpenApiRoute(app: FastifyInstance, opts: { serverUrl?: string; rateLimitPerMinute?: number } = {}): void {
  let doc: Schema | undefined;
  app.get("/openapi.json", async (_req, reply) => {
    doc ??= buildOpenApi(opts);
    return reply.header("cache-control", "public, max-age=300").send(doc);
  });
}
