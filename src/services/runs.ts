// RunService: follow (GetRun with long-poll, WatchRun) and cancel runs.
//
// Who sees a run is one rule (domain/auth/run-scope.ts), for following, cancelling and the
// search alike. CancelRun takes application tokens only; an organization API token is refused (403).
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type {
  CancelRunRequest,
  GetRunRequest,
  ListRunsRequest,
  RetryRunRequest,
  RunService,
  StartRunRequest,
  WatchRunRequest,
} from "../../gen/runhook/v1/run_pb.js";
import { assertMaySeeRun, runListScope } from "../domain/auth/run-scope.js";
import { cursorCodec, paging, type CursorCodec } from "../domain/logs/cursor.js";
import { readRunPage, runSelection } from "../domain/runs/search.js";
import { assertNotOrgApiToken } from "../domain/auth/access.js";
import { authenticateAny, type ApiPrincipal, type AppPrincipal } from "../domain/auth/tokens.js";
import type { Deps } from "../deps.js";
import { applicationCaller, authorization, directoryOf, requestIdKey, runViaOf, viaOf, watchAccess } from "./context.js";
import { scopedRunFilterOf } from "./filters.js";
import type { DirectoryView } from "../store/directory-cache.js";
import type { RunDoc } from "../store/types.js";
import { fail } from "../domain/errors.js";
import { cancelAs } from "../domain/runs/cancel.js";
import { startAs } from "../domain/runs/start.js";
import { isUuid } from "../domain/ids.js";
import { isFinished } from "../domain/runs/model.js";
import { runMessage } from "./run-message.js";
import { runBatchHandlers } from "./run-batches.js";
import { answerStart } from "./trigger.js";
import { runStateMachine, type RunStateMachine } from "../domain/runs/state.js";
import { runMetrics } from "../lib/metrics.js";
import { RunWatcher } from "../domain/runs/watch.js";
import { MAX_TIMER_MS } from "../lib/sleep.js";

export const MAX_WAIT_SECONDS = 60;

/** How many of a run's retries GetRun and WatchRun list. */
const MAX_RETRIES_LISTED = 100;

/** The name of a workflow, as the directory has it now ("" once it is gone). */
async function workflowNameOf(directory: DirectoryView, workflowId: string): Promise<string> {
  return (await directory.workflows.get(workflowId))?.name ?? "";
}

/** The run as GetRun and WatchRun answer it: with the runs that retry it. */
async function followed(deps: Deps, directory: DirectoryView, run: RunDoc) {
  const [retries, name] = await Promise.all([deps.store.runs.retriesOf(run._id, MAX_RETRIES_LISTED), workflowNameOf(directory, run.workflowId)]);
  return runMessage(
    run,
    name,
    retries.map((r) => r._id),
  );
}

/**
 * The caller, and the run if they may follow it. `directory`: the call's own view (its first
 * check), or a fresh one for a re-check later in a long call, which must see every revoke and
 * role change made since the call began.
 */
async function authorize(
  deps: Deps,
  ctx: HandlerContext,
  runId: string,
  opts: { act?: "cancelled" | "retried"; directory?: DirectoryView } = {},
): Promise<{ principal: AppPrincipal | ApiPrincipal; run: RunDoc }> {
  const directory = opts.directory ?? directoryOf(deps, ctx.values);
  const principal = await authenticateAny(directory, authorization(ctx));
  assertNotOrgApiToken(principal);
  if (opts.act && principal.kind === "api") throw fail.denied(`runs are ${opts.act} with an application token, not a project API token`);
  if (!isUuid(runId)) throw fail.invalid("run_id must be a UUID");
  const run = await deps.store.runs.get(runId.toLowerCase());
  // Another organization's run is as unknown as a missing one, and the answer echoes no id.
  if (!run || (await organizationOf(directory, run)) !== callerOrganization(principal)) throw fail.notFound("run not found");
  await assertMaySeeRun(directory, principal, run);
  return { principal, run };
}

/** The organization of a run (runs stored before they kept it: their project's). */
async function organizationOf(directory: DirectoryView, run: RunDoc): Promise<string | undefined> {
  return run.organizationId ?? (await directory.projects.get(run.projectId))?.organizationId;
}

function callerOrganization(p: AppPrincipal | ApiPrincipal): string {
  return p.kind === "api" ? p.project.organizationId : p.user.organizationId;
}

/** After a wait, the caller's access as it is now (a fresh view), before the run is answered. */
async function recheck(deps: Deps, ctx: HandlerContext, run: RunDoc, directory = deps.store.directory.view()): Promise<void> {
  const principal = await authenticateAny(directory, authorization(ctx));
  assertNotOrgApiToken(principal);
  await assertMaySeeRun(directory, principal, run);
}

/**
 * The run once its version differs from `known` (no known version: once it is finished), or as it
 * is at the deadline or the call's end. Access is checked again whenever it may have changed: a
 * revoke, a role change, a sign-out or an expiry refuses the answer at once.
 */
async function waitForRun(deps: Deps, watcher: RunWatcher, ctx: HandlerContext, run: RunDoc, known: number, deadline: number): Promise<RunDoc> {
  const access = await watchAccess(deps, directoryOf(deps, ctx.values), (directory) => recheck(deps, ctx, run, directory), ctx.signal);
  try {
    while (!ctx.signal.aborted && Date.now() < deadline) {
      const changed = await watcher.wait(run._id, known || run.version, deadline, access.wake);
      if (access.stale) await access.recheck();
      if (changed) run = changed;
      if (changed && (known !== 0 || isFinished(run.state))) return run;
    }
  } finally {
    access.stop();
  }
  return (await deps.store.runs.get(run._id)) ?? run;
}

async function getRun(deps: Deps, watcher: RunWatcher, req: GetRunRequest, ctx: HandlerContext) {
  if (req.waitSeconds > MAX_WAIT_SECONDS) throw fail.invalid(`wait_seconds must be between 0 and ${MAX_WAIT_SECONDS}`);
  let { run } = await authorize(deps, ctx, req.runId);
  const known = Number(req.knownVersion);
  // With a wait: until the run's version differs from the known one (none known: until it is finished), or the time is up.
  if (req.waitSeconds > 0 && !isFinished(run.state) && (known === 0 || run.version === known)) {
    run = await waitForRun(deps, watcher, ctx, run, known, Date.now() + req.waitSeconds * 1000);
    // The caller's access as it is when the answer goes.
    await recheck(deps, ctx, run);
  }
  return { run: await followed(deps, directoryOf(deps, ctx.values), run) };
}

async function* watchRun(deps: Deps, watcher: RunWatcher, req: WatchRunRequest, ctx: HandlerContext) {
  const view = directoryOf(deps, ctx.values);
  let { run } = await authorize(deps, ctx, req.runId, { directory: view });
  const access = await watchAccess(deps, view, (directory) => authorize(deps, ctx, req.runId, { directory }), ctx.signal);
  let sent = run.version;
  try {
    yield { run: await followed(deps, view, run) };
    while (!isFinished(run.state)) {
      // A stopping server ends the stream with UNAVAILABLE (the run is not finished: call again).
      ctx.signal.throwIfAborted();
      // Woken by a change of the run, or of the caller's access (a revoke, a role, a sign-out, an expiry: within a second).
      const next = await watcher.wait(run._id, sent, Date.now() + MAX_TIMER_MS, access.wake);
      ctx.signal.throwIfAborted();
      // A refusal ends the watch; the run comes as it is now.
      if (access.stale) ({ run } = await access.recheck());
      else if (next) run = next;
      if (run.version !== sent) {
        sent = run.version;
        yield { run: await followed(deps, view, run) };
      }
    }
  } finally {
    access.stop();
  }
}

async function cancelRun(deps: Deps, machine: RunStateMachine, req: CancelRunRequest, ctx: HandlerContext) {
  const { principal, run } = await authorize(deps, ctx, req.runId, { act: "cancelled" });
  const by = { id: principal.user._id, email: principal.user.email };
  const cancelled = await cancelAs(deps, machine, by, run, runViaOf(ctx));
  return { run: runMessage(cancelled, await workflowNameOf(directoryOf(deps, ctx.values), cancelled.workflowId)) };
}

/**
 * The call's idempotency key: /v1's Idempotency-Key header (present but empty is a bad key), or
 * the request's field (a proto3 string is never absent: empty means none).
 */
function idempotencyKeyOf(ctx: HandlerContext, field: string): string | undefined {
  if (viaOf(ctx) === "api") return ctx.requestHeader.get("idempotency-key") ?? undefined;
  return field === "" ? undefined : field;
}

/** Where a StartRun caller expects the workflow: both names, or neither. */
function placeOf(req: StartRunRequest): { projectName: string; environmentName: string } | undefined {
  if (!req.projectName && !req.environmentName) return undefined;
  if (!req.projectName || !req.environmentName) throw fail.invalid("project_name and environment_name go together");
  return { projectName: req.projectName, environmentName: req.environmentName };
}

async function startRun(deps: Deps, req: StartRunRequest, ctx: HandlerContext) {
  const principal = await applicationCaller(directoryOf(deps, ctx.values), ctx, "runs are started");
  const out = await startAs(deps, {
    principal,
    workflowId: req.workflowId,
    recordId: req.recordId,
    via: runViaOf(ctx),
    requestId: ctx.values.get(requestIdKey),
    idempotencyKey: idempotencyKeyOf(ctx, req.idempotencyKey),
    place: placeOf(req),
  });
  return answerStart(ctx, out);
}

async function retryRun(deps: Deps, req: RetryRunRequest, ctx: HandlerContext) {
  const { principal, run } = await authorize(deps, ctx, req.runId, { act: "retried" });
  const out = await startAs(deps, {
    principal: principal as AppPrincipal,
    workflowId: run.workflowId,
    recordId: run.recordId,
    via: runViaOf(ctx),
    requestId: ctx.values.get(requestIdKey),
    idempotencyKey: idempotencyKeyOf(ctx, req.idempotencyKey),
    retry: { of: run, fromFailedStep: req.fromFailedStep },
  });
  return answerStart(ctx, out);
}

async function listRuns(deps: Deps, codec: CursorCodec, req: ListRunsRequest, ctx: HandlerContext) {
  const p = paging(req.options, { defaultOrder: "desc" });
  const scope = await runListScope(directoryOf(deps, ctx.values), deps.store.directory, authorization(ctx), req.projectName, req.environmentName);
  const selection = runSelection(scope.environment._id, await scopedRunFilterOf(deps, scope, req.filter), p);
  const page = await readRunPage(deps.store, codec, selection, p);
  const view = directoryOf(deps, ctx.values);
  // Each workflow of the page once (a page's runs share a few).
  const ids = [...new Set(page.runs.map((r) => r.workflowId))];
  const names = new Map(await Promise.all(ids.map(async (id) => [id, await workflowNameOf(view, id)] as const)));
  return { runs: page.runs.map((r) => runMessage(r, names.get(r.workflowId) ?? "")), hasMore: page.hasMore, nextCursor: page.nextCursor };
}

export function createRunService(deps: Deps): ServiceImpl<typeof RunService> {
  const codec = cursorCodec(deps.config);
  const watcher = new RunWatcher(deps);
  const machine = runStateMachine(deps.store, runMetrics(deps.metrics));
  return {
    getRun: (req, ctx) => getRun(deps, watcher, req, ctx),
    watchRun: (req, ctx) => watchRun(deps, watcher, req, ctx),
    cancelRun: (req, ctx) => cancelRun(deps, machine, req, ctx),
    listRuns: (req, ctx) => listRuns(deps, codec, req, ctx),
    startRun: (req, ctx) => startRun(deps, req, ctx),
    retryRun: (req, ctx) => retryRun(deps, req, ctx),
    createRunBatch: (req, ctx) => runBatchHandlers(deps, codec).createRunBatch(req, ctx),
    getRunBatch: (req, ctx) => runBatchHandlers(deps, codec).getRunBatch(req, ctx),
    cancelRunBatch: (req, ctx) => runBatchHandlers(deps, codec).cancelRunBatch(req, ctx),
    listRunBatches: (req, ctx) => runBatchHandlers(deps, codec).listRunBatches(req, ctx),
  };
}
