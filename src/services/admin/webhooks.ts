// AdminService: a workflow's webhook (on, off, a new URL, its rate limit).
import type { HandlerContext } from "@connectrpc/connect";
import type { WebhookChange } from "../../store/directory.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, caller, reader, workflowForReading, workflowOf, type AdminImpl } from "./common.js";
import { webhookToProto } from "./convert.js";

/** The admin log's action for each change. */
const ACTION: Record<WebhookChange, string> = { enable: "webhook.enabled", disable: "webhook.disabled", regenerate: "webhook.regenerated" };

/** Enables, disables or regenerates the workflow's webhook: one conditional update, logged. */
async function changeWebhook(deps: Deps, workflowId: string, ctx: HandlerContext, change: WebhookChange) {
  const dir = deps.store.directory;
  const p = await caller(dir, ctx);
  const { workflow, project, environment } = await workflowOf(dir, p, workflowId);
  const after = await dir.workflows.changeWebhook(project.organizationId, workflow._id, change);
  if (!after) throw fail.notFound(`workflow "${workflow._id}" not found`);
  const generation = after.webhook.generation;
  const details = change === "regenerate" ? { generation } : { generation, wasEnabled: workflow.webhook.enabled };
  await adminLog(deps, p.user, ACTION[change], `workflow/${workflow._id}`, details, { projectId: project._id, environment });
  return { webhook: webhookToProto(deps.config, after) };
}

export function webhookMethods(deps: Deps): Pick<AdminImpl, "enableWebhook" | "disableWebhook" | "regenerateWebhook" | "setWebhookRateLimit" | "getWebhook"> {
  const dir = deps.store.directory;
  return {
    // The URL, a credential, only for those who may copy it (workflowAccess).
    async getWebhook(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const { workflow, access } = await workflowForReading(deps, view, p, req.workflowId);
      return { webhook: webhookToProto(deps.config, workflow, access === "change") };
    },

    enableWebhook: (req, ctx) => changeWebhook(deps, req.workflowId, ctx, "enable"),
    disableWebhook: (req, ctx) => changeWebhook(deps, req.workflowId, ctx, "disable"),
    regenerateWebhook: (req, ctx) => changeWebhook(deps, req.workflowId, ctx, "regenerate"),

    async setWebhookRateLimit(req, ctx) {
      const p = await caller(dir, ctx);
      const { workflow, project, environment } = await workflowOf(dir, p, req.workflowId);
      const limit = req.rateLimitPerMinute;
      if (limit < 1 || limit > 100_000) throw fail.invalid("rate_limit_per_minute: must be 1 to 100000");
      const before = await dir.workflows.setWebhookRateLimit(project.organizationId, workflow._id, limit);
      if (!before) throw fail.notFound(`workflow "${req.workflowId}" not found`);
      await adminLog(
        deps,
        p.user,
        "webhook.rate_limit.changed",
        `workflow/${workflow._id}`,
        { from: before.webhook.rateLimitPerMinute, to: limit },
        { projectId: project._id, environment },
      );
      return { webhook: webhookToProto(deps.config, { ...before, webhook: { ...before.webhook, rateLimitPerMinute: limit } }) };
    },
  };
}
