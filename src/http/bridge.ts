// REST → RPC: the webhook and /v1 routes reach the service implementations through the one
// in-process bridge (rpc/in-process.ts), with the HTTP request's headers and request id, and a
// signal aborted when the client goes away.
import { toJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CallOptions } from "../rpc/in-process.js";
import type { Via } from "../services/context.js";
import { toHttpError } from "../rpc/errors.js";

/** How a route calls a service: as its HTTP request, with the handler's response headers copied to the reply. */
export function callOptions(req: FastifyRequest, reply: FastifyReply, via: Via, values?: ContextValues): CallOptions {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const abort = new AbortController();
  req.raw.once("close", () => {
    if (!req.raw.complete || req.raw.destroyed) abort.abort();
  });
  return {
    headers,
    via,
    requestId: req.id,
    signal: abort.signal,
    values,
    requestMethod: req.method,
    url: req.url,
    onResponseHeader: (h) => h.forEach((v, k) => void reply.header(k, v)),
  };
}

/** Canonical ProtoJSON, with implicit defaults emitted (`hasMore: false`, empty lists). */
export function protoJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): unknown {
  return toJson(schema, msg, { alwaysEmitImplicit: true });
}

/** Sends the gateway's error answer `{error, code}` for anything a handler threw. */
export function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  const e = toHttpError(err);
  return reply.code(e.status).headers(e.headers).send(e.body);
}
