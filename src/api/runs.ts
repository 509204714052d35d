// RunService: follow (GetRun with long-poll, WatchRun) and cancel runs.
//
// Access: an application token of a user allowed to trigger the run's
// workflow (assertMayTrigger), or a project API token of the run's project. CancelRun
// takes application tokens only.
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { assertMayTrigger, renderingDenial } from "../domain/auth/access.js";
import { authenticateAny, type ApiPrincipal, type AppPrincipal } from "../domain/auth/tokens.js";
import { type Deps } from "../deps.js";
import { authorization, viaOf } from "./context.js";
import type { RunDoc } from "../store/types.js";
import { fail } from "../errors.js";
import { writeRunActivity } from "../domain/runs/activity.js";
import { isUuid } from "../domain/ids.js";
import { isFinished, RUN_CANCELLED, RUN_CHANGED, runMessage } from "../domain/runs/model.js";
import { runStateMachine } from "../domain/runs/state.js";
import { runMetrics } from "../metrics.js";
import { RunWatcher } from "../domain/runs/watch.js";

export const MAX_WAIT_SECONDS = 60;
/** WatchRun re-checks the caller's access at least this often while nothing changes. */
const WATCH_RECHECK_MS = 60_000;

export function createRunService(deps: Deps): ServiceImpl<typeof RunService> {
  const { db, store } = deps;
  const watcher = new RunWatcher(deps);
  const machine = runStateMachine(store, runMetrics(deps.metrics));

  /** Throws PERMISSION_DENIED unless the principal may follow (or cancel) the run. */
  async function assertMayAccess(p: AppPrincipal | ApiPrincipal, run: RunDoc): Promise<void> {
    if (p.kind === "api") {
      if (p.project._id !== run.projectId) throw fail.denied("the API token belongs to another project");
      return;
    }
    const [project, rendering, workflow] = await Promise.all([
      db.projects.findOne({ _id: run.projectId }),
      db.renderings.findOne({ _id: run.renderingId }),
      db.workflows.findOne({ _id: run.workflowId }),
    ]);
    if (!project || !rendering) throw fail.denied("the run's project or rendering no longer exists");
    if (workflow) {
      await assertMayTrigger(db, p.user, p.token, project, rendering, workflow);
      return;
    }
    // Workflow deleted: fall back to the rendering rule.
    const r = await renderingDenial(db, p.user, project, rendering);
    if (r.reason !== null) throw fail.denied(r.reason);
  }

  async function authorize(ctx: HandlerContext, runId: string, opts: { cancel?: boolean } = {}): Promise<{ principal: AppPrincipal | ApiPrincipal; run: RunDoc }> {
    const principal = await authenticateAny(db, authorization(ctx));
    if (opts.cancel && principal.kind === "api") throw fail.denied("runs are cancelled with an application token, not a project API token");
    if (!isUuid(runId)) throw fail.invalid("run_id must be a UUID");
    const run = await store.runs.get(runId.toLowerCase());
    if (!run) throw fail.notFound(`run ${runId} not found`);
    await assertMayAccess(principal, run);
    return { principal, run };
  }

  return {
    async getRun(req, ctx) {
      if (req.waitSeconds > MAX_WAIT_SECONDS) throw fail.invalid(`wait_seconds must be between 0 and ${MAX_WAIT_SECONDS}`);
      let { run } = await authorize(ctx, req.runId);
      const known = Number(req.knownVersion);
      const deadline = Date.now() + req.waitSeconds * 1000;
      if (req.waitSeconds > 0 && known === 0) {
        // No known version: wait until the run is finished or the time is up.
        while (!isFinished(run.state) && !ctx.signal.aborted) {
          const changed = await watcher.wait(run._id, run.version, deadline, ctx.signal);
          if (!changed) {
            run = (await store.runs.get(run._id)) ?? run;
            break;
          }
          run = changed;
        }
      } else if (req.waitSeconds > 0 && run.version === known && !isFinished(run.state)) {
        const changed = await watcher.wait(run._id, known, deadline, ctx.signal);
        run = changed ?? (await store.runs.get(run._id)) ?? run;
      }
      return { run: runMessage(run) };
    },

    async *watchRun(req, ctx) {
      let { run } = await authorize(ctx, req.runId);
      yield { run: runMessage(run) };
      while (!isFinished(run.state) && !ctx.signal.aborted) {
        const next = await watcher.wait(run._id, run.version, Date.now() + WATCH_RECHECK_MS, ctx.signal);
        if (ctx.signal.aborted) return;
        if (next) {
          run = next;
          yield { run: runMessage(run) };
        } else {
          // Nothing changed for a while: make sure the caller may still follow it.
          ({ run } = await authorize(ctx, req.runId));
        }
      }
    },

    async cancelRun(req, ctx) {
      let { principal, run } = await authorize(ctx, req.runId, { cancel: true });
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
          await writeRunActivity(store, done, "workflow.run.cancelled", { cancelledBy: by, step }, viaOf(ctx));
          return { run: runMessage(done) };
        }
        const fresh = await store.runs.get(run._id);
        if (!fresh) throw fail.notFound(`run ${run._id} not found`);
        run = fresh;
      }
      throw new ConnectError("the run kept changing; try again", Code.Aborted);
    },
  };
}
