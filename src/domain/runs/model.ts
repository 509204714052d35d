// Run documents: a new run's shape, and the run state helpers shared by the service and the
// executors (the API's view of a run is built by services/runs.ts).
import { randomUUID } from "node:crypto";
import { ONGOING_STATES, type RunDoc, type RunState, type StepDoc } from "../../store/types.js";

export const FINISHED_STATES: RunState[] = ["SUCCEEDED", "FAILED", "CANCELLED"];
/** Every state of a run, in the order of its life. */
export const RUN_STATES: RunState[] = [...ONGOING_STATES, ...FINISHED_STATES];

export function isFinished(state: RunState): boolean {
  return FINISHED_STATES.includes(state);
}

/** In-process signals about runs (on deps.events). */
export const RUN_QUEUED = "run.queued";
/** A run changed on this instance (runId): followers re-read it at once. */
export const RUN_CHANGED = "run.changed";
/** A run was cancelled on this instance (runId): a local executor working on it stops at once. */
export const RUN_CANCELLED = "run.cancelled";

/** Longest `wait` step, in seconds (WaitStep in common.proto): checked when published and when run. */
export const MAX_WAIT_STEP_SECONDS = 86_400;

/** The value of `activeKey` while a run of `workflowId` on `recordId` is ongoing. */
export function activeKeyOf(workflowId: string, recordId: string): string {
  return `${workflowId}|${recordId}`;
}

/** What a new run is made from: the run's own fields, the version's steps, and an optional creation time. */
export type NewRun = Pick<
  RunDoc,
  | "workflowId"
  | "workflowVersion"
  | "renderingId"
  | "projectId"
  | "environmentId"
  | "collectionId"
  | "collection"
  | "recordId"
  | "userId"
  | "userEmail"
  | "tokenId"
  | "via"
  | "requestId"
> & {
  /** The project's organization (the executors' fair share is first between organizations). */
  organizationId: string;
  steps: StepDoc[];
  createdAt?: Date /** Chosen in advance (an idempotency key's reserved run), else a fresh UUID. */;
  id?: string;
  /** The run this one retries. */
  retryOf?: string;
  /** A retry from the failed step: where it starts, and the earlier steps' runs. */
  resumed?: Resumed;
  /** The batch that starts it. */
  batchId?: string;
};

/** A retry from the failed step: the step it starts at, and for each earlier step the run in which it ran. */
export interface Resumed {
  stepIndex: number;
  doneInRunIds: string[];
}

/** A new QUEUED run, every step PENDING (a retry from the failed step: the earlier ones SKIPPED): the one shape every start stores. */
export function newRunDoc(n: NewRun): RunDoc {
  const now = n.createdAt ?? new Date();
  return {
    _id: n.id ?? randomUUID(),
    activeKey: activeKeyOf(n.workflowId, n.recordId),
    workflowId: n.workflowId,
    workflowVersion: n.workflowVersion,
    renderingId: n.renderingId,
    organizationId: n.organizationId,
    projectId: n.projectId,
    environmentId: n.environmentId,
    collectionId: n.collectionId,
    collection: n.collection,
    recordId: n.recordId,
    userId: n.userId,
    userEmail: n.userEmail,
    tokenId: n.tokenId,
    via: n.via,
    ...(n.requestId ? { requestId: n.requestId } : {}),
    ...(n.retryOf ? { retryOf: n.retryOf } : {}),
    ...(n.batchId ? { batchId: n.batchId } : {}),
    state: "QUEUED",
    steps: n.steps.map((s, i) => {
      const doneInRunId = n.resumed?.doneInRunIds[i];
      if (doneInRunId) return { type: s.type, state: "SKIPPED", startedAt: null, finishedAt: null, error: "", output: null, doneInRunId };
      return { type: s.type, state: "PENDING", startedAt: null, finishedAt: null, error: "", output: null };
    }),
    stepIndex: n.resumed?.stepIndex ?? 0,
    error: "",
    lease: null,
    waitUntil: null,
    createdAt: now,
    startedAt: null,
    finishedAt: null,
    updatedAt: now,
    version: 1,
  };
}
