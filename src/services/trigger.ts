// TriggerService: gRPC and Connect callers name the webhook URL and the record; the webhook
// route comes through here too, with its key and body in the call's context values.
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import type { Deps } from "../deps.js";
import { triggerRun } from "../domain/trigger.js";
import { keyOfUrl } from "../domain/webhook-keys.js";
import { authorization, requestIdKey, webhookCallKey } from "./context.js";

/** Response metadata (and the webhook's HTTP header) of an answer that repeats an earlier call's. */
export const IDEMPOTENT_REPLAYED = "idempotent-replayed";

/** The answer of a start, with IDEMPOTENT_REPLAYED set when it repeats an earlier call's. */
export function answerStart<T extends { replayed: boolean }>(ctx: HandlerContext, out: T): T {
  if (out.replayed) ctx.responseHeader.set(IDEMPOTENT_REPLAYED, "true");
  return out;
}

export function createTriggerService(deps: Deps): ServiceImpl<typeof TriggerService> {
  return {
    async triggerRun(req, ctx) {
      const webhook = ctx.values.get(webhookCallKey);
      // The webhook's Idempotency-Key header (present but empty is a bad key); a proto3 string is never absent, so empty means none.
      const idempotencyKey = webhook ? (ctx.requestHeader.get("idempotency-key") ?? undefined) : req.idempotencyKey || undefined;
      const out = await triggerRun(deps, {
        key: webhook?.key ?? keyOfUrl(req.webhookUrl),
        authorization: authorization(ctx),
        body: webhook?.body ?? { recordId: req.recordId },
        via: webhook ? "webhook" : "grpc",
        requestId: ctx.values.get(requestIdKey),
        idempotencyKey,
      });
      return answerStart(ctx, out);
    },
  };
}
