// RunService's batches: CreateRunBatch, GetRunBatch, CancelRunBatch, ListRunBatches.
//
// Application tokens only (a project API token is PERMISSION_DENIED, as for CancelRun). Who
// sees which runs is the run search's rule (runListScope); a user who is no admin of the
// project batches only the runs they started (`filter.user_id` is theirs), and sees only the
// batches they created. Another organization's batch is NOT_FOUND, naming nothing of it.
import type { HandlerContext } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { CancelRunBatchRequest, CreateRunBatchRequest, GetRunBatchRequest, ListRunBatchesRequest, RunBatchSchema } from "../../gen/runhook/v1/run_pb.js";
import type { Deps } from "../deps.js";
import { assertSsoWhereRequired, holdsProjectRole } from "../domain/auth/access.js";
import { runListScope } from "../domain/auth/run-scope.js";
import type { AppPrincipal } from "../domain/auth/tokens.js";
import { fail } from "../domain/errors.js";
import { isUuid } from "../domain/ids.js";
import { bindingHash, paging, type CursorCodec } from "../domain/logs/cursor.js";
import { BATCH_CREATED, logBatchCancelled, logBatchCreated, newBatchDoc } from "../domain/runs/batches.js";
import type { DirectoryView } from "../store/directory-cache.js";
import type { RunBatchDoc } from "../store/types.js";
import { applicationCaller, authorization, directoryOf, runViaOf } from "./context.js";
import { scopedRunFilterOf, timeOf } from "./filters.js";
import { parsePositionKey, positionKeyOf } from "../domain/runs/search.js";

const ts = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);

/** A batch as RunService shows it. */
export function runBatchMessage(b: RunBatchDoc): MessageInitShape<typeof RunBatchSchema> {
  const { namedWorkflowIds: _resolved, ...f } = b.filter;
  return {
    id: b._id,
    projectId: b.projectId,
    environmentId: b.environmentId,
    action: b.action,
    filter: { ...f, finishedFrom: ts(f.finishedFrom), finishedTo: ts(f.finishedTo) },
    fromFailedStep: b.fromFailedStep,
    dryRun: b.dryRun,
    state: b.state,
    createdBy: { id: b.createdBy.id, email: b.createdBy.email },
    matched: BigInt(b.matched),
    done: BigInt(b.done),
    skipped: BigInt(b.skipped),
    failed: BigInt(b.failed),
    reasons: Object.values(b.reasons)
      .sort((x, y) => y.count - x.count || x.reason.localeCompare(y.reason))
      .map((r) => ({ outcome: r.outcome, reason: r.reason, count: BigInt(r.count), runIds: r.runIds })),
    error: b.error,
    createdAt: ts(b.createdAt),
    updatedAt: ts(b.updatedAt),
    finishedAt: ts(b.finishedAt),
    via: b.via,
    runIds: b.runIds,
    createdFrom: ts(b.createdFrom),
    createdTo: ts(b.createdTo),
  };
}

/** The caller: an application token (a project API token or an organization API token is refused). */
const appCaller = (view: DirectoryView, ctx: HandlerContext) => applicationCaller(view, ctx, "run batches are made and followed");

async function createRunBatch(deps: Deps, req: CreateRunBatchRequest, ctx: HandlerContext) {
  const view = directoryOf(deps, ctx.values);
  const principal = await appCaller(view, ctx);
  const scope = await runListScope(view, deps.store.directory, authorization(ctx), req.projectName, req.environmentName);
  const { seenWorkflowIds, ...f } = await scopedRunFilterOf(deps, scope, req.filter);
  const admin = scope.workflowIds === undefined;
  const batch = newBatchDoc({
    principal,
    organizationId: scope.project.organizationId,
    projectId: scope.project._id,
    environmentId: scope.environment._id,
    action: req.action,
    filter: {
      ...f,
      // Anyone but an admin acts on their own runs only, whatever the filter said.
      userId: admin ? f.userId : principal.user._id,
      finishedFrom: f.finishedFrom ?? null,
      finishedTo: f.finishedTo ?? null,
      namedWorkflowIds: f.namedWorkflowIds ?? null,
    },
    seenWorkflowIds,
    runIds: req.runIds,
    createdFrom: timeOf(req.createdFrom, "created_from"),
    createdTo: timeOf(req.createdTo, "created_to"),
    fromFailedStep: req.fromFailedStep,
    dryRun: req.dryRun,
    via: runViaOf(ctx),
  });
  await deps.store.runBatches.create(batch);
  await logBatchCreated(deps, batch);
  deps.events.emit(BATCH_CREATED, batch._id);
  return { batch: runBatchMessage(batch) };
}

/** The batch, when the caller may see it: a project admin any, another user their own; another organization's is not found. */
async function authorizeBatch(deps: Deps, ctx: HandlerContext, batchId: string): Promise<{ principal: AppPrincipal; batch: RunBatchDoc }> {
  const view = directoryOf(deps, ctx.values);
  const principal = await appCaller(view, ctx);
  if (!isUuid(batchId)) throw fail.invalid("batch_id must be a UUID");
  const batch = await deps.store.runBatches.get(batchId.toLowerCase());
  const project = batch && (await view.projects.get(batch.projectId));
  if (!batch || !project || project.organizationId !== principal.user.organizationId) throw fail.notFound("run batch not found");
  assertSsoWhereRequired(project, principal.token);
  if (batch.createdBy.id !== principal.user._id && !(await holdsProjectRole(view, principal.user, project, "admin")))
    throw fail.denied("only an admin of the project sees another user's run batches");
  return { principal, batch };
}

async function getRunBatch(deps: Deps, req: GetRunBatchRequest, ctx: HandlerContext) {
  const { batch } = await authorizeBatch(deps, ctx, req.batchId);
  return { batch: runBatchMessage(batch) };
}

async function cancelRunBatch(deps: Deps, req: CancelRunBatchRequest, ctx: HandlerContext) {
  const { principal, batch } = await authorizeBatch(deps, ctx, req.batchId);
  const cancelled = await deps.store.runBatches.cancel(batch._id);
  if (!cancelled) {
    const now = await deps.store.runBatches.get(batch._id);
    throw fail.precondition(`the run batch is already finished (${now?.state ?? batch.state})`);
  }
  await logBatchCancelled(deps, cancelled, { id: principal.user._id, email: principal.user.email });
  return { batch: runBatchMessage(cancelled) };
}

async function listRunBatches(deps: Deps, codec: CursorCodec, req: ListRunBatchesRequest, ctx: HandlerContext) {
  const view = directoryOf(deps, ctx.values);
  const principal = await appCaller(view, ctx);
  const p = paging(req.options, { defaultOrder: "desc" });
  if (p.order !== "desc") throw fail.invalid("run batches are listed newest first (order desc)");
  const scope = await runListScope(view, deps.store.directory, authorization(ctx), req.projectName, req.environmentName);
  const createdById = scope.workflowIds === undefined ? undefined : principal.user._id;
  const hash = bindingHash({ list: "run-batches", scope: scope.environment._id, createdBy: createdById });
  const after = p.cursor ? parsePositionKey(codec.decodeKey(p.cursor, hash)) : undefined;
  const docs = await deps.store.runBatches.list(scope.environment._id, createdById, after, p.limit + 1);
  const hasMore = docs.length > p.limit;
  const batches = hasMore ? docs.slice(0, p.limit) : docs;
  const last = batches[batches.length - 1];
  return { batches: batches.map(runBatchMessage), hasMore, nextCursor: hasMore && last ? codec.encodeKey(positionKeyOf(last), hash) : undefined };
}

/** The four handlers, for createRunService. */
export function runBatchHandlers(deps: Deps, codec: CursorCodec) {
  return {
    createRunBatch: (req: CreateRunBatchRequest, ctx: HandlerContext) => createRunBatch(deps, req, ctx),
    getRunBatch: (req: GetRunBatchRequest, ctx: HandlerContext) => getRunBatch(deps, req, ctx),
    cancelRunBatch: (req: CancelRunBatchRequest, ctx: HandlerContext) => cancelRunBatch(deps, req, ctx),
    listRunBatches: (req: ListRunBatchesRequest, ctx: HandlerContext) => listRunBatches(deps, codec, req, ctx),
  };
}
