// GET /openapi.json: the OpenAPI 3.1 description of every plain-HTTP route of the gateway,
// generated from the route table (routes.ts) and the protobuf message descriptors.
import type { FastifyInstance } from "fastify";
import { type ApiRateLimits, type Config, DEFAULT_API_RATE_LIMITS } from "../config.js";
import { apiRateWindows, ratePolicy } from "../rpc/rate-limit.js";
import { ERROR_SCHEMA, errorResponses, json, jsonBody, nameOf, pathParam, ref, requestBody, SchemaBuilder, type Schema } from "./openapi-schemas.js";
import { API_ROUTES, DOCS, NDJSON, OPENAPI_DOCUMENT, OTHER_ROUTES, PATH_PARAMS, routeUrl, type ApiRoute } from "./routes.js";

export interface OpenApiOptions {
  serverUrl?: string;
  /** The per-token limits the document shows in its RateLimit-Policy example. */
  rateLimits?: ApiRateLimits;
  /** Whether GET /docs is served (and so documented). */
  docs?: boolean;
}

/** The rate-limit headers every /v1 answer carries. */
function rateHeaders(limits: ApiRateLimits): Schema {
  const d = DEFAULT_API_RATE_LIMITS;
  const tightest = "the tightest of the token's windows (the one with the fewest requests left after this call; of those, the one that ends first)";
  return {
    "X-RateLimit-Limit": {
      description: `Requests allowed in ${tightest}; every window is enforced (by default ${d.perMinute} a minute, ${d.perHour} an hour and ${d.perDay} a day per token)`,
      schema: { type: "integer" },
    },
    "X-RateLimit-Remaining": { description: "Requests left in that window", schema: { type: "integer" } },
    "X-RateLimit-Reset": { description: "Unix time (seconds) when that window ends", schema: { type: "integer" } },
    RateLimit: { description: "IETF draft form of the same window: limit=N, remaining=N, reset=<seconds from now>", schema: { type: "string" } },
    "RateLimit-Policy": { description: `IETF draft form, every window: ${ratePolicy(apiRateWindows(limits))}`, schema: { type: "string" } },
  };
}

/** Component schemas: the messages the routes answer, the error body, the request bodies. */
function componentSchemas(): Record<string, Schema> {
  const b = new SchemaBuilder();
  for (const r of API_ROUTES) if (r.response) b.messageRef(r.response.message);
  for (const r of API_ROUTES) if (r.export) b.messageRef(r.export.entry);
  const schemas = b.schemas;
  schemas.Error = ERROR_SCHEMA;
  for (const r of API_ROUTES) {
    const body = r.doc.body;
    if (body) schemas[body.name] = requestBody(b.object(r.rpc.input, body.omit), body.required);
  }
  for (const r of OTHER_ROUTES) Object.assign(schemas, r.schemas?.(b));
  return schemas;
}

const NDJSON_NOTE = "With `Accept: application/x-ndjson` the whole selection is streamed, one entry per line, with no page limit.";

function parametersOf(r: ApiRoute): Schema[] {
  const names = [...r.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const inPath = names.map((n) => pathParam(n, r.doc.pathParams?.[n] ?? PATH_PARAMS[n]!.description, PATH_PARAMS[n]!.schema));
  const inQuery = (r.query ?? []).map((q) => ({
    name: q.name,
    in: "query",
    required: false,
    description: q.description,
    schema: q.schema ?? { type: "string" },
  }));
  return [...inPath, ...inQuery];
}

function responsesOf(r: ApiRoute, headers: Schema): Schema {
  const content: Schema = {};
  if (r.response) Object.assign(content, json(ref(nameOf(r.response.message)), r.doc.example));
  if (r.export) content[NDJSON] = { schema: ref(nameOf(r.export.entry)) };
  const success = { description: r.doc.answer, headers, ...(r.response ? { content } : {}) };
  return { [String(r.status)]: success, ...errorResponses([400, 401, 403, 404, ...(r.doc.errors ?? []), 429], headers) };
}

function operationOf(r: ApiRoute, headers: Schema): Schema {
  const description = r.export ? `${r.doc.description} ${NDJSON_NOTE}` : r.doc.description;
  return {
    operationId: r.rpc.localName,
    tags: [r.doc.tag],
    summary: r.doc.summary,
    ...(description ? { description } : {}),
    parameters: parametersOf(r),
    ...(r.doc.body ? { requestBody: jsonBody(ref(r.doc.body.name)) } : {}),
    responses: responsesOf(r, headers),
  };
}

/** The `paths` object: the /v1 table's routes, then the others. */
function pathsOf(headers: Schema, docs: boolean): Record<string, Schema> {
  const paths: Record<string, Schema> = {};
  const add = (path: string, method: string, operation: Schema) => (paths[path] = { ...paths[path], [method.toLowerCase()]: operation });
  for (const r of API_ROUTES) add(r.path, r.method, operationOf(r, headers));
  for (const r of [...OTHER_ROUTES, ...(docs ? [DOCS] : [])]) add(r.path, r.method, r.operation);
  return paths;
}

const DESCRIPTION =
  "Signed webhooks that start workflow runs on one record, and the public API (/v1) for activity logs, admin logs and notes. Every error answer has the body {error, code}. " +
  "Slow clients: request headers must arrive within RUNHOOK_HTTP_HEADERS_TIMEOUT_MS (10 s by default) and the whole request within RUNHOOK_HTTP_REQUEST_TIMEOUT_MS (30 s), otherwise the answer is 408 {error, code: deadline_exceeded} and the connection is closed; answers themselves (long-polls, exports) may take longer.";

export function buildOpenApi(opts: OpenApiOptions = {}): Schema {
  const paths = pathsOf(rateHeaders(opts.rateLimits ?? DEFAULT_API_RATE_LIMITS), opts.docs ?? false);
  const tags = [...new Set(Object.values(paths).flatMap((ops) => Object.values(ops as Record<string, Schema>).flatMap((op) => op.tags as string[])))];
  return {
    openapi: "3.1.0",
    info: { title: "runhook", version: "1.0.0", description: DESCRIPTION },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
    security: [{ bearer: [] }],
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      schemas: componentSchemas(),
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: "Project API token (/v1), organization API token (/v1/organization/admin-logs only), or application token (webhook, /v1/runs)",
        },
      },
    },
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
