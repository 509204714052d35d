// Calling a service implementation in process: the one bridge by which the webhook route,
// the /v1 REST routes and the demo seeding reach the very same implementations as gRPC and
// Connect, with a handler context like theirs (headers, entry point, request id, signal).
import { create, type DescMessage, type DescMethodServerStreaming, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { createContextValues, createHandlerContext, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import { requestIdKey, viaKey, type Via } from "../services/context.js";

export interface CallOptions {
  /** The caller's request headers (its `authorization` among them). */
  headers: Headers;
  via: Via;
  requestId?: string;
  /** Aborted when the caller goes away (long-polls and streams stop). */
  signal?: AbortSignal;
  /** More context values (the webhook's body). */
  values?: ContextValues;
  /** How the call arrived, as a handler sees it in its context (HTTP method and URL). */
  requestMethod?: string;
  url?: string;
  /** Given the response headers the handler set (rate-limit figures, Retry-After), whether it answered or failed. */
  onResponseHeader?: (headers: Headers) => void;
}

type AnyMethod = DescMethodUnary<DescMessage, DescMessage> | DescMethodServerStreaming<DescMessage, DescMessage>;

function contextFor(method: AnyMethod, opts: CallOptions): HandlerContext {
  const values = opts.values ?? createContextValues();
  values.set(viaKey, opts.via);
  if (opts.requestId) values.set(requestIdKey, opts.requestId);
  return createHandlerContext({
    service: method.parent,
    method,
    protocolName: "in-process",
    requestMethod: opts.requestMethod ?? "POST",
    url: opts.url ?? `/${method.parent.typeName}/${method.name}`,
    requestHeader: opts.headers,
    requestSignal: opts.signal,
    contextValues: values,
  });
}

function implOf(impl: object, method: AnyMethod): (req: unknown, ctx: HandlerContext) => unknown {
  const fn = (impl as Record<string, unknown>)[method.localName];
  if (typeof fn !== "function") throw new Error(`${method.parent.typeName} has no implementation of ${method.name}`);
  return (req, ctx) => fn.call(impl, req, ctx);
}

/** Calls a unary method of `impl` and returns its answer. */
export async function callUnary<I extends DescMessage, O extends DescMessage>(impl: object, method: DescMethodUnary<I, O>, init: MessageInitShape<I>, opts: CallOptions): Promise<MessageShape<O>> {
  const ctx = contextFor(method as AnyMethod, opts);
  try {
    const out = await implOf(impl, method as AnyMethod)(create(method.input, init), ctx);
    return create(method.output, out as MessageInitShape<O>);
  } finally {
    opts.onResponseHeader?.(ctx.responseHeader);
  }
}

/** Calls a server-streaming method of `impl`: its messages, pulled as the caller reads them. */
export function callServerStream<I extends DescMessage, O extends DescMessage>(
  impl: object,
  method: DescMethodServerStreaming<I, O>,
  init: MessageInitShape<I>,
  opts: CallOptions,
): AsyncIterable<MessageInitShape<O>> {
  return implOf(impl, method as AnyMethod)(create(method.input, init), contextFor(method as AnyMethod, opts)) as AsyncIterable<MessageInitShape<O>>;
}
