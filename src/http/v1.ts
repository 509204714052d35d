// The /v1 public REST API: its routes, registered from the route table (routes.ts) over the
// very same LogService, NoteService and RunService implementations as gRPC and Connect,
// through the same interceptors (rpc/pipeline.ts: the limit on failed authentications, the
// per-token rate limit whose headers every /v1 response carries, errors).
//
// The /v1 plugin has one body parser (body.ts, acceptRawBodies): routes without a body
// accept an empty one whatever its Content-Type, and only routes that take one parse it.
// Whatever a route throws is answered by the gateway's error handler (app.ts).
import { Readable } from "node:stream";
import { create, type DescService, type MessageShape } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { LogService, type LogDigest } from "../../gen/runhook/v1/log_pb.js";
import type { DigestLine } from "../domain/logs/digest-format.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import type { Deps } from "../deps.js";
import type { Services } from "../services/index.js";
import { jsonObjectBody } from "./body.js";
import { openApiDocument, registerOpenApiRoute } from "./openapi.js";
import type { InProcessCaller } from "../rpc/in-process.js";
import { callOptions, protoJson } from "./bridge.js";
import { lenientQuery, strictQuery } from "./params.js";
import { API_ROUTES, NDJSON, routeUrl, type ApiRoute, type RouteInput } from "./routes.js";

/**
 * The method whose checks a /v1 request that reaches no implementation passes (a 404, a 413):
 * the public API's services share them (the limit on failed authentications, the token, the
 * per-token rate limit: rpc/rate-limit.ts), so that every /v1 answer carries the X-RateLimit-*
 * headers and counts.
 */
export const API_CHECKS = RunService.method.getRun;

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

// ---------------------------------------------------------------- routes

const NDJSON_CHUNK = 64 * 1024;

function wantsNdjson(req: FastifyRequest): boolean {
  return (req.headers.accept ?? "").toLowerCase().includes(NDJSON);
}

/** A digest as the NDJSON export writes it (the line `{"digest": …}`; docs/integrators.md, "Proving an archive complete"). */
function digestLine(m: LogDigest): DigestLine {
  return {
    version: m.version,
    stream: m.stream,
    from: Number(m.fromPosition),
    to: Number(m.toPosition),
    entries: Number(m.entryCount),
    hash: m.hash,
    previous: m.previousDigest,
    createdAt: m.createdAt,
    keyId: m.keyId,
    signature: m.signature,
    leaves: m.leaves.map((l) => [Number(l.position), l.hash]),
  };
}

/** An export's message as its NDJSON line: the entry's (as `line` makes it), or `{"digest": …}`; none for neither. */
function ndjsonLine(m: { entry?: unknown; digest?: LogDigest }, line: (entry: unknown) => unknown): string {
  if (m.entry) return `${JSON.stringify(line(m.entry))}\n`;
  return m.digest ? `${JSON.stringify({ digest: digestLine(m.digest) })}\n` : "";
}

/**
 * Streams `{entry}` (and `{digest}`) messages as NDJSON, one line each. The first item is
 * awaited before answering, so that authentication and parameter errors still reach the
 * error handler and get their status and error body; after that, lines go out in ~64 KiB
 * chunks pulled only as fast as the client reads (Readable.from → pipe), so memory stays constant.
 */
async function sendNdjson(
  reply: FastifyReply,
  items: AsyncIterable<{ entry?: unknown; digest?: LogDigest }>,
  line: (entry: unknown) => unknown,
): Promise<FastifyReply> {
  const it = items[Symbol.asyncIterator]();
  let r = await it.next();
  async function* chunks(): AsyncGenerator<string> {
    let buf = "";
    try {
      while (!r.done) {
        buf += ndjsonLine(r.value, line);
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
  return reply
    .code(200)
    .header("content-type", `${NDJSON}; charset=utf-8`)
    .send(Readable.from(chunks(), { objectMode: false }));
}

/**
 * Answers a table route: query, then body, mapped to the RPC's request (read inside the
 * pipeline, so that the token and the rate limit answer first); its answer as ProtoJSON (or NDJSON).
 */
async function answer(caller: InProcessCaller, r: ApiRoute, impl: object, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  let input: RouteInput | undefined;
  const init = () => {
    const query = r.lenientQuery
      ? lenientQuery(req)
      : strictQuery(
          req,
          (r.query ?? []).map((q) => q.name),
        );
    input = {
      params: req.params as Record<string, string>,
      query,
      body: () => jsonObjectBody(req),
      optionalBody: () => (req.body === undefined ? {} : jsonObjectBody(req)),
    };
    return r.request(input);
  };
  if (r.export && wantsNdjson(req)) {
    // The NDJSON export carries the log's signed digests.
    const items = caller.serverStream(impl, r.export.rpc, () => ({ ...init(), includeDigests: true }), callOptions(req, reply, "api"));
    const { entry, line } = r.export;
    return sendNdjson(
      reply,
      items as AsyncIterable<{ entry?: unknown; digest?: LogDigest }>,
      line ?? ((e) => protoJson(entry, e as MessageShape<typeof entry>)),
    );
  }
  const out = await caller.unary(impl, r.rpc, init, callOptions(req, reply, "api"));
  if (r.published) return reply.code(r.status).send(r.published(out, input!));
  if (!r.response) return reply.code(r.status).send();
  const { message, of } = r.response;
  return reply.code(r.status).send(protoJson(message, of(out) ?? create(message)));
}

export async function registerV1Routes(app: FastifyInstance, deps: Deps, caller: InProcessCaller, services: Services): Promise<void> {
  const impls = new Map<DescService, object>([
    [LogService, services.log],
    [NoteService, services.note],
    [RunService, services.run],
  ]);
  for (const r of API_ROUTES) {
    const impl = impls.get(r.rpc.parent);
    if (!impl) throw new Error(`no implementation of ${r.rpc.parent.typeName} for ${r.method} ${r.path}`);
    app.route({ method: r.method, url: routeUrl(r.path), handler: (req, reply) => answer(caller, r, impl, req, reply) });
  }
  registerOpenApiRoute(app, openApiDocument(deps.config));
}
