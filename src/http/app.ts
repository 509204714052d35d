// The Fastify gateway: Connect / gRPC-Web for every service, the webhook route,
// the /v1 REST API, health endpoints, the OpenAPI document and its reference page.
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { Duplex } from "node:stream";
import type { IncomingHttpHeaders } from "node:http";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { ConnectError, createContextValues, type ContextValues } from "@connectrpc/connect";
import { fail } from "../domain/errors.js";
import { errorBody, isInternal } from "../rpc/errors.js";
import type { ServerDeps } from "../rpc/server-deps.js";
import { requestIdKey, viaSessionCookieKey } from "../services/context.js";
import { redactUrl } from "../lib/logging.js";
import { clampDeadlineHeaders } from "../rpc/deadline.js";
import type { Services } from "../services/index.js";
import { callOptions, passedPipeline, sendError } from "./bridge.js";
import { registerWebhookRoutes, WEBHOOK_ROUTE } from "./webhook.js";
import { REQUEST_ID_HEADER, requestIdRule } from "../rpc/request-id.js";
import { API_CHECKS, isApiRequest, registerV1Routes } from "./v1.js";
import { clientAddressKey } from "../rpc/rate-limit.js";
import { clientAddressRule } from "../rpc/client-address.js";
import { connectServerOptions } from "../rpc/router.js";
import { callsShutdown, type CallsShutdown } from "../rpc/shutdown.js";
import { inProcessCaller, type InProcessCaller } from "../rpc/in-process.js";
import { logBug, pipelineInterceptors } from "../rpc/pipeline.js";
import { TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import { acceptRawBodies } from "./body.js";
import { HEALTHZ, READYZ } from "./routes.js";
import { registerDocsRoutes } from "./docs.js";
import { registerConsolePages, registerConsoleSession, viaSessionCookie } from "./console.js";
import { consoleAssets } from "./console-assets.js";
import { openApiDocument } from "./openapi.js";

/**
 * Errors Node reports before a request reaches Fastify (request timeout, oversized headers,
 * malformed HTTP): answered with the gateway's `{error, code}` body, then the connection closes.
 */
function clientError(deps: ServerDeps, err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, reason, code, message] =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "Request Timeout", "deadline_exceeded", "the request was not received in time"]
      : err.code === "HPE_HEADER_OVERFLOW"
        ? [431, "Request Header Fields Too Large", "resource_exhausted", "the request headers are too large"]
        : [400, "Bad Request", "invalid_argument", "malformed HTTP request"];
  deps.logger.debug({ code: err.code, status }, "client error");
  const body = JSON.stringify(errorBody(code, message));
  // Like Node's own handler: never write into a response already under way.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

function registerHealthRoutes(app: FastifyInstance, deps: ServerDeps): void {
  app.get(HEALTHZ.path, async () => ({ status: "ok" }));
  // Ready while the database answers (src/store/monitor.ts: a ping a second, so probes cost it nothing).
  app.get(READYZ.path, async (_req, reply) => {
    if (deps.health.shuttingDown) return reply.code(503).send(errorBody("unavailable", "shutting down"));
    if (!deps.dbMonitor.up) return sendError(reply, fail.unavailable("database unreachable"));
    return { status: "ready" };
  });
}

/**
 * A webhook or /v1 request the gateway answers before its handler runs (a 404, a 413, a
 * malformed request) still passes the pipeline's checks first, as a call that reaches its
 * implementation does (the limit on failed authentications; on /v1 the token and the per-token
 * rate limit, whose headers it then carries): what they refuse it with, if anything.
 */
async function refusalBefore(caller: InProcessCaller, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  if (passedPipeline(req)) return undefined;
  const webhook = req.routeOptions.url === WEBHOOK_ROUTE;
  if (!webhook && !isApiRequest(req)) return undefined;
  try {
    await caller.checks(webhook ? TriggerService.method.triggerRun : API_CHECKS, callOptions(req, reply, webhook ? "webhook" : "api"));
    return undefined;
  } catch (err) {
    return err;
  }
}

/** An answer, counted (by route and status) and logged: by its route, its URL without secrets. */
function logAnswer(deps: ServerDeps, req: FastifyRequest, reply: FastifyReply): void {
  const route = req.routeOptions.url ?? "unmatched";
  const status = reply.statusCode;
  deps.metrics.httpDuration.observe({ method: req.method, route, status }, reply.elapsedTime / 1000);
  if (route === WEBHOOK_ROUTE) deps.metrics.webhookAnswers.inc({ status });
  deps.logger.info(
    { method: req.method, route, url: redactUrl(req.url, req.routeOptions.url), status, ms: Math.round(reply.elapsedTime), requestId: req.id },
    "request",
  );
}

declare module "fastify" {
  interface FastifyRequest {
    /** The client's address by the rule both servers share (rpc/client-address.ts): what the limits count by. */
    clientAddress: string | undefined;
  }
}

/** What a Connect call on the gateway knows of its request: the client's address, its id, and whether its token is the console's cookie. */
function connectCallValues(req: FastifyRequest): ContextValues {
  return createContextValues().set(clientAddressKey, req.clientAddress).set(requestIdKey, req.id).set(viaSessionCookieKey, viaSessionCookie(req));
}

/**
 * How the gateway stops: calls still in flight end after a grace period (rpc/shutdown.ts), and
 * each connection closes once its answer is sent. Fastify closes the idle ones when the stop
 * begins; one whose call (a long poll, a stream) ends later would stay open until its keep-alive
 * timeout, holding the stop. What every call is ended by.
 */
function stopsGracefully(app: FastifyInstance): CallsShutdown {
  const shutdown = callsShutdown();
  let stopping = false;
  app.addHook("preClose", (done) => {
    stopping = true;
    shutdown.begin();
    done();
  });
  app.addHook("onResponse", async () => {
    if (stopping) setImmediate(() => app.server.closeIdleConnections());
  });
  return shutdown;
}

/** The server's options: limits, deadlines, proxies, request ids. */
function serverOptions(deps: ServerDeps, clients: ReturnType<typeof clientAddressRule>) {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = deps.config.http;
  const requestIdOf = requestIdRule(deps.config);
  return {
    logger: false,
    bodyLimit: deps.config.bodyLimitBytes,
    return503OnClosing: true,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true },
    // req.ip (and the forwarded host and protocol) trust the same proxies as req.clientAddress.
    trustProxy: deps.config.trustedProxies.length > 0 ? clients.trusts : false,
    // Slow clients: the headers, then the whole request, must arrive in time (408 and the
    // connection is closed otherwise); answers may take longer (long-polls, NDJSON exports).
    // Node checks these deadlines every connectionsCheckingInterval, so it follows the shortest.
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    http: {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(50, Math.floor(headersTimeoutMs / 4))),
    },
    clientErrorHandler: (err: Error & { code?: string }, socket: Duplex) => clientError(deps, err, socket),
    // The caller's x-request-id when well-formed and no secret, else a new one; echoed on every answer.
    requestIdHeader: false,
    genReqId: (req: { headers: IncomingHttpHeaders }) => requestIdOf(req.headers[REQUEST_ID_HEADER]),
  } as const;
}

export async function buildGateway(deps: ServerDeps, services: Services): Promise<FastifyInstance> {
  const clients = clientAddressRule(deps.config.trustedProxies);
  const app = Fastify(serverOptions(deps, clients));

  app.decorateRequest("clientAddress", undefined);
  app.addHook("onRequest", async (req, reply) => {
    req.clientAddress = clients.clientAddress(req.socket.remoteAddress, req.headers["x-forwarded-for"]);
    reply.header(REQUEST_ID_HEADER, req.id);
    clampDeadlineHeaders(req.raw.headers);
  });
  app.addHook("onResponse", async (req, reply) => logAnswer(deps, req, reply));
  const shutdown = stopsGracefully(app);
  const caller = inProcessCaller(pipelineInterceptors(deps), shutdown);
  // The one answer to whatever a route, hook or body parser throws, in every plugin (they inherit it).
  app.setErrorHandler(async (err: Error & { code?: string; statusCode?: number }, req, reply) => {
    const refusal = await refusalBefore(caller, req, reply);
    if (refusal) return sendError(reply, refusal);
    // sendError() sends at once, so the 413 status must be set here rather than after it.
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE")
      return reply.code(413).send(errorBody("resource_exhausted", `request body larger than ${deps.config.bodyLimitBytes} bytes`));
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500 && !(err instanceof ConnectError)) {
      return sendError(reply, fail.invalid(err.message));
    }
    if (isInternal(err)) {
      const route = req.routeOptions.url;
      logBug(deps.logger, err, { via: route === WEBHOOK_ROUTE ? "webhook" : "api", route });
    }
    return sendError(reply, err);
  });
  app.setNotFoundHandler(async (req, reply) => {
    const refusal = await refusalBefore(caller, req, reply);
    return sendError(reply, refusal ?? fail.notFound(`no route for ${req.method} ${redactUrl(req.url)}`));
  });

  // Console sign-in, and its cookie on the console's Connect calls (a hook on every route, before Connect's); none without the console.
  if (deps.config.console) registerConsoleSession(app, deps);
  // Connect's plugin replaces the JSON body parser, so it lives in its own scope.
  await app.register(async (scope) => {
    await scope.register(fastifyConnectPlugin, {
      ...connectServerOptions(deps, services),
      contextValues: connectCallValues,
      shutdownSignal: shutdown.signal, // not the plugin's shutdownTimeoutMs, whose signal warns of a leak past 10 calls
    });
  });

  registerHealthRoutes(app, deps);
  await app.register(async (scope) => registerWebhookRoutes(scope, caller, services));
  // The /v1 plugin: one body parser for all its routes (body.ts), then the routes.
  await app.register(async (scope) => {
    acceptRawBodies(scope);
    await registerV1Routes(scope, deps, caller, services);
  });
  if (deps.config.docs) await registerDocsRoutes(app, openApiDocument(deps.config), deps.config.publicBaseUrl);
  if (deps.config.console) registerConsolePages(app, await consoleAssets(deps.config.cacheDir, (m) => deps.logger.info(m)));
  return app;
}
