// Starting a run once its caller is known: the checks after the webhook's URL and token (the
// permission, the rate limits, the record id, one ongoing run per record), then the run, queued,
// and its activity entry. The webhook (domain/trigger.ts), StartRun, RetryRun and retry batches
// all start runs here.
import type { AppPrincipal } from "../auth/tokens.js";
import { assertMayTrigger } from "../auth/access.js";
import { fail, type DomainError } from "../errors.js";
import { isUuid } from "../ids.js";
import { checkIdempotencyKey, startOnce, type Outcome } from "../idempotency.js";
import { isFinished, newRunDoc, RUN_QUEUED, type Resumed } from "./model.js";
import { checkedRecordId } from "./records.js";
import { putEntries, releaseEntries, runEntry } from "./activity.js";
import type { TriggerDeps } from "../trigger.js";
import type { DirectoryView } from "../../store/directory-cache.js";
import type { CreateOutcome } from "../../store/runs.js";
import { isDatabaseFull } from "../../store/index.js";
import type {
  CollectionDoc,
  EnvironmentDoc,
  ProjectDoc,
  RenderingDoc,
  RunDoc,
  RunVia,
  WorkflowDoc,
  WorkflowVersionDoc,
  WorkflowVersionWithSteps,
} from "../../store/types.js";

/** What a run is started on: the workflow, the version it runs, and what the workflow names. */
export interface Target {
  workflow: WorkflowDoc;
  version: WorkflowVersionWithSteps;
  rendering: RenderingDoc;
  project: ProjectDoc;
  environment: EnvironmentDoc;
  collection: CollectionDoc;
}

/** A call that passed every check: its target, its caller and its record. */
export interface Accepted extends Target {
  principal: AppPrincipal;
  recordId: string;
}

/** The latest active version, or undefined. */
export function latestActive<V extends WorkflowVersionDoc>(versions: V[]): V | undefined {
  let best: V | undefined;
  for (const v of versions) if (v.active && (!best || v.version > best.version)) best = v;
  return best;
}

type Related = [RenderingDoc | null, ProjectDoc | null, EnvironmentDoc | null, CollectionDoc | null, WorkflowVersionWithSteps | null];

/**
 * The workflow, and what it names with the steps of the version `pick` chooses, read together:
 * `related` starts at once and is awaited by the caller after its own checks of the workflow.
 */
export function readWorkflow(
  deps: Pick<TriggerDeps, "store">,
  directory: DirectoryView,
  workflowId: string,
  pick: (wf: WorkflowDoc) => WorkflowVersionDoc | undefined = (wf) => latestActive(wf.versions),
): { workflow: Promise<WorkflowDoc | null>; related: Promise<Related | null> } {
  const { store } = deps;
  const workflow = directory.workflows.get(workflowId);
  const related = workflow.then(async (wf): Promise<Related | null> => {
    if (!wf) return null;
    const version = pick(wf);
    const stepsOf = async (v: WorkflowVersionDoc) => {
      const steps = await store.immutable.workflowSteps(wf._id, v);
      // Stored before the version that names them: missing only if removed by hand.
      if (!steps) throw new Error(`the steps of version ${v.version} of workflow ${wf._id} are missing`);
      return { ...v, steps };
    };
    return Promise.all([
      store.immutable.rendering(wf.renderingId),
      directory.projects.get(wf.projectId),
      store.immutable.environment(wf.environmentId),
      store.immutable.collection(wf.collectionId),
      version ? stepsOf(version) : null,
    ]);
  });
  related.catch(() => {}); // awaited by the caller unless one of its checks throws first
  return { workflow, related };
}

/** The target, once `related` is read; NOT_FOUND (`unknown`) when something it names is gone. */
export function targetOf(
  workflow: WorkflowDoc,
  related: Related | null,
  unknown: string,
): Omit<Target, "version"> & { version: WorkflowVersionWithSteps | null } {
  const [rendering, project, environment, collection, version] = related ?? [];
  if (!rendering || !project || !environment || !collection) throw fail.notFound(unknown);
  return { workflow, rendering, project, environment, collection, version: version ?? null };
}

/** When a call refused for the project's ongoing-run quota may try again (seconds). */
const ONGOING_QUOTA_RETRY_S = 5;

/**
 * Checks 4 and 5: the caller may trigger the workflow; the workflow's rate limit (unless
 * `paced`: a batch paces itself) and the project's quota of ongoing runs.
 */
export async function admit(deps: TriggerDeps, directory: DirectoryView, principal: AppPrincipal, t: Target, paced = false): Promise<void> {
  const { store } = deps;
  await assertMayTrigger(directory, principal.user, principal.token, t.project, t.rendering, t.workflow);
  if (!paced) {
    const rate = await store.rateLimits.hit(`webhook:${t.workflow._id}`, t.workflow.webhook.rateLimitPerMinute);
    if (!rate.allowed) {
      deps.metrics.rateLimitRefusals.inc({ bucket: "webhook" });
      throw fail.throttled(rate.retryAfter, `rate limit of ${rate.limit} runs per minute exceeded for this workflow`);
    }
  }
  // So that no tenant can queue without bound.
  const quota = deps.config.projectOngoingRunsLimit;
  if (await store.runs.ongoingAtLeast(t.project._id, quota)) {
    deps.metrics.rateLimitRefusals.inc({ bucket: "project_ongoing_runs" });
    throw fail.throttled(ONGOING_QUOTA_RETRY_S, `the project has ${quota} ongoing runs, its limit: retry once some have finished`);
  }
}

/** How a run comes to be, beyond its target: the entry point, the request, a retry's origin, a batch. */
export interface Origin {
  via: RunVia;
  requestId?: string;
  retryOf?: RunDoc;
  resumed?: Resumed;
  batchId?: string;
}

/**
 * Checks 7 and 8, and the run: stored once per idempotency key when there is one (a keyed call
 * is checked first like any call, so a refused one reserves nothing and leaves its key free).
 */
export async function startAccepted(
  deps: TriggerDeps,
  a: Accepted,
  origin: Origin,
  key?: { key: string; also?: Record<string, string | boolean> },
): Promise<Outcome> {
  if (key === undefined) return { runId: await queueRun(deps, a, origin), replayed: false };
  const call = { workflowId: a.workflow._id, userId: a.principal.user._id, key: key.key, recordId: a.recordId, ...(key.also ? { also: key.also } : {}) };
  return startOnce(deps, call, async (runId) => void (await queueRun(deps, a, origin, runId)));
}

/**
 * One ongoing run per (workflow, record), by the unique index on activeKey. Stores the run as
 * `runId` when given (the one an idempotency key reserved), and returns its id. The triggered
 * entry takes its place in the activity log before the run is stored (so that no executor can
 * log the run's outcome ahead of it) and is stored in the run's own insert: the run and its
 * entry are one fact (activity.ts).
 */
async function queueRun(deps: TriggerDeps, a: Accepted, origin: Origin, runId?: string): Promise<string> {
  const { store } = deps;
  const { workflow, version, rendering, project, environment, collection, principal, recordId } = a;
  const run = newRunDoc({
    id: runId,
    workflowId: workflow._id,
    workflowVersion: version.version,
    steps: version.steps,
    renderingId: rendering._id,
    organizationId: project.organizationId,
    projectId: project._id,
    environmentId: environment._id,
    collectionId: collection._id,
    collection: collection.name,
    recordId,
    userId: principal.user._id,
    userEmail: principal.user.email,
    tokenId: principal.token._id,
    via: origin.via,
    requestId: origin.requestId,
    retryOf: origin.retryOf?._id,
    resumed: origin.resumed,
    batchId: origin.batchId,
  });
  const triggered = await runEntry(
    store,
    run,
    "workflow.run.triggered",
    {
      workflowId: workflow._id,
      workflowVersion: version.version,
      workflowName: workflow.name,
      tokenId: principal.token._id,
      ...(origin.retryOf ? { retryOf: origin.retryOf._id } : {}),
      ...(origin.resumed ? { fromStep: origin.resumed.stepIndex + 1 } : {}),
      ...(origin.batchId ? { batchId: origin.batchId } : {}),
    },
    origin.via,
  );
  run.pendingLog = [triggered];
  let created: CreateOutcome;
  try {
    created = await store.runs.create(run);
  } catch (err) {
    releaseEntries(store, [triggered], deps.logger);
    throw err;
  }
  if (!created.created) {
    // No entry for a refused call: its position is resolved at once, so readers never wait for it.
    releaseEntries(store, [triggered], deps.logger);
    if (created.ongoingRunId) throw fail.exists("a run of this workflow is already ongoing on this record", created.ongoingRunId);
    throw fail.aborted("the record's run changed state concurrently; retry");
  }
  // The run is stored with its entry: a failure to put it in the log now leaves it to a reader or the sweep.
  // (A full database is logged once a minute by the store, not per call.)
  await putEntries(store, run._id, [triggered]).catch(
    (err: unknown) =>
      isDatabaseFull(err) ||
      deps.logger.warn({ err, runId: run._id }, "the workflow.run.triggered entry stays pending in its run: a reader or the sweep puts it in the log"),
  );
  deps.metrics.runsCreated.inc();
  deps.events.emit(RUN_QUEUED, run._id);
  return run._id;
}

/** A start of a run by a known caller (StartRun, RetryRun, a batch's retry). */
export interface StartRequest {
  /** The caller (an application token): the run acts as its user, and the activity log names it. */
  principal: AppPrincipal;
  workflowId: string;
  /** Checked at the webhook's place for the body (after the rate limits). */
  recordId: unknown;
  via: RunVia;
  requestId?: string;
  /** The caller's idempotency key (checked), or a batch's own. */
  idempotencyKey?: string;
  /** A retry of a finished run (the caller sees it); `fromFailedStep` reruns its version from its failed step. */
  retry?: { of: RunDoc; fromFailedStep: boolean };
  batchId?: string;
  /** A batch paces itself by its own ongoing runs: the workflow's per-minute rate limit does not apply. */
  paced?: boolean;
  /** Where the caller expects the workflow (a /v1 path): elsewhere, it is not found. */
  place?: { projectName: string; environmentName: string };
}

/**
 * Why `run` may not be retried as asked (FAILED_PRECONDITION, in words that start alike for
 * every run: what differs is in brackets), before its workflow is read; undefined when it may.
 */
export function retryRefusal(run: RunDoc, fromFailedStep: boolean): DomainError | undefined {
  if (!isFinished(run.state)) return fail.precondition(`the run is not finished (it is ${run.state}): cancel it, or wait for it to finish`);
  if (!fromFailedStep) return undefined;
  if (run.state !== "FAILED") return fail.precondition(`the run did not fail (it is ${run.state}): only a failed run is retried from its failed step`);
  if (failedStepOf(run) < 0) return fail.precondition(`the run failed before any step (${run.error}): retry it from the start`);
  return undefined;
}

/** The step a failed run failed at, or -1. */
const failedStepOf = (run: RunDoc) => run.steps.findIndex((s) => s.state === "FAILED");

/** Why a retry of `run` from its failed step may not run its version of `workflow` (no longer active); undefined when it may. */
export function versionRefusal(run: RunDoc, workflow: WorkflowDoc): DomainError | undefined {
  if (sameActiveVersion(run)(workflow)) return undefined;
  return fail.precondition(
    `the run's workflow version is no longer active (version ${run.workflowVersion}): retry without from_failed_step to run the latest active version`,
  );
}

/** The version a retry from the failed step runs: the failed run's own, while it is active. */
function sameActiveVersion(run: RunDoc): (wf: WorkflowDoc) => WorkflowVersionDoc | undefined {
  return (wf) => wf.versions.find((v) => v.version === run.workflowVersion && v.active);
}

/** The steps a retry from `failed` skips, each naming the run in which it ran. */
function resumedFrom(run: RunDoc, failed: number): Resumed {
  return { stepIndex: failed, doneInRunIds: run.steps.slice(0, failed).map((s) => s.doneInRunId ?? run._id) };
}

/**
 * Starts a run as `req.principal`: the webhook's checks in the webhook's order, its URL's aside.
 * A workflow of another organization is as unknown as a missing one.
 */
export async function startAs(deps: TriggerDeps, req: StartRequest): Promise<Outcome> {
  const directory = deps.store.directory.view();
  const { retry } = req;
  const refused = retry && retryRefusal(retry.of, retry.fromFailedStep);
  if (refused) throw refused;
  const failed = retry?.fromFailedStep ? failedStepOf(retry.of) : undefined;
  if (!isUuid(req.workflowId)) throw fail.invalid("workflow_id must be a UUID");
  const read = readWorkflow(deps, directory, req.workflowId.toLowerCase(), failed === undefined ? undefined : sameActiveVersion(retry!.of));
  const workflow = await read.workflow;
  const project = workflow && (await directory.projects.get(workflow.projectId));
  if (!workflow || project?.organizationId !== req.principal.user.organizationId) throw fail.notFound("workflow not found");
  const t = targetOf(workflow, await read.related, "workflow not found");
  if (req.place && (t.project.name !== req.place.projectName || t.environment.name !== req.place.environmentName))
    throw fail.notFound("workflow not found in this project and environment");
  if (!t.version) throw (failed === undefined ? undefined : versionRefusal(retry!.of, workflow)) ?? fail.notFound("the workflow has no active version");
  const target = { ...t, version: t.version };
  await admit(deps, directory, req.principal, target, req.paced);
  const recordId = checkedRecordId(req.recordId, "record_id");
  if (req.idempotencyKey !== undefined && !req.batchId) checkIdempotencyKey(req.idempotencyKey);
  const origin: Origin = {
    via: req.via,
    requestId: req.requestId,
    retryOf: retry?.of,
    resumed: failed === undefined ? undefined : resumedFrom(retry!.of, failed),
    batchId: req.batchId,
  };
  const also = retry ? { retryOf: retry.of._id, fromFailedStep: retry.fromFailedStep } : undefined;
  const key = req.idempotencyKey === undefined ? undefined : { key: req.idempotencyKey, also };
  return startAccepted(deps, { ...target, principal: req.principal, recordId }, origin, key);
}
