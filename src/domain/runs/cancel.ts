// Cancelling an ongoing run (CancelRun, a cancel batch): one conditional update from the version
// read, retried while the run moves, with its activity entry (one fact, activity.ts).
import type { EventEmitter } from "node:events";
import type { Logger } from "pino";
import { fail } from "../errors.js";
import { putEntries, releaseEntries, runEntry } from "./activity.js";
import { isFinished, RUN_CANCELLED, RUN_CHANGED } from "./model.js";
import type { RunStateMachine } from "./state.js";
import type { Store } from "../../store/index.js";
import type { RunDoc, RunVia, UserRefDoc } from "../../store/types.js";

/** The run CANCELLED by `by`; FAILED_PRECONDITION once it is finished. */
export async function cancelAs(
  deps: { store: Store; events: Pick<EventEmitter, "emit">; logger: Pick<Logger, "warn"> },
  machine: RunStateMachine,
  by: UserRefDoc,
  run: RunDoc,
  via: RunVia,
): Promise<RunDoc> {
  for (let attempt = 0; attempt < 20; attempt++) {
    if (isFinished(run.state)) throw fail.precondition(`run ${run._id} is already finished (${run.state})`);
    // Attributed to the run's user like every entry of the run; the canceller is in details.
    const step = run.stepIndex < run.steps.length ? run.stepIndex : null;
    const entry = await runEntry(deps.store, run, "workflow.run.cancelled", { cancelledBy: by, step }, via);
    const done = await machine.cancel(run, `cancelled by ${by.email}`, [entry]);
    if (done) {
      deps.events.emit(RUN_CANCELLED, done._id);
      deps.events.emit(RUN_CHANGED, done._id);
      await putEntries(deps.store, done._id, [entry]);
      return done;
    }
    releaseEntries(deps.store, [entry], deps.logger);
    const fresh = await deps.store.runs.get(run._id);
    if (!fresh) throw fail.notFound(`run ${run._id} not found`);
    run = fresh;
  }
  throw fail.aborted("the run kept changing; try again");
}
