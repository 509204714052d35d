// The REST → RPC bridge: REST routes call the very same service implementations as
// gRPC and Connect, with a handler context carrying the caller's headers.
import { createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import { create, toJson, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { DescMethodServerStreaming, DescMethodUnary, DescService } from "@bufbuild/protobuf";
import type { FastifyReply, FastifyRequest } from "fastify";
import { createContextValues } from "@connectrpc/connect";
import { requestIdKey, viaKey, type Via } from "../deps.js";
import { toHttpError } from "../errors.js";

export function handlerContext(service: DescService, method: DescService["methods"][number], req: FastifyRequest, via: Via): HandlerContext {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const abort = new AbortController();
  req.raw.once("close", () => {
    if (!req.raw.complete || req.raw.destroyed) abort.abort();
  });
  return createHandlerContext({
    service,
    method,
    protocolName: "rest",
    requestMethod: req.method,
    url: req.url,
    requestHeader: headers,
    requestSignal: abort.signal,
    contextValues: createContextValues().set(viaKey, via).set(requestIdKey, req.id),
  });
}

/** Canonical ProtoJSON, with implicit defaults emitted (`hasMore: false`, empty lists). */
export function protoJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): unknown {
  return toJson(schema, msg, { alwaysEmitImplicit: true });
}

type UnaryFn<I extends DescMessage, O extends DescMessage> = (req: MessageShape<I>, ctx: HandlerContext) => Promise<MessageInitShape<O>> | MessageInitShape<O>;

/** Calls a unary implementation; returns the response message, with headers the handler set copied to the reply. */
export async function callUnary<I extends DescMessage, O extends DescMessage>(
  service: DescService,
  method: DescMethodUnary<I, O>,
  impl: UnaryFn<I, O>,
  init: MessageInitShape<I>,
  req: FastifyRequest,
  reply: FastifyReply,
  via: Via,
): Promise<MessageShape<O>> {
  const ctx = handlerContext(service, method, req, via);
  try {
    const out = await impl(create(method.input, init), ctx);
    return create(method.output, out as MessageInitShape<O>) as MessageShape<O>;
  } finally {
    ctx.responseHeader.forEach((v, k) => void reply.header(k, v));
  }
}

export function streamContext<I extends DescMessage, O extends DescMessage>(service: DescService, method: DescMethodServerStreaming<I, O>, req: FastifyRequest, via: Via) {
  return handlerContext(service, method, req, via);
}

/** Sends the gateway's error answer `{error, code}` for anything a handler threw. */
export function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  const e = toHttpError(err);
  return reply.code(e.status).headers(e.headers).send(e.body);
}
