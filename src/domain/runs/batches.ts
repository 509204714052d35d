// Run batches: an action (retry or cancel) on every run a ListRuns filter matches, worked
// through in the background (worker/batches.ts). Here: what a batch selects, who it acts as,
// and what it does with one run — the same decision for a dry run, which only does nothing.
//
// Exactly once per run: what the batch did with a run is stored (a RunBatchItemDoc) before the
// batch's counters move past it, and a batch that resumes reuses it. A retry is started with an
// idempotency key of the batch and the run, and a retry this batch already started (found by
// its `retryOf`) counts as done: a crash between the start and the item starts nothing twice.
import { randomUUID } from "node:crypto";
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { RunSelection } from "../../store/run-search.js";
import type { RunBatchDoc, RunBatchItemDoc, RunDoc, RunVia, UserRefDoc } from "../../store/types.js";
import { assertMaySeeRun } from "../auth/run-scope.js";
import type { AppPrincipal } from "../auth/tokens.js";
import { DomainError, fail, isDomainError } from "../errors.js";
import { isUuid } from "../ids.js";
import type { Paging } from "../logs/cursor.js";
import type { TriggerDeps } from "../trigger.js";
import { cancelAs } from "./cancel.js";
import { activeKeyOf, isFinished } from "./model.js";
import { runSelection, type RunFilterInput } from "./search.js";
import { latestActive, retryRefusal, startAs, versionRefusal, type StartRequest } from "./start.js";
import type { RunStateMachine } from "./state.js";

export const BATCH_ACTIONS = ["retry", "cancel"] as const;
/** In-process signal (on deps.events): a batch was created here, and this process's batch worker claims it at once. */
export const BATCH_CREATED = "run-batch.created";
/** The most runs a batch of selected runs names (CreateRunBatchRequest.run_ids). */
export const MAX_BATCH_RUN_IDS = 1000;

/** The reasons a batch skips a run, in words (RunBatchReason.reason). */
export const SKIP = {
  ongoing: "a run is ongoing on the record",
  alreadyRetried: "the run was already retried",
  finished: (state: string) => `the run is already finished (${state})`,
} as const;

/** Retries of one run read to find this batch's own among them. */
const MAX_RETRIES_READ = 100;

/** What a batch does with one run, before it is stored. */
export type Decision = Pick<RunBatchItemDoc, "outcome" | "reason" | "detail" | "newRunId">;

const done = (newRunId: string | null = null): Decision => ({ outcome: "done", reason: "", detail: "", newRunId });
const skipped = (reason: string, detail = reason): Decision => ({ outcome: "skipped", reason, detail, newRunId: null });
const failed = (reason: string, detail = reason): Decision => ({ outcome: "failed", reason, detail, newRunId: null });

/** The project's ongoing-run quota is reached: the batch tries the same run again after `retryAfterSeconds`. */
export class BatchMustWait extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super("the batch waits for the project's ongoing runs");
  }
}

/** The batch cannot go on (its creator's token is no longer usable): it FAILS with this message. */
export class BatchCannotGoOn extends Error {}

const UUID_G = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** A refusal's message as a reason that many runs share: without the ids it names, nor the details in brackets after it. */
function sharedReason(message: string): string {
  return message.replace(UUID_G, "…").replace(/ \(.*$/, "");
}

/** The store's selection of a batch's runs: its filter through the run search's one parser, created before `createdTo`. */
export function batchSelection(
  batch: Pick<RunBatchDoc, "environmentId" | "filter" | "seenWorkflowIds" | "createdFrom" | "createdTo" | "runIds">,
): RunSelection {
  const f = batch.filter;
  const input: RunFilterInput = {
    ...f,
    workflowName: f.workflowName ?? "",
    namedWorkflowIds: f.namedWorkflowIds ?? undefined,
    seenWorkflowIds: batch.seenWorkflowIds ?? undefined,
    finishedFrom: f.finishedFrom ?? undefined,
    finishedTo: f.finishedTo ?? undefined,
  };
  const p: Paging = {
    limit: 1,
    order: "asc",
    fromMicros: undefined,
    toMicros: undefined,
    from: batch.createdFrom ?? undefined,
    to: batch.createdTo,
    cursor: "",
  };
  return { ...runSelection(batch.environmentId, input, p), ...(batch.runIds.length > 0 ? { runIds: batch.runIds } : {}) };
}

/** What a new batch is made of, its caller checked (services/run-batches.ts). */
export interface NewBatch {
  principal: AppPrincipal;
  organizationId: string;
  projectId: string;
  environmentId: string;
  action: string;
  filter: RunBatchDoc["filter"];
  seenWorkflowIds: string[] | undefined;
  runIds: string[];
  createdFrom: Date | undefined;
  createdTo: Date | undefined;
  fromFailedStep: boolean;
  dryRun: boolean;
  via: string;
}

function checkedRunIds(ids: string[]): string[] {
  if (ids.length > MAX_BATCH_RUN_IDS) throw fail.invalid(`run_ids must name at most ${MAX_BATCH_RUN_IDS} runs`);
  const out = new Set<string>();
  for (const id of ids) {
    if (!isUuid(id)) throw fail.invalid("run_ids must be UUIDs");
    out.add(id.toLowerCase());
  }
  return [...out].sort();
}

/** A new RUNNING batch, its every input checked (the filter by the run search's parser); claimable at once. */
export function newBatchDoc(n: NewBatch, now = new Date()): RunBatchDoc {
  if (!(BATCH_ACTIONS as readonly string[]).includes(n.action)) throw fail.invalid(`action must be one of ${BATCH_ACTIONS.join(", ")}, got "${n.action}"`);
  const action = n.action as RunBatchDoc["action"];
  if (n.fromFailedStep && action !== "retry") throw fail.invalid("from_failed_step is for a retry batch");
  if (n.createdFrom && n.createdTo && n.createdFrom.getTime() > n.createdTo.getTime()) throw fail.invalid("created_from must not be after created_to");
  const createdTo = n.createdTo && n.createdTo.getTime() < now.getTime() ? n.createdTo : now;
  const doc: RunBatchDoc = {
    _id: randomUUID(),
    organizationId: n.organizationId,
    projectId: n.projectId,
    environmentId: n.environmentId,
    action,
    filter: n.filter,
    seenWorkflowIds: n.seenWorkflowIds ?? null,
    runIds: checkedRunIds(n.runIds),
    createdFrom: n.createdFrom ?? null,
    createdTo,
    fromFailedStep: n.fromFailedStep,
    dryRun: n.dryRun,
    state: "RUNNING",
    createdBy: { id: n.principal.user._id, email: n.principal.user.email },
    tokenId: n.principal.token._id,
    via: n.via,
    matched: 0,
    done: 0,
    skipped: 0,
    failed: 0,
    reasons: {},
    error: "",
    cursor: null,
    lease: { owner: "", expiresAt: new Date(0) },
    createdAt: now,
    updatedAt: now,
    finishedAt: null,
  };
  batchSelection(doc); // the filter's own checks (INVALID_ARGUMENT), before anything is stored
  return doc;
}

/** Who a batch acts as: its creator, through the application token it was created with, while that token is usable. */
export async function batchActor(directory: DirectoryReads, batch: RunBatchDoc, now = new Date()): Promise<AppPrincipal> {
  const token = await directory.appTokens.get(batch.tokenId);
  if (!token || token.revokedAt || token.expiresAt.getTime() <= now.getTime())
    throw new BatchCannotGoOn("the application token that created the batch was revoked or has expired");
  const user = await directory.users.get(token.userId);
  if (!user) throw new BatchCannotGoOn("the user who created the batch no longer exists");
  return { kind: "app", token, user };
}

/** What a batch's action works with. */
export interface BatchEnv {
  deps: TriggerDeps;
  machine: RunStateMachine;
  directory: DirectoryReads;
  principal: AppPrincipal;
}

/** A refusal of the action on one run as the batch counts it; a wait or an outage goes up. */
function refusal(err: unknown): Decision {
  if (isDomainError(err, "throttled")) throw new BatchMustWait(err.facts.retryAfterSeconds ?? 1);
  if (!(err instanceof DomainError)) throw err;
  switch (err.kind) {
    case "exists":
      return skipped(SKIP.ongoing, err.facts.ongoingRunId ? `${SKIP.ongoing} (run ${err.facts.ongoingRunId})` : SKIP.ongoing);
    case "precondition":
      return skipped(sharedReason(err.message), err.message);
    case "denied":
    case "notFound":
    case "invalid":
      return failed(sharedReason(err.message), err.message);
    default:
      throw err;
  }
}

/** A retry's own checks, a dry run's too: the skip they call for, or undefined. */
async function retrySkip(env: BatchEnv, batch: RunBatchDoc, run: RunDoc): Promise<Decision | undefined> {
  // Retries of this run: one this batch started (before a crash, or by its previous holder) is done, not again.
  const retries = await env.deps.store.runs.retriesOf(run._id, MAX_RETRIES_READ);
  const own = retries.find((r) => r.batchId === batch._id);
  if (own) return done(own._id);
  if (retries.length > 0) return skipped(SKIP.alreadyRetried, `${SKIP.alreadyRetried} (run ${retries[0]!._id})`);
  const workflow = batch.fromFailedStep ? await env.directory.workflows.get(run.workflowId) : null;
  const refused = retryRefusal(run, batch.fromFailedStep) ?? (workflow ? versionRefusal(run, workflow) : undefined);
  return refused && skipped(sharedReason(refused.message), refused.message);
}

/** What a dry run of a retry would find beyond its own checks: the caller's access, an active version, the record's ongoing run. */
async function previewRetry(env: BatchEnv, batch: RunBatchDoc, run: RunDoc): Promise<Decision> {
  await assertMaySeeRun(env.directory, env.principal, run);
  const workflow = await env.directory.workflows.get(run.workflowId);
  if (!workflow) throw fail.notFound("the run's workflow no longer exists");
  if (!batch.fromFailedStep && !latestActive(workflow.versions)) throw fail.notFound("no active workflow version");
  const ongoing = await env.deps.store.runs.ongoingOn(activeKeyOf(run.workflowId, run.recordId));
  if (ongoing) return skipped(SKIP.ongoing, `${SKIP.ongoing} (run ${ongoing._id})`);
  return done();
}

async function retry(env: BatchEnv, batch: RunBatchDoc, run: RunDoc): Promise<Decision> {
  const skip = await retrySkip(env, batch, run);
  if (skip) return skip;
  if (batch.dryRun) return previewRetry(env, batch, run);
  const req: StartRequest = {
    principal: env.principal,
    workflowId: run.workflowId,
    recordId: run.recordId,
    via: batch.via as RunVia,
    idempotencyKey: `batch:${batch._id}:${run._id}`,
    retry: { of: run, fromFailedStep: batch.fromFailedStep },
    batchId: batch._id,
    paced: true,
  };
  const started = await startAs(env.deps, req);
  return done(started.runId);
}

async function cancel(env: BatchEnv, batch: RunBatchDoc, run: RunDoc): Promise<Decision> {
  if (isFinished(run.state)) return skipped(SKIP.finished(run.state));
  await assertMaySeeRun(env.directory, env.principal, run);
  if (batch.dryRun) return done();
  try {
    await cancelAs(env.deps, env.machine, { id: env.principal.user._id, email: env.principal.user.email }, run, batch.via as RunVia);
    return done();
  } catch (err) {
    // Finished meanwhile: skipped as any finished run is.
    const fresh = isDomainError(err, "precondition") ? await env.deps.store.runs.get(run._id) : null;
    if (fresh && isFinished(fresh.state)) return skipped(SKIP.finished(fresh.state));
    throw err;
  }
}

/**
 * What the batch did with `run`: what it stored before (a batch that resumes), or the action's
 * outcome, stored now. Throws BatchMustWait (the project's quota: try again later) and
 * outages; every other refusal is the run's outcome.
 */
export async function handleRun(env: BatchEnv, batch: RunBatchDoc, run: RunDoc): Promise<RunBatchItemDoc> {
  const store = env.deps.store.runBatches;
  const before = await store.item(batch._id, run._id);
  if (before) return before;
  let decision: Decision;
  try {
    decision = batch.action === "retry" ? await retry(env, batch, run) : await cancel(env, batch, run);
  } catch (err) {
    decision = refusal(err);
  }
  return store.putItem({ _id: `${batch._id}:${run._id}`, batchId: batch._id, runId: run._id, ...decision, at: new Date() });
}

/** The filter as the admin log shows it: the fields given. */
function filterDetails(b: RunBatchDoc): Record<string, unknown> {
  const { namedWorkflowIds: _resolved, ...f } = b.filter;
  const all: Record<string, unknown> = {
    ...f,
    states: f.states.length > 0 ? f.states : undefined,
    finishedFrom: f.finishedFrom?.toISOString(),
    finishedTo: f.finishedTo?.toISOString(),
    createdFrom: b.createdFrom?.toISOString(),
    createdTo: b.createdTo.toISOString(),
    runIds: b.runIds.length > 0 ? b.runIds.length : undefined,
  };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined && v !== ""));
}

/** One admin log entry about `batch`, by `actor`, in its project's log (src/http/published.ts maps each action). */
async function batchEntry(
  deps: Pick<TriggerDeps, "store">,
  batch: RunBatchDoc,
  action: string,
  actor: UserRefDoc,
  details: Record<string, unknown>,
): Promise<void> {
  const environment = await deps.store.immutable.environment(batch.environmentId);
  await deps.store.logs.appendAdmin({
    organizationId: batch.organizationId,
    projectId: batch.projectId,
    environment: environment?.name ?? null,
    actor,
    action,
    target: `run_batch/${batch._id}`,
    details: { batchId: batch._id, action: batch.action, dryRun: batch.dryRun, fromFailedStep: batch.fromFailedStep, ...details },
  });
}

const counts = (b: RunBatchDoc) => ({
  state: b.state,
  matched: b.matched,
  done: b.done,
  skipped: b.skipped,
  failed: b.failed,
  ...(b.error ? { error: b.error } : {}),
});

/** The entry of a new batch: who, which runs, what. */
export function logBatchCreated(deps: Pick<TriggerDeps, "store">, batch: RunBatchDoc): Promise<void> {
  return batchEntry(deps, batch, "run_batch.created", batch.createdBy, { filter: filterDetails(batch) });
}

/** The entry of a batch that ended by itself (SUCCEEDED or FAILED), by its creator, with its counts. */
export function logBatchEnd(deps: Pick<TriggerDeps, "store">, batch: RunBatchDoc): Promise<void> {
  return batchEntry(deps, batch, "run_batch.finished", batch.createdBy, counts(batch));
}

/** The entry of a batch cancelled by `by`, with its counts then. */
export function logBatchCancelled(deps: Pick<TriggerDeps, "store">, batch: RunBatchDoc, by: UserRefDoc): Promise<void> {
  return batchEntry(deps, batch, "run_batch.cancelled", by, counts(batch));
}
