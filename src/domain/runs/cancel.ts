// Cancelling an ongoing run (CancelRun, a cancel batch): one conditional update from the version
// read, retried while the run moves, then its activity entry.
import type { EventEmitter } from "node:events";
import { fail } from "../errors.js";
import { writeRunActivity } from "./activity.js";
import { isFinished, RUN_CANCELLED, RUN_CHANGED } from "./model.js";
import type { RunStateMachine } from "./state.js";
import type { Store } from "../../store/index.js";
import type { RunDoc, RunVia, UserRefDoc } from "../../store/types.js";

/** The run CANCELLED by `by`; FAILED_PRECONDITION once it is finished. */
export async function cancelAs(
  deps: { store: Store; events: Pick<EventEmitter, "emit"> },
  machine: RunStateMachine,
  by: UserRefDoc,
  run: RunDoc,
  via: RunVia,
): Promise<RunDoc> {
  for (let attempt = 0; attempt < 20; attempt++) {
    if (isFinished(run.state)) throw fail.precondition(`run ${run._id} is already finished (${run.state})`);
    const done = await machine.cancel(run, `cancelled by ${by.email}`);
    if (done) {
      deps.events.emit(RUN_CANCELLED, done._id);
      deps.events.emit(RUN_CHANGED, done._id);
      // Attributed to the run's user like every entry of the run; the canceller is in details.
      const step = run.stepIndex < run.steps.length ? run.stepIndex : null;
      await writeRunActivity(deps.store, done, "workflow.run.cancelled", { cancelledBy: by, step }, via);
      return done;
    }
    const fresh = await deps.store.runs.get(run._id);
    if (!fresh) throw fail.notFound(`run ${run._id} not found`);
    run = fresh;
  }
  throw fail.aborted("the run kept changing; try again");
}
