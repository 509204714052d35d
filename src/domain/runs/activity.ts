// Activity log entries about a run: attributed to the run's user (the token's user).
import type { Store } from "../../store/index.js";
import type { ActivityLogDoc, RunDoc } from "../../store/types.js";

export async function writeRunActivity(
  store: Store,
  run: RunDoc,
  action: string,
  details: Record<string, unknown>,
  via: ActivityLogDoc["via"] = "workflow",
): Promise<void> {
  const env = await store.immutable.environment(run.environmentId);
  await store.logs.appendActivity({
    projectId: run.projectId,
    environmentId: run.environmentId,
    environment: env?.name ?? "",
    rendering: run.renderingId,
    user: { id: run.userId, email: run.userEmail },
    action,
    via,
    collection: run.collection,
    recordId: run.recordId,
    runId: run._id,
    workflowId: run.workflowId,
    details,
  });
}

/**
 * The entry of the run's current data step (`details.step`, 1-based), once: an attempt that runs
 * the step again after a crash (its effect is found again, not made twice) writes it only if the
 * cut-off attempt did not.
 */
export async function writeStepActivity(store: Store, run: RunDoc, action: string, details: Record<string, unknown> & { step: number }): Promise<void> {
  const attempts = run.steps[run.stepIndex]?.attempts ?? 1;
  if (attempts > 1 && (await store.logs.hasStepEntry(run._id, action, details.step))) return;
  await writeRunActivity(store, run, action, details);
}
