// Calling a service implementation in process: the one bridge by which the webhook route,
// the /v1 REST routes and the demo seeding reach the very same implementations as gRPC and
// Connect, through the same interceptors (pipeline.ts) and Connect's own invocation code, with
// a handler context like theirs (headers, entry point, request id, client address, signal).
import { create, type DescMessage, type DescMethodServerStreaming, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import {
  createContextKey,
  createContextValues,
  createHandlerContext,
  createMethodImplSpec,
  type ContextValues,
  type Interceptor,
  type MethodImpl,
  type MethodImplSpec,
} from "@connectrpc/connect";
import { createAsyncIterable, invokeUnaryImplementation, transformInvokeImplementation } from "@connectrpc/connect/protocol";
import { requestIdKey, viaKey, type Via } from "../services/context.js";
import { answerHeadersKey, clientAddressKey } from "./rate-limit.js";
import type { CallsShutdown } from "./shutdown.js";

export interface CallOptions {
  /** The caller's request headers (its `authorization` among them). */
  headers: Headers;
  via: Via;
  requestId?: string;
  /** The caller's network address (the limit on failed authentications counts by it). */
  clientAddress?: string;
  /** The HTTP route the call came in by (named in the log of a bug). */
  route?: string;
  /** Aborted when the caller goes away (long-polls and streams stop). */
  signal?: AbortSignal;
  /** More context values (the webhook's body). */
  values?: ContextValues;
  /** How the call arrived, as a handler sees it in its context (HTTP method and URL). */
  requestMethod?: string;
  url?: string;
  /** Given the response headers the interceptors and the handler set (rate-limit figures, request id), once it answered or failed. */
  onResponseHeader?: (headers: Headers) => void;
}

/** The HTTP route of an in-process call (undefined for RPCs). */
export const httpRouteKey = createContextKey<string | undefined>(undefined, { description: "HTTP route of the call" });

/** A request message, or how to read it: read inside the pipeline, after the checks that answer first (token, rate limit). */
export type RequestInit<I extends DescMessage> = MessageInitShape<I> | (() => MessageInitShape<I>);

type AnyMethod = DescMethodUnary<DescMessage, DescMessage> | DescMethodServerStreaming<DescMessage, DescMessage>;

function contextFor(method: AnyMethod, opts: CallOptions): ReturnType<typeof createHandlerContext> {
  const values = opts.values ?? createContextValues();
  values.set(viaKey, opts.via);
  if (opts.requestId) values.set(requestIdKey, opts.requestId);
  if (opts.clientAddress) values.set(clientAddressKey, opts.clientAddress);
  if (opts.route) values.set(httpRouteKey, opts.route);
  const ctx = createHandlerContext({
    service: method.parent,
    method,
    protocolName: "in-process",
    requestMethod: opts.requestMethod ?? "POST",
    url: opts.url ?? `/${method.parent.typeName}/${method.name}`,
    requestHeader: opts.headers,
    requestSignal: opts.signal,
    contextValues: values,
  });
  // An HTTP answer carries its response headers whatever it is, errors included.
  values.set(answerHeadersKey, ctx.responseHeader);
  return ctx;
}

/** The implementation of `method` in `impl`, bound to it. */
function implOf(impl: object, method: AnyMethod): (...args: never[]) => unknown {
  const fn = (impl as Record<string, unknown>)[method.localName];
  if (typeof fn !== "function") throw new Error(`${method.parent.typeName} has no implementation of ${method.name}`);
  return (fn as (...args: never[]) => unknown).bind(impl);
}

/** The innermost interceptor of a call whose request is read late: the message, made once the checks before it passed. */
function readRequest(method: AnyMethod, init: () => MessageInitShape<DescMessage>): Interceptor {
  return (next) => (req) => {
    const message = create(method.input, init());
    return next(req.stream ? { ...req, message: createAsyncIterable([message]) } : { ...req, message });
  };
}

/** What every in-process call takes: the implementation, the method, the request (or how to read it), the call's options. */
type CallArgs<M, I extends DescMessage> = [impl: object, method: M, init: RequestInit<I>, opts: CallOptions];

export interface InProcessCaller {
  /** Calls a unary method of `impl` and returns its answer. */
  unary<I extends DescMessage, O extends DescMessage>(...args: CallArgs<DescMethodUnary<I, O>, I>): Promise<MessageShape<O>>;
  /** Calls a server-streaming method of `impl`: its messages, pulled as the caller reads them. */
  serverStream<I extends DescMessage, O extends DescMessage>(...args: CallArgs<DescMethodServerStreaming<I, O>, I>): AsyncIterable<MessageShape<O>>;
  /**
   * Runs the interceptors alone, for a call of `method` that no implementation answers (a
   * request the gateway refuses before its handler: a 404 or 413, so that it still passes the
   * same checks first); throws what they refuse it with.
   */
  checks(method: DescMethodUnary, opts: CallOptions): Promise<void>;
}

/**
 * Calls through `interceptors` (outermost first), exactly as Connect's handlers run them for RPCs,
 * each ended by `shutdown` as theirs are (rpc/shutdown.ts).
 */
export function inProcessCaller(interceptors: Interceptor[], shutdown?: CallsShutdown): InProcessCaller {
  /** The spec, first message and interceptors of a call (a request read late is read by the innermost one). */
  const prepare = (impl: object, method: AnyMethod, init: RequestInit<DescMessage>) => {
    const spec = createMethodImplSpec(method, implOf(impl, method) as MethodImpl<AnyMethod>);
    const lazy = typeof init === "function";
    const message = create(method.input, lazy ? undefined : init);
    return { spec, message, chain: lazy ? [...interceptors, readRequest(method, init)] : interceptors };
  };
  async function unary(impl: object, method: AnyMethod, init: RequestInit<DescMessage>, opts: CallOptions): Promise<unknown> {
    const ctx = contextFor(method, opts);
    const untrack = shutdown?.track((reason) => ctx.abort(reason));
    const { spec, message, chain } = prepare(impl, method, init);
    try {
      return await invokeUnaryImplementation(spec as Extract<MethodImplSpec, { kind: "unary" }>, ctx, message, chain);
    } finally {
      untrack?.();
      opts.onResponseHeader?.(ctx.responseHeader);
    }
  }
  async function* serverStream(impl: object, method: AnyMethod, init: RequestInit<DescMessage>, opts: CallOptions): AsyncGenerator<unknown> {
    const ctx = contextFor(method, opts);
    const untrack = shutdown?.track((reason) => ctx.abort(reason));
    const { spec, message, chain } = prepare(impl, method, init);
    let answered = false;
    // The headers are known once the first message (or the refusal) is.
    const answer = () => {
      if (!answered) opts.onResponseHeader?.(ctx.responseHeader);
      answered = true;
    };
    try {
      for await (const m of transformInvokeImplementation(spec, ctx, chain)(createAsyncIterable([message]))) {
        answer();
        yield m;
      }
    } finally {
      untrack?.();
      answer();
    }
  }
  return {
    unary: unary as InProcessCaller["unary"],
    serverStream: serverStream as InProcessCaller["serverStream"],
    checks: async (method, opts) => void (await unary({ [method.localName]: () => ({}) }, method, {}, opts)),
  };
}

/** Calls without interceptors: the demo seeding, in the CLI's own process. */
export const { unary: callUnary } = inProcessCaller([]);
