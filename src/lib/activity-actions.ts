// The actions runhook writes to an environment's activity log: the one list the log's action
// filter is checked against (services/logs.ts), the public API's mapping covers
// (http/published.ts) and the console offers as its action picker. The console bundles this
// file (http/console-assets.ts), so it imports nothing.

export const RUNHOOK_ACTIVITY_ACTIONS = [
  "workflow.run.triggered",
  "workflow.run.succeeded",
  "workflow.run.failed",
  "workflow.run.cancelled",
  "record.updated",
  "note.created",
  "note.message.created",
  "note.updated",
  "note.deleted",
] as const;

export type RunhookActivityAction = (typeof RUNHOOK_ACTIVITY_ACTIONS)[number];

export const isRunhookActivityAction = (a: string): a is RunhookActivityAction => (RUNHOOK_ACTIVITY_ACTIONS as readonly string[]).includes(a);
