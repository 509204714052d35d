// RunService: follow (GetRun with long-poll, WatchRun) and cancel runs.
//
// Who sees a run is one rule (domain/auth/run-scope.ts), for following, cancelling and the
// search alike. CancelRun takes application tokens only; an organization API token is refused (403).
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { CancelRunRequest, GetRunRequest, ListRunsRequest, RunService, WatchRunRequest } from "../../gen/runhook/v1/run_pb.js";
import { assertMaySeeRun, runListScope } from "../domain/auth/run-scope.js";
import { cursorCodec, paging, type CursorCodec } from "../domain/logs/cursor.js";
import { readRunPage, runSelection } from "../domain/runs/search.js";
import { assertNotOrgApiToken } from "../domain/auth/access.js";
import { authenticateAny, type ApiPrincipal, type AppPrincipal } from "../domain/auth/tokens.js";
import type { Deps } from "../deps.js";
import { authorization, directoryOf, viaOf, watchAccess } from "./context.js";
import type { DirectoryView } from "../store/directory-cache.js";
import type { RunDoc } from "../store/types.js";
import { fail } from "../domain/errors.js";
import { writeRunActivity } from "../domain/runs/activity.js";
import { isUuid } from "../domain/ids.js";
import { isFinished, RUN_CANCELLED, RUN_CHANGED } from "../domain/runs/model.js";
import { runMessage } from "./run-message.js";
import { runBatchHandlers } from "./run-batches.js";
import { runStateMachine, type RunStateMachine } from "../domain/runs/state.js";
import { runMetrics } from "../lib/metrics.js";
import { RunWatcher } from "../domain/runs/watch.js";
import { MAX_TIMER_MS } from "../lib/sleep.js";

export const MAX_WAIT_SECONDS = 60;

/**
 * The caller, and the run if they may follow it. `directory`: the call's own view (its first
 * check), or a fresh one for a re-check later in a long call, which must see every revoke and
 * role change made since the call began.
 */
async function authorize(
  deps: Deps,
  ctx: HandlerContext,
  runId: string,
  opts: { cancel?: boolean; directory?: DirectoryView } = {},
): Promise<{ principal: AppPrincipal | ApiPrincipal; run: RunDoc }> {
  const directory = opts.directory ?? directoryOf(deps, ctx.values);
  const principal = await authenticateAny(directory, authorization(ctx));
  assertNotOrgApiToken(principal);
  if (opts.cancel && principal.kind === "api") throw fail.denied("runs are cancelled with an application token, not a project API token");
  if (!isUuid(runId)) throw fail.invalid("run_id must be a UUID");
  const run = await deps.store.runs.get(runId.toLowerCase());
  if (!run) throw fail.notFound(`run ${runId} not found`);
  await assertMaySeeRun(directory, principal, run);
  return { principal, run };
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
  return { run: runMessage(run) };
}

async function* watchRun(deps: Deps, watcher: RunWatcher, req: WatchRunRequest, ctx: HandlerContext) {
  const view = directoryOf(deps, ctx.values);
  let { run } = await authorize(deps, ctx, req.runId, { directory: view });
  const access = await watchAccess(deps, view, (directory) => authorize(deps, ctx, req.runId, { directory }), ctx.signal);
  let sent = run.version;
  try {
    yield { run: runMessage(run) };
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
        yield { run: runMessage(run) };
      }
    }
  } finally {
    access.stop();
  }
}

async function cancelRun(deps: Deps, machine: RunStateMachine, req: CancelRunRequest, ctx: HandlerContext) {
  let { principal, run } = await authorize(deps, ctx, req.runId, { cancel: true });
  const by = { id: principal.user._id, email: principal.user.email };
  // One conditional update from the version we read; retried if the run moved meanwhile.
  for (let attempt = 0; attempt < 20; attempt++) {
    if (isFinished(run.state)) throw fail.precondition(`run ${run._id} is already finished (${run.state})`);
    const done = await machine.cancel(run, `cancelled by ${by.email}`);
    if (done) {
      deps.events.emit(RUN_CANCELLED, done._id);
      deps.events.emit(RUN_CHANGED, done._id);
      // Attributed to the run's user like every entry of the run; the canceller is in details.
      const step = run.stepIndex < run.steps.length ? run.stepIndex : null;
      await writeRunActivity(deps.store, done, "workflow.run.cancelled", { cancelledBy: by, step }, viaOf(ctx));
      return { run: runMessage(done) };
    }
    const fresh = await deps.store.runs.get(run._id);
    if (!fresh) throw fail.notFound(`run ${run._id} not found`);
    run = fresh;
  }
  throw fail.aborted("the run kept changing; try again");
}

function timeOf(ts: Timestamp | undefined, name: string): Date | undefined {
  if (!ts) return undefined;
  const d = timestampDate(ts);
  if (Number.isNaN(d.getTime())) throw fail.invalid(`${name} is not a valid time`);
  return d;
}

async function listRuns(deps: Deps, codec: CursorCodec, req: ListRunsRequest, ctx: HandlerContext) {
  const p = paging(req.options, { defaultOrder: "desc" });
  const scope = await runListScope(directoryOf(deps, ctx.values), deps.store.directory, authorization(ctx), req.projectName, req.environmentName);
  const f = req.filter;
  const selection = runSelection(
    scope.environment._id,
    {
      workflowId: f?.workflowId ?? "",
      seenWorkflowIds: scope.workflowIds,
      collection: f?.collection ?? "",
      recordId: f?.recordId ?? "",
      states: f?.states ?? [],
      via: f?.via ?? "",
      userId: f?.userId ?? "",
      finishedFrom: timeOf(f?.finishedFrom, "finished_from"),
      finishedTo: timeOf(f?.finishedTo, "finished_to"),
    },
    p,
  );
  const page = await readRunPage(deps.store, codec, selection, p);
  return { runs: page.runs.map(runMessage), hasMore: page.hasMore, nextCursor: page.nextCursor };
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
    startRun: () => Promise.reject(fail.precondition("StartRun is not implemented yet")),
    retryRun: () => Promise.reject(fail.precondition("RetryRun is not implemented yet")),
    createRunBatch: (req, ctx) => runBatchHandlers(deps, codec).createRunBatch(req, ctx),
    getRunBatch: (req, ctx) => runBatchHandlers(deps, codec).getRunBatch(req, ctx),
    cancelRunBatch: (req, ctx) => runBatchHandlers(deps, codec).cancelRunBatch(req, ctx),
    listRunBatches: (req, ctx) => runBatchHandlers(deps, codec).listRunBatches(req, ctx),
  };
}
