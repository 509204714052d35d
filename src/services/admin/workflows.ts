// AdminService: workflows and their versions (a publish adds one; runs use the active ones).
import { randomUUID } from "node:crypto";
import type { Role } from "../../domain/auth/roles.js";
import type { DirectoryStore } from "../../store/directory.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import {
  adminLog,
  caller,
  reader,
  renderingForWorkflows,
  renderingWithCollection,
  validRoles,
  workflowForReading,
  workflowOf,
  type AdminImpl,
} from "./common.js";
import { MAX_KEPT_VERSIONS, stepsFromProto, versionToProto, workflowToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";

/** Appends a version numbered after the last; returns the workflow after it, or null when it is gone. */
async function pushVersion(dir: DirectoryStore, organizationId: string, workflow: T.WorkflowDoc, steps: T.StepDoc[], triggerRoles: Role[] | undefined) {
  let current = workflow;
  for (let attempt = 0; ; attempt++) {
    const n = current.versions.length;
    if (n >= MAX_KEPT_VERSIONS)
      throw fail.precondition(`a workflow keeps at most ${MAX_KEPT_VERSIONS} versions and this one has them all: create a new workflow for what follows`);
    const version: T.WorkflowVersionDoc = { version: n + 1, active: true, steps, publishedAt: new Date() };
    // Conditional on the version count: two concurrent publishes cannot take one number.
    const after = await dir.workflows.pushVersion(organizationId, workflow._id, n, version, triggerRoles);
    if (after) return { after, version };
    const again = await dir.workflows.get(workflow._id);
    if (!again) return null;
    if (attempt > 5) throw fail.precondition("the workflow is being published concurrently; retry");
    current = again;
  }
}

export function workflowMethods(
  deps: Deps,
): Pick<AdminImpl, "createWorkflow" | "publishWorkflow" | "deactivateWorkflowVersion" | "getWorkflow"> & ReturnType<typeof workflowReads> {
  return { ...workflowChanges(deps), ...workflowReads(deps) };
}

/**
 * A rendering's workflows and a workflow's versions: for those who change them, and without the
 * webhook URL for the users who may act in the rendering (workflowAccess).
 */
function workflowReads(deps: Deps): Pick<AdminImpl, "listWorkflows" | "listWorkflowVersions"> {
  const { config } = deps;
  const dir = deps.store.directory;
  return {
    async listWorkflows(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const { rendering, access } = await renderingForWorkflows(deps, view, p, req.renderingId);
      const page = pageOf(deps, p, { list: "workflows", renderingId: rendering._id }, req);
      const { items, nextPageToken } = page.cut(await dir.workflows.ofRendering(rendering._id, page.after, page.read), byId);
      return { workflows: items.map((w) => workflowToProto(config, w, access === "change")), nextPageToken };
    },

    async listWorkflowVersions(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const { workflow } = await workflowForReading(deps, view, p, req.workflowId);
      const page = pageOf(deps, p, { list: "workflowVersions", workflowId: workflow._id }, req);
      const after = page.after === undefined ? 0 : Number(page.after);
      const versions = [...workflow.versions].sort((a, b) => a.version - b.version).filter((v) => v.version > after);
      const { items, nextPageToken } = page.cut(versions.slice(0, page.read), (v) => String(v.version));
      return { workflowVersions: items.map(versionToProto), nextPageToken };
    },
  };
}

function workflowChanges(deps: Deps): Pick<AdminImpl, "createWorkflow" | "publishWorkflow" | "deactivateWorkflowVersion" | "getWorkflow"> {
  const { config } = deps;
  const dir = deps.store.directory;
  return {
    async createWorkflow(req, ctx) {
      const p = await caller(dir, ctx);
      const { rendering, project, collection } = await renderingWithCollection(dir, p, req, "editor");
      const name = req.name.trim();
      if (!name || name.length > 200) throw fail.invalid("name: 1 to 200 characters");
      const steps = stepsFromProto(req.steps, collection.primaryKey);
      const now = new Date();
      const workflow: T.WorkflowDoc = {
        _id: randomUUID(),
        projectId: project._id,
        environmentId: rendering.environmentId,
        renderingId: rendering._id,
        collectionId: collection._id,
        name,
        triggerRoles: validRoles(req.triggerRoles, "trigger_roles"),
        versions: [{ version: 1, active: true, steps, publishedAt: now }],
        webhook: { enabled: false, generation: 1, rateLimitPerMinute: config.webhookRateLimitPerMinute, everEnabled: false },
        createdAt: now,
      };
      await dir.workflows.insert(workflow);
      const environment = await dir.environments.get(rendering.environmentId);
      const scope = { projectId: project._id, environment: environment?.name ?? null };
      await adminLog(
        deps,
        p.user,
        "workflow.created",
        `workflow/${workflow._id}`,
        { name, renderingId: rendering._id, collection: collection.name, triggerRoles: workflow.triggerRoles },
        scope,
      );
      await adminLog(deps, p.user, "workflow.published", `workflow/${workflow._id}`, { version: 1, steps: steps.map((s) => s.type) }, scope);
      return { workflow: workflowToProto(config, workflow) };
    },

    async publishWorkflow(req, ctx) {
      const p = await caller(dir, ctx);
      const { workflow, project, environment } = await workflowOf(dir, p, req.workflowId);
      const collection = await dir.collections.get(workflow.collectionId);
      const steps = stepsFromProto(req.steps, collection?.primaryKey ?? []);
      const triggerRoles = req.updateTriggerRoles ? validRoles(req.triggerRoles, "trigger_roles") : undefined;
      const pushed = await pushVersion(dir, project.organizationId, workflow, steps, triggerRoles);
      if (!pushed) throw fail.notFound(`workflow "${req.workflowId}" not found`);
      const details = { version: pushed.version.version, steps: steps.map((s) => s.type), ...(triggerRoles ? { triggerRoles } : {}) };
      await adminLog(deps, p.user, "workflow.published", `workflow/${workflow._id}`, details, { projectId: project._id, environment });
      return { workflow: workflowToProto(config, pushed.after) };
    },

    async deactivateWorkflowVersion(req, ctx) {
      const p = await caller(dir, ctx);
      const { workflow, project, environment } = await workflowOf(dir, p, req.workflowId);
      const idx = workflow.versions.findIndex((v) => v.version === req.version);
      if (idx < 0) throw fail.notFound(`workflow "${req.workflowId}" has no version ${req.version}`);
      const after = await dir.workflows.deactivateVersion(project.organizationId, workflow._id, idx, req.version);
      if (!after) throw fail.notFound(`workflow "${req.workflowId}" not found`);
      if (workflow.versions[idx]!.active)
        await adminLog(deps, p.user, "workflow.deactivated", `workflow/${workflow._id}`, { version: req.version }, { projectId: project._id, environment });
      return { workflow: workflowToProto(config, after) };
    },

    async getWorkflow(req, ctx) {
      const p = await caller(dir, ctx);
      const { workflow } = await workflowOf(dir, p, req.workflowId);
      return { workflow: workflowToProto(config, workflow) };
    },
  };
}
