// Request bodies as real clients send them, for the webhook and every /v1 route:
//
// - A body is JSON: `Content-Type: application/json`, with or without parameters
//   (`application/json; charset=utf-8`, any case), or no Content-Type at all. Any other
//   media type is a 400 `invalid_argument` ("Content-Type must be application/json, got …").
// - An empty body is no body, whatever its Content-Type: routes that take none (GET, DELETE,
//   POST …/cancel) accept it; routes that need one answer 400.
// - JSON nested deeper than MAX_JSON_DEPTH levels is a 400 before it is parsed.
// - Larger than the configured limit: 413 (Fastify's bodyLimit, answered by the gateway's
//   error handler), before anything is parsed.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { fail } from "../domain/errors.js";
import { depthError } from "../lib/json-depth.js";

/** A body as received, parsed only by the route that takes one (so routes without a body never fail on it). */
export class RawBody {
  constructor(
    readonly text: string,
    readonly contentType: string | undefined,
  ) {}
}

/** Why the Content-Type is not acceptable for a JSON body, or null (application/json with any parameters, or none). */
export function contentTypeError(contentType: string | undefined): string | null {
  if (contentType === undefined) return null;
  const media = contentType.split(";", 1)[0]!.trim().toLowerCase();
  if (media === "application/json") return null;
  const shown = contentType.length > 100 ? `${contentType.slice(0, 100)}…` : contentType;
  return `Content-Type must be application/json, got "${shown}"`;
}

/** Checks and parses a JSON body; throws INVALID_ARGUMENT with the reason. */
export function parseJsonBody(body: RawBody): unknown {
  const reason = contentTypeError(body.contentType) ?? depthError(body.text);
  if (reason) throw fail.invalid(reason);
  try {
    return JSON.parse(body.text);
  } catch {
    throw fail.invalid("the request body is not valid JSON");
  }
}

/** The JSON object body of a route that takes one; 400 when absent, not JSON or not an object. */
export function jsonObjectBody(req: FastifyRequest): Record<string, unknown> {
  const raw = req.body;
  if (!(raw instanceof RawBody)) throw fail.invalid("request body must be a JSON object");
  const b = parseJsonBody(raw);
  if (b === null || typeof b !== "object" || Array.isArray(b)) throw fail.invalid("request body must be a JSON object");
  return b as Record<string, unknown>;
}

/**
 * The one body parser of a scope (the /v1 plugin, the webhook): any Content-Type or none,
 * kept as text up to the body limit; an empty body becomes `undefined`.
 */
export function acceptRawBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (req, text, done) => {
    const s = text as string;
    done(null, s.length === 0 ? undefined : new RawBody(s, req.headers["content-type"]));
  });
}
