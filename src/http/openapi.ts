// GET /openapi.json: the published document (Forest Admin's public API 1.38.0, kept as
// published in openapi/) with runhook's additions, each marked `x-runhook-addition: true`
// (ADDITION): on the published operations, the query parameters, properties, headers and
// media types runhook adds; beside them, runhook's own operations (the rest of the route
// table, routes.ts) and component schemas. OpenAPI 3.0.3, as the published schemas are
// 3.0 (`exclusiveMinimum: true`); runhook's own parts are written in 3.0 too.
import { readFileSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { type ApiRateLimits, type Config, DEFAULT_API_RATE_LIMITS } from "../config.js";
import { apiRateWindows, ratePolicy } from "../rpc/rate-limit.js";
import {
  ADDITION,
  addition,
  BEARER,
  ERROR_PROPERTY,
  ERROR_SCHEMA,
  errorResponses,
  json,
  jsonBody,
  nameOf,
  pathParam,
  ref,
  SchemaBuilder,
  type Schema,
} from "./openapi-schemas.js";
import { API_ROUTES, DOCS, NDJSON, OPENAPI_DOCUMENT, OTHER_ROUTES, PATH_PARAMS, routeUrl, type ApiRoute, type QueryParam, type RouteDoc } from "./routes.js";

/** The published document, byte for byte as published (test/openapi-published.test.ts checks it). */
const PUBLISHED_FILE = new URL("../../openapi/forest-public-api-1.38.0.json", import.meta.url);
const PUBLISHED: Schema = JSON.parse(readFileSync(PUBLISHED_FILE, "utf8"));

interface Operation extends Schema {
  parameters: Schema[];
  responses: Record<string, { headers?: Schema; content?: Record<string, Schema> }>;
}
type Paths = Record<string, Record<string, Operation>>;

export interface OpenApiOptions {
  serverUrl?: string;
  rateLimits?: ApiRateLimits;
  /** Whether GET /docs is served (and so documented). */
  docs?: boolean;
}

/** The rate-limit headers every /v1 answer carries (runhook's: the published document has none but Retry-After). */
function rateHeaders(limits: ApiRateLimits): Record<string, Schema> {
  const d = DEFAULT_API_RATE_LIMITS;
  const tightest =
    "the tightest of the token's windows (the one with the fewest requests left after this call; of those, the one that ends first, or when none are left the one that ends last)";
  const headers: Record<string, Schema> = {
    "X-RateLimit-Limit": {
      description: `Requests allowed in ${tightest}; every window is enforced (by default ${d.perMinute} a minute, ${d.perHour} an hour and ${d.perDay} a day per token)`,
      schema: { type: "integer" },
    },
    "X-RateLimit-Remaining": { description: "Requests left in that window", schema: { type: "integer" } },
    "X-RateLimit-Reset": { description: "Unix time (seconds) when that window ends", schema: { type: "integer" } },
    RateLimit: { description: "IETF draft form of the same window: limit=N, remaining=N, reset=<seconds from now>", schema: { type: "string" } },
    "RateLimit-Policy": { description: `IETF draft form, every window: ${ratePolicy(apiRateWindows(limits))}`, schema: { type: "string" } },
  };
  return Object.fromEntries(Object.entries(headers).map(([name, h]) => [name, addition(h)]));
}

const NEXT_CURSOR = addition({
  type: "string",
  description: "runhook's cursor: pass it as `cursor` for the next page; present while hasMore is true, and always with order=asc",
});
const NDJSON_NOTE =
  'With `Accept: application/x-ndjson` the whole selection is streamed, one item per line, with no page limit, and the log\'s signed digests as `{"digest": …}` lines.';

const queryParam = (q: QueryParam): Schema => ({
  name: q.name,
  in: "query",
  required: false,
  ...(q.description ? { description: q.description } : {}),
  schema: q.schema ?? { type: "string" },
});

const pathNames = (path: string) => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);

/** The part of the document at these keys (each one there: the published lists' answers are known). */
function at(part: Schema, ...keys: string[]): Schema {
  return keys.reduce((node, key) => node[key] as Schema, part);
}

/** The published operation at `GET /path`, as published (a copy). */
function publishedOperation(route: string): Operation {
  const [method, path] = route.split(" ") as [string, string];
  return structuredClone(at(PUBLISHED, "paths", path, method.toLowerCase())) as Operation;
}

const answerOf = (op: Operation) => at(op, "responses", "200", "content", "application/json");
/** A published list's item schema. */
const itemsOf = (op: Operation) => at(answerOf(op), "schema", "properties", "data", "items");
/** A published item's name: its `object` (activityLog, adminLog, note, note-message). */
const objectOf = (item: Schema) => (at(item, "properties", "object", "enum") as unknown as string[])[0]!;

/**
 * runhook's additions to a copy of a published operation: its added query parameters (once its
 * other parameters are checked to be the published ones), the rate-limit headers, `nextCursor`
 * and the NDJSON export of the answer, and `error` in the error bodies.
 */
function withAdditions(op: Operation, r: ApiRoute, headers: Record<string, Schema>): Operation {
  const published = op.parameters.filter((p) => p.in === "query").map((p) => p.name);
  const ours = (r.query ?? []).filter((q) => !q.addition).map((q) => q.name);
  if (published.join() !== ours.join()) throw new Error(`${r.method} ${r.path} reads ${ours} but the published operation has ${published}`);
  op.parameters.push(...(r.query ?? []).filter((q) => q.addition).map((q) => addition(queryParam(q))));
  for (const [code, response] of Object.entries(op.responses)) {
    response.headers = { ...headers, ...response.headers };
    const body = response.content?.["application/json"]?.schema as { properties: Record<string, Schema> };
    if (code === "200") body.properties.nextCursor = NEXT_CURSOR;
    else body.properties.error ??= ERROR_PROPERTY;
  }
  if (r.export) op.responses["200"]!.content![NDJSON] = addition({ schema: { oneOf: [ref(objectOf(itemsOf(op))), ref("LogDigestLine")] } });
  return op;
}

const SHA256_HEX: Schema = { type: "string", pattern: "^[0-9a-f]{64}$" };
const POSITION: Schema = { type: "integer", minimum: 1 };

/** A line of the NDJSON export that is no entry: a signed digest (docs/integrators.md, "Proving an archive complete"). */
const DIGEST_LINE: Schema = {
  type: "object",
  description: "A signed digest of the log's stream, after the last entry it covers: `runhook logs verify` checks an export with them offline.",
  required: ["digest"],
  properties: {
    digest: {
      type: "object",
      required: ["version", "stream", "from", "to", "entries", "hash", "previous", "createdAt", "keyId", "signature", "leaves"],
      properties: {
        version: { type: "integer", enum: [1] },
        stream: { type: "string", description: "a:<environment id>, m:<project id> or m:org:<organization id>" },
        from: { ...POSITION, description: "The first position covered" },
        to: { ...POSITION, description: "The last position covered; the stream's next digest starts at to + 1" },
        entries: { type: "integer", minimum: 0, description: "How many entries the range holds (positions never written hold none)" },
        hash: { ...SHA256_HEX, description: "SHA-256 of `<position>:<entry hash>\\n` for each leaf" },
        previous: { type: "string", pattern: "^([0-9a-f]{64})?$", description: "The hash of the stream's previous digest; empty for its first" },
        createdAt: { type: "string", format: "date-time" },
        keyId: { type: "string", description: "The signing key's id (GET …/log-keys)" },
        signature: { type: "string", format: "byte", description: "Ed25519 signature of the digest's signed payload" },
        leaves: {
          type: "array",
          description: "[position, entry hash] of each entry of the range, by position",
          items: { type: "array", minItems: 2, maxItems: 2, items: { oneOf: [POSITION, SHA256_HEX] } },
        },
      },
    },
  },
};

/** A route of runhook's documented as a published operation (doc.like), without the path parameters it lacks. */
function likeOperation(r: ApiRoute, doc: RouteDoc, headers: Record<string, Schema>): Operation {
  const op = publishedOperation(doc.like!);
  const lacking = op.parameters.filter((p) => p.in === "path" && !pathNames(r.path).includes(p.name as string)).map((p) => p.name as string);
  op.parameters = op.parameters.filter((p) => !(p.in === "path" && lacking.includes(p.name as string)));
  // The answer's `parameters` echo the path's names: not those it lacks.
  const echo = at(answerOf(op), "schema", "properties", "parameters") as { properties: Schema; required?: string[] };
  const example = answerOf(op).example as { parameters?: Schema } | undefined;
  for (const name of lacking) {
    delete echo.properties[name];
    delete example?.parameters?.[name];
  }
  echo.required = echo.required?.filter((name) => !lacking.includes(name));
  if (!echo.required?.length) delete echo.required;
  const { operationId: _, summary: __, description: ___, ...rest } = withAdditions(op, r, headers);
  const description = [doc.description, r.export && NDJSON_NOTE].filter(Boolean).join(" ");
  return { operationId: r.rpc.localName, tags: [doc.tag], summary: doc.summary, ...(description ? { description } : {}), ...rest };
}

function parametersOf(r: ApiRoute, doc: RouteDoc): Schema[] {
  const inPath = pathNames(r.path).map((n) => pathParam(n, doc.pathParams?.[n] ?? PATH_PARAMS[n]!.description, PATH_PARAMS[n]!.schema));
  return [...inPath, ...(r.query ?? []).map(queryParam)];
}

/** An operation of runhook's own, from its route. */
function operationOf(r: ApiRoute, doc: RouteDoc, headers: Record<string, Schema>): Operation {
  if (doc.like) return likeOperation(r, doc, headers);
  const schema = doc.schema ?? (r.response && ref(nameOf(r.response.message)));
  const success = { description: doc.answer, headers, ...(schema ? { content: json(schema, doc.example) } : {}) };
  return {
    operationId: r.rpc.localName,
    tags: [doc.tag],
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    security: BEARER,
    parameters: parametersOf(r, doc),
    ...(doc.body ? { requestBody: jsonBody(ref(doc.body.name)) } : {}),
    responses: { [String(r.status)]: success, ...errorResponses([400, 401, 403, 404, ...(doc.errors ?? []), 429], headers) },
  } as Operation;
}

/** The published paths (a copy), each operation with runhook's additions; then runhook's own operations, marked. */
function pathsOf(headers: Record<string, Schema>, docs: boolean): Paths {
  const paths = structuredClone(PUBLISHED.paths) as Paths;
  const add = (path: string, method: string, operation: Operation) => {
    paths[path] = { ...paths[path], [method.toLowerCase()]: addition(operation) };
  };
  for (const r of API_ROUTES) {
    const published = paths[r.path]?.[r.method.toLowerCase()];
    if (published) withAdditions(published, r, headers);
    else if (r.doc) add(r.path, r.method, operationOf(r, r.doc, headers));
    else throw new Error(`${r.method} ${r.path} has no documentation and no published operation`);
  }
  for (const r of [...OTHER_ROUTES, ...(docs ? [DOCS] : [])]) add(r.path, r.method, r.operation as Operation);
  return paths;
}

/** The published items, as component schemas named by their `object`: each list's items, and the note's messages. */
function publishedItems(): Record<string, Schema> {
  const items: Record<string, Schema> = {};
  const add = (item: Schema) => {
    items[objectOf(item)] = item;
    const messages = at(item, "properties").messages as Schema | undefined;
    if (messages) add(at(messages, "items"));
  };
  for (const ops of Object.values(structuredClone(PUBLISHED.paths) as Paths)) for (const op of Object.values(ops)) add(itemsOf(op));
  return items;
}

/** runhook's component schemas: the published items, the messages runhook's own routes answer, the error and request bodies. */
function componentSchemas(): Record<string, Schema> {
  const b = new SchemaBuilder();
  for (const r of API_ROUTES) if (r.response) b.messageRef(r.response.message);
  const schemas: Record<string, Schema> = { ...publishedItems(), ...b.schemas, Error: ERROR_SCHEMA, LogDigestLine: DIGEST_LINE };
  for (const r of API_ROUTES) if (r.doc?.body) schemas[r.doc.body.name] = r.doc.body.schema;
  for (const r of OTHER_ROUTES) Object.assign(schemas, r.schemas?.(b));
  const publishedNames = Object.keys((PUBLISHED.components as { schemas: Schema }).schemas);
  const clash = Object.keys(schemas).filter((name) => publishedNames.includes(name));
  if (clash.length) throw new Error(`component schemas named as published ones: ${clash}`);
  return Object.fromEntries(Object.entries(schemas).map(([name, s]) => [name, addition(s)]));
}

const DESCRIPTION =
  "Signed webhooks that start workflow runs on one record, and the public API (/v1) for activity logs, admin logs and notes.\n\n" +
  "This is Forest Admin's public API document, version 1.38.0, as published (its operations, parameters, answers and schemas unchanged, so that a client generated from it works unchanged), " +
  `plus runhook's additions. Each addition carries the extension \`${ADDITION}: true\`: an operation of runhook's own, a query parameter (\`cursor\`, \`order\`, \`runId\`), ` +
  "a response header (X-RateLimit-*, RateLimit, RateLimit-Policy), a media type (the NDJSON export of the logs: with `Accept: application/x-ndjson`, the whole selection, one item per line, no page limit, with the log's signed digests as lines of their own), a property (`nextCursor` of the lists, `error` of the error bodies), or a component schema. " +
  "Removing every part so marked gives the published document back, except for the OpenAPI version (3.0.3, published as 3.0.0), this title, version and description, and the servers.\n\n" +
  "Every error answer has the body {code, message, error}. " +
  "Slow clients: request headers must arrive within RUNHOOK_HTTP_HEADERS_TIMEOUT_MS (10 s by default) and the whole request within RUNHOOK_HTTP_REQUEST_TIMEOUT_MS (30 s), otherwise the answer is 408 {code: deadline_exceeded, …} and the connection is closed; answers themselves (long-polls, exports) may take longer.";

export function buildOpenApi(opts: OpenApiOptions = {}): Schema {
  const paths = pathsOf(rateHeaders(opts.rateLimits ?? DEFAULT_API_RATE_LIMITS), opts.docs ?? false);
  const published = PUBLISHED as { tags: Schema[]; components: { schemas: Schema } };
  return {
    openapi: "3.0.3",
    info: { title: "runhook", version: "1.0.0", description: DESCRIPTION },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
    // The published tags (none): Swagger UI then lists the published operations first ("default"), then runhook's by their tags.
    tags: structuredClone(published.tags),
    paths,
    components: { ...structuredClone(published.components), schemas: { ...structuredClone(published.components.schemas), ...componentSchemas() } },
  };
}

const documents = new WeakMap<Config, Schema>();

/** The gateway's document for this configuration, built once: /openapi.json and /docs serve this one object. */
export function openApiDocument(config: Config): Schema {
  let doc = documents.get(config);
  if (!doc) {
    doc = buildOpenApi({ serverUrl: config.publicBaseUrl, rateLimits: config.apiRateLimit, docs: config.docs });
    documents.set(config, doc);
  }
  return doc;
}

export function registerOpenApiRoute(app: FastifyInstance, doc: Schema): void {
  app.get(routeUrl(OPENAPI_DOCUMENT.path), async (_req, reply) => reply.header("cache-control", "public, max-age=300").send(doc));
}
