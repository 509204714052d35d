// Native gRPC's unary calls in the common case — one uncompressed binary message, answered
// uncompressed — without Connect's streaming pipeline, which runs every call, unary too, as a
// chain of async iterables (and aborts a signal at the end of each): on a webhook-sized call
// that cost more CPU than the whole REST gateway (bench/grpc-vs-rest.ts). The call itself is
// Connect's: the same implementation, interceptors (pipeline.ts), handler context, timeout and
// error trailers (its own setTrailerStatus). Anything else — another content type or
// encoding, a bad deadline, a message that is malformed, nested too deep, too large, or not
// exactly one — is handed to Connect's handler with the bytes read so far, so every refusal
// is Connect's own.
import { constants as http2constants, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders } from "node:http2";
import { fromBinary, toBinary, type DescMessage, type DescMethodUnary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createHandlerContext,
  createMethodImplSpec,
  type ContextValues,
  type Interceptor,
  type MethodImpl,
  type MethodImplSpec,
} from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { contentTypeProto, grpcStatusOk, headerGrpcStatus, parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { nestingReadOptions } from "./message-nesting.js";
import type { CallsShutdown } from "./shutdown.js";

type UnarySpec = Extract<MethodImplSpec, { kind: "unary" }>;

/** Answers a call itself and returns true, or returns false (headers alone tell) and leaves it to Connect. */
export type UnaryFastPath = (
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  values: ContextValues,
  toConnect: (body: AsyncIterable<Uint8Array>) => void,
) => boolean;

/** The unary methods of `services` (service descriptor and implementation pairs) by request path. */
export function unaryFastPath(
  services: Array<[{ typeName: string; methods: readonly { methodKind: string }[] }, object]>,
  interceptors: Interceptor[],
  readMaxBytes: number,
  onBug: (err: unknown, procedure: string) => void,
  shutdown: CallsShutdown,
): UnaryFastPath {
  const specs = new Map<string, UnarySpec>();
  for (const [service, impl] of services) {
    for (const m of service.methods as DescMethodUnary[]) {
      const fn = (impl as Record<string, unknown>)[m.localName];
      if (m.methodKind !== "unary" || typeof fn !== "function") continue;
      specs.set(`/${service.typeName}/${m.name}`, createMethodImplSpec(m, (fn as MethodImpl<DescMethodUnary>).bind(impl)) as UnarySpec);
    }
  }
  return (req, res, values, toConnect) => {
    const spec = specs.get(req.url);
    const h = req.headers;
    const encoding = h["grpc-encoding"];
    if (!spec || req.method !== "POST" || (h["content-type"] !== "application/grpc" && h["content-type"] !== contentTypeProto)) return false;
    if (encoding !== undefined && encoding !== "identity") return false;
    // Node gives header names in lower case (Connect's header constants are capitalised).
    const timeout = parseTimeout((h["grpc-timeout"] as string | undefined) ?? null, Number.MAX_SAFE_INTEGER);
    if (timeout.error) return false;
    answer(spec, interceptors, req, res, values, timeout.timeoutMs, readMaxBytes, toConnect, shutdown).catch((err: unknown) => {
      // A throw outside the call (writing the headers or trailers, say): ours to fix. The stream
      // is reset, so the caller sees an error rather than waiting for an answer.
      onBug(err, req.url.slice(1));
      if (!res.stream.destroyed) res.stream.close(http2constants.NGHTTP2_INTERNAL_ERROR);
    });
    return true;
  };
}

async function answer(
  spec: UnarySpec,
  interceptors: Interceptor[],
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  values: ContextValues,
  timeoutMs: number | undefined,
  readMaxBytes: number,
  toConnect: (body: AsyncIterable<Uint8Array>) => void,
  shutdown: CallsShutdown,
): Promise<void> {
  // The request: read whole, up to one envelope of readMaxBytes; past that, Connect refuses it.
  const chunks: Buffer[] = [];
  let size = 0;
  const body = req[Symbol.asyncIterator]();
  try {
    for (let r = await body.next(); !r.done; r = await body.next()) {
      chunks.push(r.value as Buffer);
      size += (r.value as Buffer).byteLength;
      if (size > 5 + readMaxBytes) return toConnect(replay(chunks, body));
    }
  } catch {
    return; // the stream was reset: nobody to answer
  }
  const bytes = Buffer.concat(chunks, size);
  let message: ReturnType<typeof fromBinary>;
  try {
    if (size < 5 || bytes[0] !== 0 || bytes.readUInt32BE(1) !== size - 5) throw new Error("not one uncompressed message");
    message = fromBinary(spec.method.input as DescMessage, bytes.subarray(5), nestingReadOptions);
  } catch {
    return toConnect(replay([bytes]));
  }

  // Aborted when the client goes before its answer (not at the end of every call), or when a
  // stopping server's grace period is over (a long poll answers the run as it is then).
  const gone = new AbortController();
  res.once("close", () => res.writableEnded || gone.abort(new ConnectError("the client went away", Code.Canceled)));
  const untrack = shutdown.track((reason) => gone.abort(reason));
  const ctx = createHandlerContext({
    ...spec,
    service: spec.method.parent,
    protocolName: "grpc",
    requestMethod: "POST",
    url: req.url,
    timeoutMs,
    requestSignal: gone.signal,
    requestHeader: webHeaders(req.headers),
    responseHeader: { "content-type": contentTypeProto },
    responseTrailer: { [headerGrpcStatus]: grpcStatusOk },
    contextValues: values,
  });
  let envelope: Buffer | undefined;
  try {
    const out = toBinary(spec.method.output, await invokeUnaryImplementation(spec, ctx, message, interceptors));
    envelope = Buffer.allocUnsafe(5 + out.byteLength);
    envelope[0] = 0;
    envelope.writeUInt32BE(out.byteLength, 1);
    envelope.set(out, 5);
  } catch (e) {
    setTrailerStatus(ctx.responseTrailer, e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e));
  } finally {
    untrack();
    if (timeoutMs !== undefined) ctx.abort(); // its deadline timer
  }
  if (res.destroyed) return;
  res.writeHead(200, Object.fromEntries(ctx.responseHeader));
  res.addTrailers(Object.fromEntries(ctx.responseTrailer));
  if (envelope) res.end(envelope);
  else res.end();
}

/** The chunks already read, then the rest of the stream. */
async function* replay(chunks: Buffer[], rest?: AsyncIterator<unknown>): AsyncGenerator<Uint8Array> {
  yield* chunks;
  if (rest) for (let r = await rest.next(); !r.done; r = await rest.next()) yield r.value as Uint8Array;
}

/** A request's headers as Connect's handlers see them (HTTP/2 pseudo-headers left out). */
function webHeaders(headers: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
  }
  return out;
}
