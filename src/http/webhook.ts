// POST /hooks/{key}: the signed webhook URL. The body is kept raw and parsed by the trigger,
// so that a bad body — including a Content-Type other than application/json (with any
// parameters) or none, and JSON nested too deeply — is reported only at its place in the
// check order (after the key, token, webhook, permission and rate-limit checks), as 400
// invalid_argument. Neither the key nor the token is ever logged. The call goes through the
// pipeline of every RPC (rpc/pipeline.ts: the limit on failed authentications, errors, bugs
// logged); refusals and failures are answered by the gateway's error handler (app.ts).
import type { FastifyInstance } from "fastify";
import type { Services } from "../services/index.js";
import type { InProcessCaller } from "../rpc/in-process.js";
import { createContextValues } from "@connectrpc/connect";
import { TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import { webhookCallKey } from "../services/context.js";
import { parseWebhookBody, type TriggerBody } from "../domain/trigger.js";
import { acceptRawBodies, contentTypeError, RawBody } from "./body.js";
import { depthError } from "../lib/json-depth.js";
import { callOptions } from "./bridge.js";
import { routeUrl, WEBHOOK } from "./routes.js";

/** The body as the trigger sees it: the record id, or why the body is unusable (reported at step 6). */
function webhookBody(raw: unknown, contentType: string | undefined): TriggerBody {
  const text = raw instanceof RawBody ? raw.text : undefined;
  const reason = contentTypeError(contentType) ?? (text === undefined ? null : depthError(text));
  return reason ? { bodyError: reason } : parseWebhookBody(text);
}

/**
 * The webhook's route template (metrics count its answers by status). A wildcard, not `:key`:
 * a key of any length (or with extra segments) is a malformed key (400), not an unknown route
 * (Fastify's maxParamLength would answer 404 for long ones).
 */
export const WEBHOOK_ROUTE = routeUrl(WEBHOOK.path, true);

export async function registerWebhookRoutes(app: FastifyInstance, caller: InProcessCaller, services: Services): Promise<void> {
  // Any content type (or none): keep the raw text; Fastify's bodyLimit still answers 413 first.
  acceptRawBodies(app);

  app.post<{ Params: { "*": string } }>(WEBHOOK_ROUTE, async (req, reply) => {
    const call = { key: req.params["*"], body: webhookBody(req.body, req.headers["content-type"]) };
    const out = await caller.unary(
      services.trigger,
      TriggerService.method.triggerRun,
      {},
      callOptions(req, reply, "webhook", createContextValues().set(webhookCallKey, call)),
    );
    return reply.code(202).send({ runId: out.runId });
  });
}
