// Native gRPC over HTTP/2 cleartext for internal callers (@grpc/grpc-js clients work), with
// explicit HTTP/2 limits (config.grpc): concurrent streams and header list size announced in
// SETTINGS, an idle timeout for sessions and a deadline for receiving each stream's request.
import http2 from "node:http2";
import { Code, ConnectError, createConnectRouter, type ContextValues } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { ServerDeps } from "./server-deps.js";
import { requestIdKey } from "../services/context.js";
import { createContextValues } from "@connectrpc/connect";
import { unaryFastPath } from "./grpc-unary.js";
import { clampDeadlineHeaders } from "./deadline.js";
import { logBug } from "./pipeline.js";
import { REQUEST_ID_HEADER, requestIdRule } from "./request-id.js";
import { clientAddressKey } from "./rate-limit.js";
import { clientAddressRule } from "./client-address.js";
import { connectServerOptions } from "./router.js";
import { CALLS_GRACE_MS, callsShutdown, type CallsShutdown } from "./shutdown.js";
import { serviceImpls, type Services } from "../services/index.js";

export interface GrpcServer {
  port: number;
  close(): Promise<void>;
}

/** What answers each call: the unary fast path, or Connect's own handler, with the call's client address and request id. */
function callHandler(deps: ServerDeps, services: Services, shutdown: CallsShutdown): (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void {
  const options = connectServerOptions(deps, services);
  // Connect's node adapter, taken apart (connectNodeAdapter), so that the unary fast path can
  // hand it a call whose body it has begun to read.
  const router = createConnectRouter({
    ...options,
    shutdownSignal: shutdown.signal,
    grpc: true,
    grpcWeb: false,
    connect: false,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  options.routes(router);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  const onBug = (err: unknown, procedure: string) => logBug(deps.logger, err, { via: "grpc", procedure });
  const fast = unaryFastPath(serviceImpls(services), options.interceptors ?? [], options.readMaxBytes!, onBug, shutdown);
  const viaConnect = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, values: ContextValues, body?: AsyncIterable<Uint8Array>) => {
    const h = handlers.get(req.url.split("?", 1)[0]!);
    if (!h) return void res.writeHead(404).end();
    const uReq = universalRequestFromNodeRequest(req, res, undefined, values);
    h(body ? { ...uReq, body } : uReq)
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((reason) => {
        if (ConnectError.from(reason).code !== Code.Aborted)
          deps.logger.error({ err: reason, rpc: `${h.service.typeName}/${h.method.name}` }, "an RPC's handler failed");
      });
  };
  // The client: the peer, or behind a trusted proxy the address its x-forwarded-for names (as on the gateway).
  const clients = clientAddressRule(deps.config.trustedProxies);
  const requestIdOf = requestIdRule(deps.config);
  return (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    clampDeadlineHeaders(req.headers);
    const client = clients.clientAddress(req.socket?.remoteAddress, req.headers["x-forwarded-for"]);
    const values = createContextValues().set(clientAddressKey, client).set(requestIdKey, requestIdOf(req.headers[REQUEST_ID_HEADER]));
    if (!fast(req, res, values, (body) => viaConnect(req, res, values, body))) viaConnect(req, res, values);
  };
}

export async function startGrpcServer(deps: ServerDeps, services: Services, host: string, port: number): Promise<GrpcServer> {
  const shutdown = callsShutdown();
  const handler = callHandler(deps, services, shutdown);
  const { idleTimeoutMs, requestTimeoutMs, maxConcurrentStreams, maxHeaderListSize } = deps.config.grpc;
  const server = http2.createServer({ settings: { maxConcurrentStreams, maxHeaderListSize } }, handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  const openStreams = new WeakMap<http2.Http2Session, number>();
  server.on("session", (s) => {
    sessions.add(s);
    openStreams.set(s, 0);
    s.once("close", () => sessions.delete(s));
  });

  // Idle sessions: no complete frame for idleTimeoutMs (bytes trickled into a frame do not
  // count). A session with open streams is kept — a long-poll or WatchRun may be quiet for
  // long — and the timer starts again with its next frame.
  server.setTimeout(idleTimeoutMs);
  server.on("timeout", (s: http2.Http2Session) => {
    if (s.destroyed || s.closed || (openStreams.get(s) ?? 0) > 0) return;
    // GOAWAY tells a well-behaved client to reconnect for its next call; then the socket goes
    // (close() would wait for a peer that may never finish its preface).
    s.goaway(http2.constants.NGHTTP2_NO_ERROR);
    setTimeout(() => s.destroy(), 200).unref();
  });

  // Slow requests: a stream must receive its whole request (headers and message) within
  // requestTimeoutMs, or it is reset (CANCEL). The answer itself may take as long as the call needs.
  server.on("stream", (stream: http2.ServerHttp2Stream) => {
    const session = stream.session;
    if (session) openStreams.set(session, (openStreams.get(session) ?? 0) + 1);
    const timer = setTimeout(() => {
      if (!stream.destroyed && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    }, requestTimeoutMs);
    timer.unref();
    stream.once("end", () => clearTimeout(timer));
    stream.once("close", () => {
      clearTimeout(timer);
      if (session) openStreams.set(session, Math.max(0, (openStreams.get(session) ?? 1) - 1));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Ask clients to go away; in-flight streams finish (or end with UNAVAILABLE after the
        // grace period), idle sessions close; a session still open a second later is cut.
        for (const s of sessions) s.close();
        shutdown.begin();
        setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, CALLS_GRACE_MS + 1000).unref();
      }),
  };
}
