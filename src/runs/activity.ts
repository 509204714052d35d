// Activity log entries about a run: attributed to the run's user (the token's user).
import type { Database } from "../db/mongo.js";
import type { ActivityLogDoc, RunDoc } from "../db/types.js";
import { writeActivity } from "../logs/writer.js";

export async function environmentName(db: Database, environmentId: string): Promise<string> {
  const env = await db.environments.findOne({ _id: environmentId }, { projection: { name: 1 } });
  return env?.name ?? "";
}

export async function writeRunActivity(
  db: Database,
  run: RunDoc,
  action: string,
  details: Record<string, unknown>,
  via: ActivityLogDoc["via"] = "workflow",
): Promise<void> {
  await writeActivity(db, {
    projectId: run.projectId,
    environmentId: run.environmentId,
    environment: await environmentName(db, run.environmentId),
    rendering: run.renderingId,
    user: { id: run.userId, email: run.userEmail },
    action,
    via,
    collection: run.collection,
    recordId: run.recordId,
    runId: run._id,
    details,
  });
}
