// Every plain-HTTP route of the gateway, in one place. The /v1 table (API_ROUTES) says, per
// route, which RPC it calls and how the request and the answer map to its messages; v1.ts
// registers the Fastify routes from it and openapi.ts documents them from it (a route the
// published document has is documented there, with the additions marked here).
// The routes with handlers of their own (the webhook, health, this document) are listed
// after it (OTHER_ROUTES), with their documentation, and registered from their paths here.
import {
  fromJson,
  type DescMessage,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type JsonValue,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { ActivityLogEntrySchema, AdminLogEntrySchema, ListLogKeysResponseSchema, LogService } from "../../gen/runhook/v1/log_pb.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import {
  CreateRunBatchRequestSchema,
  ListRunBatchesResponseSchema,
  ListRunsResponseSchema,
  RunBatchSchema,
  RunSchema,
  RunService,
} from "../../gen/runhook/v1/run_pb.js";
import { TriggerRunResponseSchema } from "../../gen/runhook/v1/trigger_pb.js";
import { MAX_IDEMPOTENCY_KEY_LENGTH } from "../domain/idempotency.js";
import { DEFAULT_LIMIT, MAX_LIMIT } from "../domain/logs/cursor.js";
import { MAX_WAIT_SECONDS } from "../services/runs.js";
import { MAX_JSON_DEPTH } from "../lib/json-depth.js";
import { MAX_NOTE_TITLE_CHARS } from "../domain/notes/threads.js";
import { MAX_NOTE_CONTENT_BYTES } from "../domain/notes/sanitize.js";
import { MAX_RECORD_ID_CHARS } from "../domain/runs/records.js";
import { fail } from "../domain/errors.js";
import {
  activityFilter,
  activityItem,
  adminFilter,
  adminItem,
  noteFilter,
  noteItem,
  noteMessageItem,
  parametersOf,
  publishedOptions,
  refuseEmpty,
  timeParams,
} from "./published.js";
import { BEARER, errorAnswer, errorResponses, json, jsonBody, pathParam, ref, requestBody, type Schema, type SchemaBuilder } from "./openapi-schemas.js";
import { boolField, listOptions, listParam, runWait, stringField, stringFilters, TIME_SCHEMA, timeParam, WAIT_SCHEMA, type QueryReader } from "./params.js";

/** The media type of the log exports: one ProtoJSON entry per line. */
export const NDJSON = "application/x-ndjson";

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE";

/** A query parameter a route takes, as the document describes it (a published one: as the published document does). */
export interface QueryParam {
  name: string;
  description?: string;
  schema?: Schema;
  /** runhook's addition to a published operation (marked as an extension in /openapi.json). */
  addition?: true;
}

/** What a route's request mapping reads. */
export interface RouteInput {
  params: Record<string, string>;
  query: QueryReader;
  /** The JSON object body (400 when absent, not JSON or not an object); read only by routes that take one. */
  body(): Record<string, unknown>;
  /** The JSON object body, or {} when there is none. */
  optionalBody(): Record<string, unknown>;
}

/** The documentation of a route of runhook's own (those of the published document are documented there). */
export interface RouteDoc {
  tag: string;
  summary: string;
  description?: string;
  /** Description of the success answer. */
  answer: string;
  /** An example success answer. */
  example?: Schema;
  /** The success answer's schema, when it is not the ProtoJSON of `response` (a published item: openapi.ts names them by their `object`). */
  schema?: Schema;
  /** Documented as this published operation (`GET /path`): its parameters and answers, less the path parameters this route lacks. */
  like?: string;
  /** The JSON body: its component name and schema. */
  body?: { name: string; schema: Schema };
  /** Error statuses besides 400, 401, 403, 404 and 429. */
  errors?: number[];
  /** Path parameters described otherwise than PATH_PARAMS does. */
  pathParams?: Record<string, string>;
}

interface RouteSpec<I extends DescMessage, O extends DescMessage, R extends DescMessage> {
  method: HttpMethod;
  /** OpenAPI form (`{name}`); routeUrl() gives Fastify's. */
  path: string;
  rpc: DescMethodUnary<I, O>;
  status: 200 | 201 | 202 | 204;
  /** The query parameters taken, in the order a 400 lists them. */
  query?: readonly QueryParam[];
  /** Ignore unknown query parameters, and refuse a repeated one only when it is read (GET /v1/runs has always done so). */
  lenientQuery?: true;
  request(input: RouteInput): MessageInitShape<I>;
  /** The message answered as ProtoJSON, and where the RPC's answer holds it; none: an empty answer. */
  response?: { message: R; of(out: MessageShape<O>): MessageShape<R> | undefined };
  /** The answer in the published document's shape, made from the RPC's (instead of `response`). */
  published?: (out: MessageShape<O>, input: RouteInput) => unknown;
  /**
   * With `Accept: application/x-ndjson`: the streaming RPC called with the same request, the
   * message of its lines, and each line as JSON (ProtoJSON of the message unless `line` says).
   */
  export?: { rpc: DescMethodServerStreaming<DescMessage, DescMessage>; entry: DescMessage; line?: (entry: unknown) => unknown };
  /** Absent for an operation of the published document (same method and path), which documents it. */
  doc?: RouteDoc;
}

export type ApiRoute = RouteSpec<DescMessage, DescMessage, DescMessage>;

/**
 * One table entry: `method path` calls `rpc`; the rest says how (status 200 unless given).
 * Checks the route's mappings against its RPC's messages, then keeps it with the others.
 */
function route<I extends DescMessage, O extends DescMessage, R extends DescMessage>(
  at: `${HttpMethod} /${string}`,
  rpc: DescMethodUnary<I, O>,
  spec: Omit<RouteSpec<I, O, R>, "method" | "path" | "rpc" | "status"> & { status?: 201 | 202 | 204 },
): ApiRoute {
  const [method, path] = at.split(" ") as [HttpMethod, string];
  return { method, path, rpc, status: 200, ...spec } as unknown as ApiRoute;
}

/** Fastify's form of a path: `{name}` → `:name`; with `wildcard`, the last parameter takes the rest of the path. */
export function routeUrl(path: string, wildcard = false): string {
  const url = wildcard ? path.replace(/\{[^}]+\}$/, "*") : path;
  return url.replace(/\{([^}]+)\}/g, ":$1");
}

/** Path parameters as most routes describe them. */
export const PATH_PARAMS: Record<string, { description: string; schema?: Schema }> = {
  projectName: { description: "Project name" },
  environmentName: { description: "Environment name" },
  noteId: { description: "The note's id (its number)", schema: { type: "integer", minimum: 1 } },
  runId: { description: "Run id", schema: { type: "string", format: "uuid" } },
  batchId: { description: "Run batch id", schema: { type: "string", format: "uuid" } },
};

// An empty value (`order=`, `from=`…) is the same as leaving the parameter out, so every
// optional parameter but `limit` also admits "" (the schemas say exactly what the server takes).
const LIST_QUERY: QueryParam[] = [
  {
    name: "limit",
    description: `Page size, 1 to ${MAX_LIMIT} (default ${DEFAULT_LIMIT}); ignored by the NDJSON export`,
    schema: { type: "integer", minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT },
  },
  {
    name: "cursor",
    description:
      "Opaque cursor from a previous nextCursor; bound to the filters, order and time range it was issued with. An ascending cursor whose next entries were removed by retention is a 400 failed_precondition",
  },
  { name: "order", description: "asc (default, oldest first) or desc; empty: asc", schema: { type: "string", enum: ["asc", "desc", ""], default: "asc" } },
  { name: "from", description: "Only entries at or after this RFC 3339 time (at most 9 fractional digits); empty: no bound", schema: TIME_SCHEMA },
  { name: "to", description: "Only entries before this RFC 3339 time (at most 9 fractional digits); empty: no bound", schema: TIME_SCHEMA },
];

const ENV = "/v1/project/{projectName}/environment/{environmentName}";

/** A note's id in /v1: its number, as the document has it (anything else is an unknown note). */
function publishedNoteId(id: string): string {
  if (!/^[1-9][0-9]{0,14}$/.test(id)) throw fail.notFound("unknown note");
  return id;
}
const scopeOf = (p: Record<string, string>) => ({ projectName: p.projectName!, environmentName: p.environmentName! });

/** What a published list answers: the document's envelope and items, with runhook's cursor at the top level. */
interface PublishedPage {
  hasMore: boolean;
  nextCursor?: string;
}

/** The envelope of a published list: `hasMore`, `parameters` (as the request gave the document's), `data`, and runhook's `nextCursor`. */
function envelope(page: PublishedPage, data: unknown[], input: RouteInput, names: readonly string[]) {
  return {
    hasMore: page.hasMore,
    parameters: parametersOf(input.params, input.query, names),
    data,
    ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
  };
}

// runhook's additions to the published lists (marked as extensions in /openapi.json).
const CURSOR: QueryParam = {
  name: "cursor",
  addition: true,
  description:
    "runhook's cursor: nextCursor of a previous page, bound to the filters and order it was issued with. With order=asc, nextCursor is always returned: polling it yields every entry exactly once, in order (tailing). An ascending cursor whose next entries were removed by retention is a 400 failed_precondition",
};
const ORDER: QueryParam = {
  name: "order",
  addition: true,
  description: "runhook's order: desc (the document's, newest first; the default) or asc (oldest first, the tail)",
  schema: { type: "string", enum: ["asc", "desc", ""], default: "desc" },
};

/** The published query parameters of these names (the published document describes them). */
const publishedParams = (names: readonly string[]): QueryParam[] => names.map((name) => ({ name }));

const ACTIVITY_PARAMS = ["limit", "userEmail", "userId", "teamName", "collectionName", "recordId", "action", "type", ...timeParams("createdAt")] as const;
const ADMIN_PARAMS = ["limit", "userEmail", "userId", "type", "initiator", "resource", ...timeParams("createdAt")] as const;
const NOTE_PARAMS = [
  "limit",
  "userEmail",
  "userId",
  "teamName",
  "collectionName",
  "recordId",
  ...timeParams("createdAt"),
  ...timeParams("updatedAt"),
  ...timeParams("archivedAt"),
] as const;

/**
 * A published log list: the document's parameters and answer, runhook's cursor and order, and
 * with `Accept: application/x-ndjson` the whole selection, one published item a line.
 */
function logList<I extends DescMessage, O extends DescMessage, E extends DescMessage>(
  at: `GET /${string}`,
  rpc: DescMethodUnary<I, O>,
  exported: { rpc: DescMethodServerStreaming<DescMessage, DescMessage>; entry: E },
  spec: {
    params: readonly string[];
    additions?: QueryParam[];
    request: RouteSpec<I, O, O>["request"];
    items(out: MessageShape<O>): { page: PublishedPage; data: unknown[] };
    item(entry: MessageShape<E>): unknown;
    doc?: RouteDoc;
  },
): ApiRoute {
  return route(at, rpc, {
    query: [...publishedParams(spec.params), CURSOR, ORDER, ...(spec.additions ?? [])],
    request: (input) => {
      refuseEmpty(input.query, spec.params);
      return spec.request(input);
    },
    published: (out, input) => {
      const { page, data } = spec.items(out);
      return envelope(page, data, input, spec.params);
    },
    export: { ...exported, line: spec.item as (entry: unknown) => unknown },
    doc: spec.doc,
  });
}

const LOG_ROUTES = [
  logList(
    `GET ${ENV}/activity-logs`,
    LogService.method.listActivityLogs,
    { rpc: LogService.method.exportActivityLogs, entry: ActivityLogEntrySchema },
    {
      params: ACTIVITY_PARAMS,
      additions: [{ name: "runId", addition: true, description: "runhook's filter: only entries of this run" }],
      request: ({ params, query }) => ({ ...scopeOf(params), options: publishedOptions(query), filter: activityFilter(query) }),
      items: (out) => ({ page: out, data: out.activityLogs.map(activityItem) }),
      item: activityItem,
    },
  ),
  logList(
    "GET /v1/project/{projectName}/admin-logs",
    LogService.method.listAdminLogs,
    { rpc: LogService.method.exportAdminLogs, entry: AdminLogEntrySchema },
    {
      params: ADMIN_PARAMS,
      request: ({ params, query }) => ({ projectName: params.projectName!, options: publishedOptions(query), filter: adminFilter(query) }),
      items: (out) => ({ page: out, data: out.adminLogs.map(adminItem) }),
      item: adminItem,
    },
  ),
  logList(
    "GET /v1/organization/admin-logs",
    LogService.method.listOrganizationAdminLogs,
    { rpc: LogService.method.exportOrganizationAdminLogs, entry: AdminLogEntrySchema },
    {
      params: ADMIN_PARAMS,
      request: ({ query }) => ({ options: publishedOptions(query), filter: adminFilter(query) }),
      items: (out) => ({ page: out, data: out.adminLogs.map(adminItem) }),
      item: adminItem,
      doc: {
        tag: "Admin logs",
        like: "GET /v1/project/{projectName}/admin-logs",
        summary: "List the admin log of the organization",
        description:
          "runhook's addition, answered as the published admin-log list. Token: an organization API token (made by an organization admin with AdminService.CreateOrganizationApiToken); it reads its own organization's entries only, and a project API token or an application token is a 403 here. " +
          "The organization's own entries: those that belong to no project (Bootstrap's, those about users without a project role, organization API tokens created and revoked); project entries are in each project's admin log. " +
          "Its own per-token limits: RUNHOOK_ORG_API_RATE_LIMIT, RUNHOOK_ORG_API_RATE_LIMIT_HOURLY and RUNHOOK_ORG_API_RATE_LIMIT_DAILY (by default the same as the project API tokens').",
        answer: "A page of entries",
      },
    },
  ),
];

const LOG_KEYS_DESCRIPTION =
  "The public keys that sign the log's digests (the `{\"digest\": …}` lines of the NDJSON export): Ed25519, each `publicKey` the raw 32 bytes in base64, `id` as a digest's `keyId` names it. " +
  "The key marked `current` signs new digests; the earlier keys stay listed while they are configured, so that older digests still verify. The keys are the server's, the same for every log: save this answer beside an archive, and `runhook logs verify FILE --key` checks the archive with it offline.";

const LOG_KEYS_EXAMPLE = { keys: [{ id: "k2", algorithm: "Ed25519", publicKey: "Hx2o0YyJ6A6ysVf7n0r4ZmNuxZ7zRZ8o1yq0b0B6X0s=", current: true }] };

/** GET …/log-keys of one log: ListLogKeys with the path's names. */
function logKeysRoute(at: `GET /${string}`, token: string): ApiRoute {
  return route(at, LogService.method.listLogKeys, {
    request: ({ params }) => ({ projectName: params.projectName ?? "", environmentName: params.environmentName ?? "" }),
    response: { message: ListLogKeysResponseSchema, of: (out) => out },
    doc: {
      tag: "Logs",
      summary: "The public keys of the log's digests",
      description: `${LOG_KEYS_DESCRIPTION} Token: ${token}.`,
      answer: "The keys",
      example: LOG_KEYS_EXAMPLE,
    },
  });
}

const LOG_KEY_ROUTES = [
  logKeysRoute(`GET ${ENV}/log-keys`, "a project API token of the project"),
  logKeysRoute("GET /v1/project/{projectName}/log-keys", "a project API token of the project"),
  logKeysRoute("GET /v1/organization/log-keys", "an organization API token"),
];

/** The published note item (openapi.ts names the published items by their `object`). */
const PUBLISHED_NOTE = ref("note");
const NOTE_CONTENT: Schema = { type: "string", description: "HTML, sanitized on write with an allow-list" };

// The published name of the collection is collectionName; collection is read when it is absent or empty.
const CREATE_NOTE_BODY: Schema = {
  ...requestBody(
    {
      type: "object",
      properties: {
        collectionName: { type: "string", description: "The collection (its name in the environment)" },
        collection: { type: "string", description: "The collection, when collectionName is absent or empty" },
        recordId: { type: "string" },
        title: { type: "string" },
        content: NOTE_CONTENT,
      },
    },
    ["recordId", "content"],
  ),
  anyOf: [{ required: ["collectionName"] }, { required: ["collection"] }],
};

const NOTE_ROUTES = [
  route(`GET ${ENV}/notes`, NoteService.method.listNotes, {
    query: [...publishedParams(NOTE_PARAMS), CURSOR, ORDER],
    request: ({ params, query }) => {
      refuseEmpty(query, NOTE_PARAMS);
      return { scope: scopeOf(params), options: publishedOptions(query), filter: noteFilter(query) };
    },
    published: (out, input) =>
      envelope(
        out,
        out.notes.map((n) => noteItem(n, input.params.environmentName!)),
        input,
        NOTE_PARAMS,
      ),
  }),
  route(`POST ${ENV}/notes`, NoteService.method.createNote, {
    status: 201,
    request: ({ params, body }) => {
      const b = body();
      const text = (name: string) => stringField(b, name) ?? "";
      const collection = text("collectionName") || text("collection");
      return { scope: scopeOf(params), collection, recordId: text("recordId"), title: text("title"), content: text("content") };
    },
    published: (out, input) => noteItem(out.note!, input.params.environmentName!),
    doc: {
      tag: "Notes",
      summary: "Create a note with its first message",
      description: `The author is the admin who generated the token. content is HTML, sanitized with an allow-list, at most ${MAX_NOTE_CONTENT_BYTES / 1024} KiB; title plain text (no control characters, no HTML tags) of at most ${MAX_NOTE_TITLE_CHARS} characters; recordId at most ${MAX_RECORD_ID_CHARS} characters. An unknown collection is a 400.`,
      answer: "The note, with its first message",
      schema: PUBLISHED_NOTE,
      body: { name: "CreateNoteBody", schema: CREATE_NOTE_BODY },
      errors: [413],
    },
  }),
  route(`GET ${ENV}/notes/{noteId}`, NoteService.method.getNote, {
    request: ({ params }) => ({ scope: scopeOf(params), noteId: publishedNoteId(params.noteId!) }),
    published: (out, input) => noteItem(out.note!, input.params.environmentName!),
    doc: { tag: "Notes", summary: "Get a note with its messages", answer: "The note", schema: PUBLISHED_NOTE },
  }),
  route(`PATCH ${ENV}/notes/{noteId}`, NoteService.method.updateNote, {
    request: ({ params, body }) => {
      const b = body();
      return { scope: scopeOf(params), noteId: publishedNoteId(params.noteId!), title: stringField(b, "title"), archived: boolField(b, "archived") };
    },
    published: (out, input) => noteItem(out.note!, input.params.environmentName!),
    doc: {
      tag: "Notes",
      summary: "Change the title, archive or unarchive",
      answer: "The note",
      schema: PUBLISHED_NOTE,
      body: {
        name: "UpdateNoteBody",
        schema: requestBody(
          { type: "object", properties: { title: { type: "string" }, archived: { type: "boolean", description: "true archives, false unarchives" } } },
          [],
        ),
      },
      errors: [413],
    },
  }),
  route(`DELETE ${ENV}/notes/{noteId}`, NoteService.method.deleteNote, {
    status: 204,
    request: ({ params }) => ({ scope: scopeOf(params), noteId: publishedNoteId(params.noteId!) }),
    doc: { tag: "Notes", summary: "Delete a note (afterwards it is 404)", answer: "Deleted" },
  }),
  route(`POST ${ENV}/notes/{noteId}/messages`, NoteService.method.addNoteMessage, {
    status: 201,
    request: ({ params, body }) => ({ scope: scopeOf(params), noteId: publishedNoteId(params.noteId!), content: stringField(body(), "content") ?? "" }),
    published: (out) => noteMessageItem(out.message!),
    doc: {
      tag: "Notes",
      summary: "Reply to a note",
      answer: "The message",
      schema: ref("note-message"),
      body: { name: "AddNoteMessageBody", schema: requestBody({ type: "object", properties: { content: NOTE_CONTENT } }, ["content"]) },
      errors: [413],
    },
  }),
];

const RUN_GET_DESCRIPTION =
  "Token: an application token of a user allowed to trigger the workflow or of an admin of the project (or of its organization), or a project API token of the run's project. " +
  "Without `wait` the run is answered at once. With `wait` and no `version` (or `version=0`) the answer comes once the run is finished (SUCCEEDED, FAILED or CANCELLED) or the wait is over, whichever is first. " +
  "With `wait` and `version` it comes as soon as the run's version differs from it, the run is finished, or the wait is over (then with the same version). A finished run is always answered at once.";

// The run search takes the list parameters, newest first by default; from/to are on creation.
const RUN_LIST_QUERY: QueryParam[] = [
  ...LIST_QUERY.filter((q) => q.name === "limit" || q.name === "cursor"),
  {
    name: "order",
    description: "desc (default, newest first) or asc; empty: desc. The order is (creation time, id)",
    schema: { type: "string", enum: ["asc", "desc", ""], default: "desc" },
  },
  { name: "from", description: "Only runs created at or after this RFC 3339 time; empty: no bound", schema: TIME_SCHEMA },
  { name: "to", description: "Only runs created before this RFC 3339 time; empty: no bound", schema: TIME_SCHEMA },
  { name: "workflowId", description: "Only runs of this workflow: its full id (a UUID; anything else is a 400)" },
  {
    name: "workflowName",
    description: "Only runs of the workflows of the environment with exactly this name; a name of no workflow whose runs the token sees is a 400",
  },
  { name: "collection", description: "Only runs on this collection" },
  { name: "recordId", description: "Only runs on this packed record id: in collection when given, else in any collection of the environment" },
  {
    name: "state",
    description: "Only runs in these states, comma-separated: QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED",
    schema: { type: "string", pattern: "^((QUEUED|RUNNING|SUCCEEDED|FAILED|CANCELLED)(,(QUEUED|RUNNING|SUCCEEDED|FAILED|CANCELLED))*)?$" },
  },
  {
    name: "via",
    description: "Only runs started this way: webhook, grpc, api (/v1) or console",
    schema: { type: "string", enum: ["webhook", "grpc", "api", "console", ""] },
  },
  { name: "userId", description: "Only runs acting as this user (a token that sees only its user's runs may name only itself)" },
  { name: "finishedFrom", description: "Only runs finished at or after this RFC 3339 time; empty: no bound", schema: TIME_SCHEMA },
  { name: "finishedTo", description: "Only runs finished before this RFC 3339 time; empty: no bound", schema: TIME_SCHEMA },
];

const RUN_LIST_DESCRIPTION =
  "Token: a project API token of the project (every run), or an application token of a user with a role on the project: a project admin (or an organization admin) sees every run, another role the runs of the workflows it may trigger (in the rendering's team, with a trigger role that allows it), whoever started them. " +
  "Newest first by default, in the stable order (creation time, id); each run as GET /v1/runs/{runId} answers it. Filters combine; a cursor is bound to the environment, filters, order and time ranges it was issued with (otherwise a 400).";

const RUN_ROUTES = [
  route(`GET ${ENV}/runs`, RunService.method.listRuns, {
    query: RUN_LIST_QUERY,
    request: ({ params, query }) => ({
      ...scopeOf(params),
      options: listOptions(query),
      filter: {
        ...stringFilters(query, ["workflowId", "workflowName", "collection", "recordId", "via", "userId"]),
        states: listParam(query, "state"),
        finishedFrom: timeParam(query, "finishedFrom"),
        finishedTo: timeParam(query, "finishedTo"),
      },
    }),
    response: { message: ListRunsResponseSchema, of: (out) => out },
    doc: { tag: "Runs", summary: "Search the runs of an environment", description: RUN_LIST_DESCRIPTION, answer: "A page of runs" },
  }),
  route("GET /v1/runs/{runId}", RunService.method.getRun, {
    query: [
      {
        name: "wait",
        description: `Long-poll for at most this long: \`30s\`, \`30\` (seconds), \`1m\` or \`500ms\` (rounded up to whole seconds); at most ${MAX_WAIT_SECONDS}s; empty: no wait`,
        schema: WAIT_SCHEMA,
      },
      {
        name: "version",
        description: "The run's `version` the caller already has: answer as soon as it changes. Absent, empty or 0: wait until the run is finished",
        schema: { type: "string", pattern: "^([0-9]{1,15})?$" },
      },
    ],
    lenientQuery: true,
    request: ({ params, query }) => ({ runId: params.runId!, ...runWait(query) }),
    response: { message: RunSchema, of: (out) => out.run },
    doc: {
      tag: "Runs",
      summary: "Follow a run",
      description: RUN_GET_DESCRIPTION,
      answer: "The run",
      pathParams: { runId: "Run id (UUID) returned by the webhook" },
    },
  }),
  route("POST /v1/runs/{runId}/cancel", RunService.method.cancelRun, {
    // Takes no body: the /v1 plugin's parser (body.ts) accepts any, and it is never read.
    lenientQuery: true,
    request: ({ params }) => ({ runId: params.runId! }),
    response: { message: RunSchema, of: (out) => out.run },
    doc: {
      tag: "Runs",
      summary: "Cancel an ongoing run",
      description:
        "Takes no body: an empty one (or any) is accepted whatever its Content-Type. Application tokens only (a project API token is 403). A finished run is a 400 failed_precondition.",
      answer: "The run",
      errors: [409],
    },
  }),
];

const EXAMPLE_RUN_ID = "0b6f9d0e-3c1a-4e7b-9f2d-5a8c7b6e4d3f";

const RUN_START_DESCRIPTION =
  "Starts a run of the workflow's latest active version on one record, as the token's user, as the webhook does: the same checks in the same order (the URL's aside), and the same answers. " +
  "Application tokens only (a project API token is 403). " +
  "An `Idempotency-Key` header works as the webhook's. The record is not checked here: a run on a missing or inaccessible record fails at its first data step.";

const RUN_RETRY_DESCRIPTION =
  "Starts a new run of a finished run's workflow on the same record, as the token's user, with the checks of starting a run; the new run's `retryOf` names this one, whose `retries` list it. " +
  "By default the latest active version runs from its first step. With `fromFailedStep: true` the failed run's own version runs from its failed step: the steps before it are SKIPPED, each with `doneInRunId`, the run in which it ran. " +
  "A run that is not finished, or (`fromFailedStep`) did not fail at a step or whose version is no longer active, is a 400 failed_precondition. Takes an optional JSON body. Application tokens only.";

const STARTED = { runId: EXAMPLE_RUN_ID };

/** StartRun's route: at `at`, with the path's project and environment when it has them. */
function startRoute(at: `POST /${string}`, where: string): ApiRoute {
  return route(at, RunService.method.startRun, {
    status: 202,
    request: ({ params, body }) => {
      const b = body();
      const place = params.projectName ? scopeOf(params) : {};
      return { ...place, workflowId: stringField(b, "workflowId") ?? "", recordId: stringField(b, "recordId") ?? "" };
    },
    // As the webhook answers: `replayed` is the Idempotent-Replayed header.
    published: (out) => ({ runId: out.runId }),
    doc: {
      tag: "Runs",
      summary: "Start a workflow run on one record",
      description: `${RUN_START_DESCRIPTION} ${where}`,
      answer: "The run was created and queued (or, with an Idempotency-Key already used, that call's run)",
      example: STARTED,
      schema: ref("WebhookAccepted"),
      body: {
        name: "StartRunBody",
        schema: requestBody(
          {
            type: "object",
            properties: { workflowId: { type: "string", format: "uuid" }, recordId: { type: "string", minLength: 1, maxLength: MAX_RECORD_ID_CHARS } },
          },
          ["workflowId", "recordId"],
        ),
      },
      errors: [409, 413],
    },
  });
}

const RUN_ACTION_ROUTES = [
  startRoute(`POST ${ENV}/runs`, "The workflow must be in the path's project and environment (otherwise 404)."),
  startRoute("POST /v1/runs", "The same as POST /v1/project/{projectName}/environment/{environmentName}/runs, for a caller who knows only the workflow's id."),
  route("POST /v1/runs/{runId}/retry", RunService.method.retryRun, {
    status: 202,
    request: ({ params, optionalBody }) => ({ runId: params.runId!, fromFailedStep: boolField(optionalBody(), "fromFailedStep") ?? false }),
    published: (out) => ({ runId: out.runId }),
    doc: {
      tag: "Runs",
      summary: "Retry a finished run",
      description: RUN_RETRY_DESCRIPTION,
      answer: "The new run was created and queued",
      example: STARTED,
      schema: ref("WebhookAccepted"),
      body: {
        name: "RetryRunBody",
        schema: requestBody(
          { type: "object", properties: { fromFailedStep: { type: "boolean", description: "Run the failed run's version from its failed step" } } },
          [],
        ),
      },
      errors: [409, 413],
    },
  }),
];

/** A batch's JSON body: CreateRunBatchRequest's fields (ProtoJSON names) but the path's; an unknown or mistyped field is a 400 naming it. */
function batchRequest(params: Record<string, string>, b: Record<string, unknown>): MessageShape<typeof CreateRunBatchRequestSchema> {
  for (const name of ["projectName", "environmentName"]) if (Object.hasOwn(b, name)) throw fail.invalid(`"${name}" is given by the path`);
  try {
    return fromJson(CreateRunBatchRequestSchema, { ...(b as Record<string, JsonValue>), ...scopeOf(params) });
  } catch (err) {
    throw fail.invalid(`the batch body is not valid: ${err instanceof Error ? err.message : String(err)}`);
  }
}

const RUN_BATCH_DESCRIPTION =
  "Retries or cancels, in the background, every run of the environment that `filter` matches (the run search's filters: workflowId, workflowName, collection, recordId, states, via, userId, finishedFrom, finishedTo), created between `createdFrom` and `createdTo` (at most the batch's creation), or only the `runIds` among them. " +
  "Answers the stored batch at once; follow it with GET /v1/run-batches/{batchId}. `dryRun: true` counts what would happen and does nothing. " +
  "Each run is acted on once; one the action does not apply to is skipped with its reason. Application tokens only: a project admin's acts on any run, another user's only on the runs that user started.";

const RUN_BATCH_ROUTES = [
  route(`POST ${ENV}/run-batches`, RunService.method.createRunBatch, {
    status: 202,
    request: ({ params, body }) => batchRequest(params, body()),
    response: { message: RunBatchSchema, of: (out) => out.batch },
    doc: {
      tag: "Runs",
      summary: "Retry or cancel every run a filter matches",
      description: RUN_BATCH_DESCRIPTION,
      answer: "The batch, stored and RUNNING",
      body: {
        name: "CreateRunBatchBody",
        schema: requestBody(
          {
            type: "object",
            properties: {
              action: { type: "string", enum: ["retry", "cancel"] },
              filter: { type: "object", description: "The run search's filters (RunFilter in ProtoJSON)" },
              fromFailedStep: { type: "boolean" },
              dryRun: { type: "boolean" },
              runIds: { type: "array", items: { type: "string", format: "uuid" }, maxItems: 1000 },
              createdFrom: { type: "string", format: "date-time" },
              createdTo: { type: "string", format: "date-time" },
            },
          },
          ["action"],
        ),
      },
      errors: [413],
    },
  }),
  route(`GET ${ENV}/run-batches`, RunService.method.listRunBatches, {
    query: LIST_QUERY.filter((q) => q.name === "limit" || q.name === "cursor"),
    request: ({ params, query }) => ({ ...scopeOf(params), options: listOptions(query) }),
    response: { message: ListRunBatchesResponseSchema, of: (out) => out },
    doc: { tag: "Runs", summary: "List the run batches of an environment, newest first", answer: "A page of batches" },
  }),
  route("GET /v1/run-batches/{batchId}", RunService.method.getRunBatch, {
    lenientQuery: true,
    request: ({ params }) => ({ batchId: params.batchId! }),
    response: { message: RunBatchSchema, of: (out) => out.batch },
    doc: { tag: "Runs", summary: "Follow a run batch: matched, done, skipped and failed, with reasons", answer: "The batch" },
  }),
  route("POST /v1/run-batches/{batchId}/cancel", RunService.method.cancelRunBatch, {
    lenientQuery: true,
    request: ({ params }) => ({ batchId: params.batchId! }),
    response: { message: RunBatchSchema, of: (out) => out.batch },
    doc: {
      tag: "Runs",
      summary: "Stop a run batch (the runs it started stay started)",
      description: "Takes no body. A finished batch is a 400 failed_precondition.",
      answer: "The batch, CANCELLED",
    },
  }),
];

/** The public API (/v1) over plain HTTP, in the document's order. */
export const API_ROUTES: readonly ApiRoute[] = [...LOG_ROUTES, ...LOG_KEY_ROUTES, ...NOTE_ROUTES, ...RUN_ROUTES, ...RUN_ACTION_ROUTES, ...RUN_BATCH_ROUTES];

// ---------------------------------------------------------------- routes with handlers of their own

/** A route registered by its own handler from `path`, documented by `operation` (and the component schemas it adds). */
export interface OtherRoute {
  method: HttpMethod;
  path: string;
  operation: Schema;
  schemas?: (b: SchemaBuilder) => Record<string, Schema>;
}

const WEBHOOK_DESCRIPTION =
  "The full URL is copied from the workflow's trigger settings; treat it as a credential. Asynchronous: answers once the run is queued. " +
  "Checks run in order (key 400, token 401, webhook 404/400, permission 403, rate limit 429, body 400, ongoing run 409); the first that fails answers. " +
  `The body is checked at its place in that order: a Content-Type other than application/json (parameters such as \`; charset=utf-8\` are fine, in any case; none is read as JSON) is a 400 invalid_argument "Content-Type must be application/json, got …", like invalid JSON, JSON nested deeper than ${MAX_JSON_DEPTH} levels or a missing record_id. A body over the size limit is a 413 before any check. ` +
  "With an Idempotency-Key, a repeat of an accepted call (same key, same token user, same webhook, within 24 h by default) answers 202 with the first call's runId and `Idempotent-Replayed: true`, and starts nothing, even after that run finished; the key is checked after the body, so a repeat is authenticated, authorized and rate-limited like any call.";

/** POST /hooks/{key} → TriggerService.TriggerRun, 202 (webhook.ts). */
export const WEBHOOK: OtherRoute = {
  method: "POST",
  path: "/hooks/{key}",
  operation: {
    operationId: "triggerWebhook",
    tags: ["Webhook"],
    summary: "Start a workflow run on one record",
    description: WEBHOOK_DESCRIPTION,
    parameters: [
      pathParam("key", "Signed webhook key (part of the webhook URL)"),
      {
        name: "Idempotency-Key",
        in: "header",
        required: false,
        // The limits are in the description only: HTTP trims a header value's outer spaces, so a
        // pattern could call a value invalid that the server receives as valid.
        description: `Optional: makes retries of this call safe. 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters (a fresh UUID per logical call is a good choice); otherwise a 400 invalid_argument. Without it, every call is a new one.`,
        schema: { type: "string" },
      },
    ],
    security: BEARER,
    requestBody: jsonBody(ref("WebhookRequest"), { record_id: "A-1001" }),
    responses: {
      "202": {
        description: "Run created and queued; or, with an Idempotency-Key already used for an accepted call, that call's run (nothing started)",
        headers: {
          "Idempotent-Replayed": {
            description: "`true` when the answer repeats an earlier call's with the same Idempotency-Key (absent otherwise)",
            schema: { type: "string", enum: ["true"] },
          },
        },
        content: json(ref("WebhookAccepted"), { runId: EXAMPLE_RUN_ID }),
      },
      "400": errorAnswer(
        `Malformed, tampered or superseded URL; or a bad body: not JSON, not an object, record_id missing, not a string or empty, a Content-Type other than application/json, JSON nested deeper than ${MAX_JSON_DEPTH} levels; ` +
          `or an Idempotency-Key that is empty, longer than ${MAX_IDEMPOTENCY_KEY_LENGTH} characters or not printable ASCII (invalid_argument), or that was used with another record_id (failed_precondition)`,
        { code: "invalid_argument", message: "record_id is required" },
      ),
      ...errorResponses([401]),
      "403": errorAnswer(
        "Valid token, but its user may not trigger this workflow (organization, rendering, role), or the project requires a token made in an SSO session",
        { code: "permission_denied", message: 'the role "user" may not trigger this workflow' },
      ),
      "404": errorAnswer("Unknown webhook, webhook trigger disabled, or no active workflow version for the rendering", {
        code: "not_found",
        message: "the webhook trigger is disabled",
      }),
      "409": errorAnswer(
        "A run of this workflow is already ongoing on this record (already_exists, with its runId); or the first call with this Idempotency-Key is still being answered (aborted): retry with the same key",
        { code: "already_exists", message: "a run of this workflow is already ongoing on this record", runId: EXAMPLE_RUN_ID },
      ),
      ...errorResponses([413, 429]),
    },
  },
  schemas: (b) => ({
    WebhookRequest: {
      type: "object",
      required: ["record_id"],
      properties: {
        record_id: {
          type: "string",
          minLength: 1,
          maxLength: MAX_RECORD_ID_CHARS,
          description: `Packed record id (composite keys joined with |), at most ${MAX_RECORD_ID_CHARS} characters (Unicode code points; no lone surrogates)`,
        },
      },
      additionalProperties: true,
    },
    // The webhook answers the run id alone; a replay is marked by the Idempotent-Replayed header.
    WebhookAccepted: { ...b.response(TriggerRunResponseSchema), properties: { runId: b.field(TriggerRunResponseSchema.field.runId) }, required: ["runId"] },
  }),
};

/** An operational GET route: public, with these answers. */
function operational(path: string, operationId: string, summary: string, responses: Schema): OtherRoute {
  return { method: "GET", path, operation: { operationId, tags: ["Operations"], summary, security: [], responses } };
}

const STATUS_BODY = json({ type: "object", properties: { status: { type: "string" } } });

export const HEALTHZ = operational("/healthz", "healthz", "Liveness", { "200": { description: "Alive", content: STATUS_BODY } });
export const READYZ = operational("/readyz", "readyz", "Readiness (database reachable)", {
  "200": { description: "Ready", content: STATUS_BODY },
  "503": { description: "Database unreachable", content: json(ref("Error")) },
});
export const OPENAPI_DOCUMENT = operational("/openapi.json", "openapi", "This document", {
  "200": { description: "OpenAPI 3.0 document", content: json({ type: "object" }) },
});

/** The API reference page (docs.ts), documented only while it is served (RUNHOOK_DOCS). */
export const DOCS = operational("/docs", "docs", "This document as an interactive reference page (Swagger UI)", {
  "200": { description: "HTML page", content: { "text/html": { schema: { type: "string" } } } },
});

export const OTHER_ROUTES: readonly OtherRoute[] = [WEBHOOK, HEALTHZ, READYZ, OPENAPI_DOCUMENT];
