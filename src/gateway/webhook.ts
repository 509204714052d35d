// POST /hooks/{key}: the signed webhook URL. The body is kept raw and parsed by the trigger,
// so that a bad body is reported only at its place in the check order (after the key, token, webhook, permission and rate-limit checks).
// Neither the key nor the token is ever logged.
import { ConnectError } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import type { Deps } from "../deps.js";
import type { Services } from "../services.js";
import { parseWebhookBody, triggerRun } from "../trigger/service.js";
import { sendError } from "./rest.js";

export async function registerWebhookRoutes(app: FastifyInstance, deps: Deps, _services: Services): Promise<void> {
  // Any content type (or none): keep the raw text; Fastify's bodyLimit still answers 413 first.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));

  // A wildcard, not `:key`: a key of any length (or with extra segments) is a malformed key (400),
  // not an unknown route (Fastify's maxParamLength would answer 404 for long ones).
  app.post<{ Params: { "*": string } }>("/hooks/*", async (req, reply) => {
    try {
      const raw = typeof req.body === "string" ? req.body : undefined;
      const out = await triggerRun(deps, {
        key: req.params["*"],
        authorization: req.headers.authorization,
        body: parseWebhookBody(raw),
        via: "webhook",
      });
      return reply.code(202).send({ runId: out.runId });
    } catch (err) {
      if (!(err instanceof ConnectError)) deps.logger.error({ err }, "webhook trigger failed");
      return sendError(reply, err);
    }
  });
}
