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
