// The Fastify gateway: Connect / gRPC-Web for every service, the webhook route,
// the /v1 REST API, health endpoints and the OpenAPI document.
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import Fastify, { type FastifyInstance } from "fastify";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import { redactUrl } from "../logging.js";
import { registerServices, type Services } from "../services.js";
import { sendError } from "./rest.js";
import { registerWebhookRoutes } from "./webhook.js";
import { registerApiRateLimit, registerV1Routes } from "./v1.js";
import { registerRunRoutes } from "./runs.js";
import { registerExtraConnectRoutes } from "./extra.js";

export async function buildGateway(deps: Deps, services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    logger: false,
    bodyLimit: deps.config.bodyLimitBytes,
    return503OnClosing: true,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true },
  });

  app.addHook("onResponse", async (req, reply) => {
    deps.logger.info({ method: req.method, url: redactUrl(req.url), status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, "request");
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, _req, reply) => {
    // sendError() sends at once, so the 413 status must be set here rather than after it.
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") return reply.code(413).send({ error: `request body larger than ${deps.config.bodyLimitBytes} bytes`, code: "resource_exhausted" });
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500 && !(err instanceof ConnectError)) {
      return sendError(reply, new ConnectError(err.message, Code.InvalidArgument));
    }
    if (!(err instanceof ConnectError)) deps.logger.error({ err }, "unhandled error");
    return sendError(reply, err);
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, new ConnectError(`no route for ${req.method} ${redactUrl(req.url)}`, Code.NotFound)));

  // Connect's plugin replaces the JSON body parser, so it lives in its own scope.
  await app.register(async (scope) => {
    await scope.register(fastifyConnectPlugin, {
      routes: (router) => {
        registerServices(router, services);
        registerExtraConnectRoutes(router, deps);
      },
      shutdownTimeoutMs: 5000,
    });
  });

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await deps.db.ping();
      return { status: "ready" };
    } catch {
      return reply.code(503).send({ error: "database unreachable", code: "unavailable" });
    }
  });

  // Per-token rate limit + headers on every /v1 response (root hook: covers /v1/runs too).
  registerApiRateLimit(app, deps);
  await app.register(async (scope) => registerWebhookRoutes(scope, deps, services));
  await app.register(async (scope) => registerV1Routes(scope, deps, services));
  await app.register(async (scope) => registerRunRoutes(scope, deps, services));
  return app;
}
