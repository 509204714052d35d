// AdminService: a workflow's webhook (on, off, a new URL, its rate limit).
import type { Database } from "../../store/index.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../errors.js";
import { adminLog, caller, workflowOf, type AdminImpl } from "./common.js";
import { webhookToProto } from "./convert.js";

/** One conditional update of the workflow's webhook; returns the workflow after it. */
async function updateWebhook(db: Database, workflowId: string, update: Record<string, unknown>): Promise<T.WorkflowDoc> {
  const after = await db.workflows.findOneAndUpdate({ _id: workflowId }, update, { returnDocument: "after" });
  if (!after) throw fail.notFound(`workflow "${workflowId}" not found`);
  return after;
}

export function webhookMethods(deps: Deps): Pick<AdminImpl, "enableWebhook" | "disableWebhook" | "regenerateWebhook" | "setWebhookRateLimit"> {
  const { db, config } = deps;
  return {
    async enableWebhook(req, ctx) {
      const p = await caller(db, ctx);
      const { workflow, project, environment } = await workflowOf(db, p, req.workflowId);
      const after = await updateWebhook(db, workflow._id, { $set: { "webhook.enabled": true, "webhook.everEnabled": true } });
      await adminLog(deps, p.user, "webhook.enabled", `workflow/${workflow._id}`, { generation: after.webhook.generation, wasEnabled: workflow.webhook.enabled }, { projectId: project._id, environment });
      return { webhook: webhookToProto(config, after) };
    },

    async disableWebhook(req, ctx) {
      const p = await caller(db, ctx);
      const { workflow, project, environment } = await workflowOf(db, p, req.workflowId);
      const after = await updateWebhook(db, workflow._id, { $set: { "webhook.enabled": false } });
      await adminLog(deps, p.user, "webhook.disabled", `workflow/${workflow._id}`, { generation: after.webhook.generation, wasEnabled: workflow.webhook.enabled }, { projectId: project._id, environment });
      return { webhook: webhookToProto(config, after) };
    },

    async regenerateWebhook(req, ctx) {
      const p = await caller(db, ctx);
      const { workflow, project, environment } = await workflowOf(db, p, req.workflowId);
      const after = await updateWebhook(db, workflow._id, { $inc: { "webhook.generation": 1 } });
      await adminLog(deps, p.user, "webhook.regenerated", `workflow/${workflow._id}`, { generation: after.webhook.generation }, { projectId: project._id, environment });
      return { webhook: webhookToProto(config, after) };
    },

    async setWebhookRateLimit(req, ctx) {
      const p = await caller(db, ctx);
      const { workflow, project, environment } = await workflowOf(db, p, req.workflowId);
      const limit = req.rateLimitPerMinute;
      if (limit < 1 || limit > 100_000) throw fail.invalid("rate_limit_per_minute: must be 1 to 100000");
      const before = await db.workflows.findOneAndUpdate({ _id: workflow._id }, { $set: { "webhook.rateLimitPerMinute": limit } }, { returnDocument: "before" });
      if (!before) throw fail.notFound(`workflow "${req.workflowId}" not found`);
      await adminLog(deps, p.user, "webhook.rate_limit.changed", `workflow/${workflow._id}`, { from: before.webhook.rateLimitPerMinute, to: limit }, { projectId: project._id, environment });
      return { webhook: webhookToProto(config, { ...before, webhook: { ...before.webhook, rateLimitPerMinute: limit } }) };
    },
  };
}
