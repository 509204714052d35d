// Starting a run on one record: the check order of a trigger call (webhook or TriggerRun),
// then the run, queued, and its activity entry.
import type { EventEmitter } from "node:events";
import type { Logger } from "pino";
import { assertMayTrigger } from "./auth/access.js";
import { authenticateApp, type AppPrincipal } from "./auth/tokens.js";
import type { Config } from "../config.js";
import { fail } from "./errors.js";
import type { Metrics } from "../lib/metrics.js";
import { newRunDoc, RUN_QUEUED } from "./runs/model.js";
import { checkedRecordId } from "./runs/records.js";
import type { Store } from "../store/index.js";
import type { CreateOutcome } from "../store/runs.js";
import type { CollectionDoc, EnvironmentDoc, ProjectDoc, RenderingDoc, WorkflowDoc, WorkflowVersionDoc, WorkflowVersionWithSteps } from "../store/types.js";
import { verifyWebhookKey } from "./webhook-keys.js";
import { checkIdempotencyKey, startOnce, type Outcome } from "./idempotency.js";

/** What a trigger call uses: the store, the webhook keys' secret, and where it reports what happened. */
export interface TriggerDeps {
  store: Store;
  config: Pick<Config, "signingKeys" | "idempotencyTtlMs" | "projectOngoingRunsLimit">;
  logger: Pick<Logger, "warn" | "error">;
  metrics: Pick<Metrics, "rateLimitRefusals" | "runsCreated">;
  /** Told RUN_QUEUED (runId) for each run stored: this instance's executors wake at once. */
  events: Pick<EventEmitter, "emit">;
}

/** The request body as the route parsed it: the record id, or why the body is unusable. */
export type TriggerBody = { recordId: unknown } | { bodyError: string };

export interface TriggerInput {
  key: string;
  authorization: string | null | undefined;
  body: TriggerBody;
  via: "webhook" | "grpc";
  /** The call's request id, stored on the run (logs of its executor carry it). */
  requestId?: string;
  /** The caller's idempotency key (Idempotency-Key header, TriggerRunRequest.idempotency_key); none: every call is a new one. */
  idempotencyKey?: string;
}

/** Parses a raw webhook body: a JSON object with a non-empty string `record_id` (other fields ignored). */
export function parseWebhookBody(raw: string | undefined): TriggerBody {
  if (raw === undefined || raw.trim() === "") return { bodyError: "the body must be a JSON object with record_id" };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { bodyError: "the body is not valid JSON" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { bodyError: "the body must be a JSON object" };
  if (!Object.hasOwn(value, "record_id")) return { bodyError: "record_id is required" };
  return { recordId: (value as Record<string, unknown>).record_id };
}

/** The latest active version, or undefined. */
export function latestActive<V extends WorkflowVersionDoc>(versions: V[]): V | undefined {
  let best: V | undefined;
  for (const v of versions) if (v.active && (!best || v.version > best.version)) best = v;
  return best;
}

/** Everything the checks established about one accepted call. */
interface Accepted {
  workflow: WorkflowDoc;
  version: WorkflowVersionWithSteps;
  rendering: RenderingDoc;
  project: ProjectDoc;
  environment: EnvironmentDoc;
  collection: CollectionDoc;
  principal: AppPrincipal;
  recordId: string;
}

/**
 * Creates and queues a run, returning its id; throws DomainErrors for every refusal. The
 * checks run in the contract's order and the first that fails answers; independent reads are
 * started early, but a failure is only ever reported at its place in that order.
 */
export async function triggerRun(deps: TriggerDeps, input: TriggerInput): Promise<Outcome> {
  const accepted = await checkTrigger(deps, input);
  const key = input.idempotencyKey;
  if (key === undefined) return { runId: await queueRun(deps, input, accepted), replayed: false };
  // A keyed call: after every check, so that a repeat is authenticated, authorized and counted
  // by the rate limit like any call, and a refused call (which reserves nothing) leaves its key free.
  const call = { workflowId: accepted.workflow._id, userId: accepted.principal.user._id, key, recordId: accepted.recordId };
  return startOnce(deps, call, async (runId) => void (await queueRun(deps, input, accepted, runId)));
}

/** When a call refused for the project's ongoing-run quota may try again (seconds). */
const ONGOING_QUOTA_RETRY_S = 5;

/** Checks 1 to 6: the key, the token, the webhook, the permission, the rate limits, the body (and its idempotency key). */
async function checkTrigger(deps: TriggerDeps, input: TriggerInput): Promise<Accepted> {
  const { store } = deps;
  // One view for the whole check: one read of the organization's directory version, shared with the calls that arrive together.
  const directory = store.directory.view();
  // 1. The key: well-formed and signed.
  const key = verifyWebhookKey(deps.config, input.key);
  if (!key) throw fail.invalid("malformed or tampered webhook URL");

  // 2. The token. Before anything of the workflow is read: a call with a made-up token reads (and
  // caches) nothing of the tenant's, however large its workflows.
  const principal = await authenticateApp(directory, input.authorization);

  // The workflow and what it names (its latest active version's steps among them: only those), read together.
  const workflowRead = directory.workflows.get(key.workflowId);
  const relatedRead = workflowRead.then((wf) => {
    if (!wf) return null;
    const active = latestActive(wf.versions);
    return Promise.all([
      store.immutable.rendering(wf.renderingId),
      directory.projects.get(wf.projectId),
      store.immutable.environment(wf.environmentId),
      store.immutable.collection(wf.collectionId),
      active ? store.immutable.workflowSteps(wf._id, active) : null,
    ]);
  });
  relatedRead.catch(() => {}); // awaited below unless an earlier check throws first

  // 3. The webhook: known, current generation, enabled, with an active version.
  const workflow = await workflowRead;
  if (!workflow || workflow.renderingId !== key.renderingId || !workflow.webhook.everEnabled) throw fail.notFound("unknown webhook");
  if (key.generation < workflow.webhook.generation) throw fail.invalid("this webhook URL was superseded by a regenerated one");
  if (key.generation > workflow.webhook.generation) throw fail.notFound("unknown webhook");
  if (!workflow.webhook.enabled) throw fail.notFound("the webhook trigger is disabled");
  const active = latestActive(workflow.versions);
  if (!active) throw fail.notFound("no active workflow version for the rendering");
  const [rendering, project, environment, collection, steps] = (await relatedRead) ?? [];
  if (!rendering || !project || !environment || !collection) throw fail.notFound("unknown webhook");
  // Stored before the version that names them: missing only if removed by hand.
  if (!steps) throw new Error(`the steps of version ${active.version} of workflow ${workflow._id} are missing`);
  const version = { ...active, steps };

  // 4. The token's user may trigger this workflow.
  await assertMayTrigger(directory, principal.user, principal.token, project, rendering, workflow);

  // 5. The webhook's rate limit…
  const rate = await store.rateLimits.hit(`webhook:${workflow._id}`, workflow.webhook.rateLimitPerMinute);
  if (!rate.allowed) {
    deps.metrics.rateLimitRefusals.inc({ bucket: "webhook" });
    throw fail.throttled(rate.retryAfter, `rate limit of ${rate.limit} requests per minute exceeded for this webhook`);
  }
  // …and the project's quota of ongoing runs, so that no tenant can queue without bound.
  const quota = deps.config.projectOngoingRunsLimit;
  if (await store.runs.ongoingAtLeast(project._id, quota)) {
    deps.metrics.rateLimitRefusals.inc({ bucket: "project_ongoing_runs" });
    throw fail.throttled(ONGOING_QUOTA_RETRY_S, `the project has ${quota} ongoing runs, its limit: retry once some have finished`);
  }

  // 6. The body, and the idempotency key beside it.
  const recordId = recordIdOfBody(input.body);
  if (input.idempotencyKey !== undefined) checkIdempotencyKey(input.idempotencyKey);
  return { workflow, version, rendering, project, environment, collection, principal, recordId };
}

/** The body's record id, or INVALID_ARGUMENT saying why it is unusable. */
function recordIdOfBody(body: TriggerBody): string {
  if ("bodyError" in body) throw fail.invalid(body.bodyError);
  return checkedRecordId(body.recordId, "record_id");
}

/**
 * Checks 7 and 8: one ongoing run per (workflow, record), by the unique index on activeKey.
 * Stores the run as `runId` when given (the one an idempotency key reserved), and returns its id.
 * The triggered entry takes its place in the activity log before the run is stored, so that
 * no executor can log the run's outcome ahead of it; it is written once the run is.
 */
async function queueRun(deps: TriggerDeps, input: TriggerInput, a: Accepted, runId?: string): Promise<string> {
  const { store } = deps;
  const { workflow, version, rendering, project, environment, collection, principal, recordId } = a;
  const position = await store.logs.reserve(environment._id);
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
    via: input.via,
    requestId: input.requestId,
  });
  let created: CreateOutcome;
  try {
    created = await store.runs.create(run);
  } catch (err) {
    void position.release().catch(() => {});
    throw err;
  }
  if (!created.created) {
    // No entry for a refused call: its position is resolved at once, so readers never wait for it.
    void position.release().catch((err: unknown) => deps.logger.warn({ err }, "could not release an activity log position"));
    if (created.ongoingRunId) throw fail.exists("a run of this workflow is already ongoing on this record", created.ongoingRunId);
    throw fail.aborted("the record's run changed state concurrently; retry");
  }
  // The run is stored: a failure to log it is reported, never turned into an error.
  await position
    .put({
      projectId: project._id,
      environment: environment.name,
      rendering: rendering._id,
      user: { id: principal.user._id, email: principal.user.email },
      action: "workflow.run.triggered",
      via: input.via,
      collection: collection.name,
      recordId,
      runId: run._id,
      workflowId: workflow._id,
      details: { workflowId: workflow._id, workflowVersion: version.version, workflowName: workflow.name, tokenId: principal.token._id },
    })
    .catch((err: unknown) => deps.logger.error({ err, runId: run._id }, "could not write the workflow.run.triggered activity entry"));
  deps.metrics.runsCreated.inc();
  deps.events.emit(RUN_QUEUED, run._id);
  return run._id;
}
