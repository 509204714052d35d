// REST → RPC: the webhook and /v1 routes reach the service implementations through the one
// in-process bridge (rpc/in-process.ts) and the interceptors of every RPC (rpc/pipeline.ts),
// with the HTTP request's headers, request id and client address, and a signal aborted when
// the client goes away.
import { toJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CallOptions } from "../rpc/in-process.js";
import type { Via } from "../services/context.js";
import { toHttpError } from "../rpc/errors.js";

const piped = new WeakSet<FastifyRequest>();

/** Whether the request has been through the pipeline (its checks answered or passed). */
export function passedPipeline(req: FastifyRequest): boolean {
  return piped.has(req);
}

/** How a route calls a service: as its HTTP request, with the call's response headers copied to the reply. */
export function callOptions(req: FastifyRequest, reply: FastifyReply, via: Via, values?: ContextValues): CallOptions {
  piped.add(req);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const abort = new AbortController();
  // Aborted when the client goes before its answer is sent. The response's "close" says so:
  // the request's comes as soon as its body has been read, while the call is still running.
  reply.raw.once("close", () => {
    if (!reply.raw.writableEnded) abort.abort();
  });
  return {
    headers,
    via,
    requestId: req.id,
    clientAddress: req.clientAddress,
    route: req.routeOptions.url,
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
