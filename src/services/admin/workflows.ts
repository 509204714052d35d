// AdminService: workflows and their versions (a publish adds one; runs use the active ones).
import { randomUUID } from "node:crypto";
import type { Role } from "../../domain/auth/roles.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { sleep } from "../../lib/sleep.js";
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
import { WorkflowSchema, WorkflowVersionSchema } from "../../../gen/runhook/v1/admin_pb.js";
import { MAX_KEPT_VERSIONS, MAX_WORKFLOW_BYTES, stepsBytes, stepsFromProto, versionToProto, workflowToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";

/** Each version's steps, by version number (none for steps that are not there). */
async function stepsOf(deps: Deps, w: T.WorkflowDoc): Promise<Map<number, T.StepDoc[]>> {
  const steps = await Promise.all(w.versions.map(async (v) => [v.version, (await deps.store.immutable.workflowSteps(w._id, v)) ?? []] as const));
  return new Map(steps);
}

/** What the workflow's versions' steps weigh in all (stepsBytes; versions stored before their size was kept are measured). */
async function historyBytes(deps: Deps, workflow: T.WorkflowDoc): Promise<number> {
  const unsized = workflow.versions.some((v) => v.bytes === undefined) ? await stepsOf(deps, workflow) : new Map<number, T.StepDoc[]>();
  return workflow.versions.reduce((total, v) => total + (v.bytes ?? stepsBytes(unsized.get(v.version) ?? [])), 0);
}

/** Refuses a publish that would pass the workflow's limits (MAX_KEPT_VERSIONS, MAX_WORKFLOW_BYTES). */
async function assertRoomFor(deps: Deps, workflow: T.WorkflowDoc, bytes: number): Promise<void> {
  const n = workflow.versions.length;
  if (n >= MAX_KEPT_VERSIONS)
    throw fail.precondition(`a workflow keeps at most ${MAX_KEPT_VERSIONS} versions and this one has them all: create a new workflow for what follows`);
  const held = await historyBytes(deps, workflow);
  if (held + bytes > MAX_WORKFLOW_BYTES) {
    const kib = (b: number) => `${Math.ceil(b / 1024)} KiB`;
    throw fail.precondition(
      `a workflow's versions hold at most ${kib(MAX_WORKFLOW_BYTES)} of steps in all (as JSON): its ${n} versions hold ${kib(held)} and these steps ${kib(bytes)}; create a new workflow for what follows`,
    );
  }
}

/** How many times a publish tries for its version number against concurrent ones. */
const MAX_PUBLISH_ROUNDS = 32;

/**
 * Appends a version numbered after the last, its steps stored first (putSteps); returns the
 * workflow after it and the version, or null when the workflow is gone.
 */
async function pushVersion(deps: Deps, organizationId: string, workflow: T.WorkflowDoc, steps: { steps: T.StepDoc[]; bytes: number }, triggerRoles?: Role[]) {
  const dir = deps.store.directory;
  let current = workflow;
  let stepsId: string | undefined;
  for (let attempt = 0; ; attempt++) {
    // The limits hold for the versions the push is conditional on: those never change, only their number.
    await assertRoomFor(deps, current, steps.bytes);
    stepsId ??= await dir.workflows.putSteps(workflow._id, steps.steps, steps.bytes);
    const n = current.versions.length;
    const version: T.WorkflowVersionDoc = { version: n + 1, active: true, publishedAt: new Date(), stepsId, bytes: steps.bytes };
    // Conditional on the version count: two concurrent publishes cannot take one number.
    const after = await dir.workflows.pushVersion(organizationId, workflow._id, n, version, triggerRoles);
    if (after) return { after, version };
    const again = await dir.workflows.get(workflow._id);
    if (!again) return null;
    // Each lost round is another publish's win, so all of a burst get through; only a workflow
    // published without pause past this many rounds is refused.
    if (attempt + 1 >= MAX_PUBLISH_ROUNDS) throw fail.precondition("the workflow is being published concurrently; retry");
    await sleep(Math.random() * Math.min(attempt + 1, 10) * 2); // spread the losers' next tries
    current = again;
  }
}

/** The workflow as an answer to those who change it: every version with its steps (at most MAX_WORKFLOW_BYTES of them), the webhook's URL. */
async function workflowWithSteps(deps: Deps, w: T.WorkflowDoc) {
  return workflowToProto(deps.config, w, true, await stepsOf(deps, w));
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
      // Without their versions' steps: ListWorkflowVersions has them.
      const docs = await dir.workflows.ofRendering(rendering._id, page.after, page.read);
      const { items, nextPageToken } = await page.cut(docs, byId, WorkflowSchema, (w) => workflowToProto(config, w, access === "change"));
      return { workflows: items, nextPageToken };
    },

    async listWorkflowVersions(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const { workflow } = await workflowForReading(deps, view, p, req.workflowId);
      const page = pageOf(deps, p, { list: "workflowVersions", workflowId: workflow._id }, req);
      const after = page.after === undefined ? 0 : Number(page.after);
      const versions = [...workflow.versions].sort((a, b) => a.version - b.version).filter((v) => v.version > after);
      // Each version's steps read as the page takes it: no more than the page holds.
      const { items, nextPageToken } = await page.cut(
        versions.slice(0, page.read),
        (v) => String(v.version),
        WorkflowVersionSchema,
        async (v) => versionToProto(v, (await deps.store.immutable.workflowSteps(workflow._id, v)) ?? []),
      );
      return { workflowVersions: items, nextPageToken };
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
      // Every check before the steps are stored: a refused call leaves nothing behind.
      const triggerRoles = validRoles(req.triggerRoles, "trigger_roles");
      const now = new Date();
      const id = randomUUID();
      const stepsId = await dir.workflows.putSteps(id, steps.steps, steps.bytes);
      const workflow: T.WorkflowDoc = {
        _id: id,
        projectId: project._id,
        environmentId: rendering.environmentId,
        renderingId: rendering._id,
        collectionId: collection._id,
        name,
        triggerRoles,
        versions: [{ version: 1, active: true, publishedAt: now, stepsId, bytes: steps.bytes }],
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
      await adminLog(deps, p.user, "workflow.published", `workflow/${workflow._id}`, { version: 1, steps: steps.steps.map((s) => s.type) }, scope);
      return { workflow: await workflowWithSteps(deps, workflow) };
    },

    async publishWorkflow(req, ctx) {
      const p = await caller(dir, ctx);
      const { workflow, project, environment } = await workflowOf(dir, p, req.workflowId);
      const collection = await dir.collections.get(workflow.collectionId);
      const steps = stepsFromProto(req.steps, collection?.primaryKey ?? []);
      const triggerRoles = req.updateTriggerRoles ? validRoles(req.triggerRoles, "trigger_roles") : undefined;
      const pushed = await pushVersion(deps, project.organizationId, workflow, steps, triggerRoles);
      if (!pushed) throw fail.notFound(`workflow "${req.workflowId}" not found`);
      const details = { version: pushed.version.version, steps: steps.steps.map((s) => s.type), ...(triggerRoles ? { triggerRoles } : {}) };
      await adminLog(deps, p.user, "workflow.published", `workflow/${workflow._id}`, details, { projectId: project._id, environment });
      return { workflow: await workflowWithSteps(deps, pushed.after) };
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
      return { workflow: await workflowWithSteps(deps, after) };
    },

    async getWorkflow(req, ctx) {
      const p = await caller(dir, ctx);
      const { workflow } = await workflowOf(dir, p, req.workflowId);
      return { workflow: await workflowWithSteps(deps, workflow) };
    },
  };
}
