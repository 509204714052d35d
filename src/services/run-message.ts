// A run document as RunService (and the /v1 runs routes through it) shows it.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { RunSchema } from "../../gen/runhook/v1/run_pb.js";
import type { RunDoc } from "../store/types.js";

function ts(d: Date | null | undefined) {
  return d ? timestampFromDate(d) : undefined;
}

/** JSON-safe copy of a step output (dates become RFC 3339 strings). */
function jsonOutput(o: Record<string, unknown> | null): JsonObject | undefined {
  return o ? (JSON.parse(JSON.stringify(o)) as JsonObject) : undefined;
}

/**
 * The run; `workflowName` its workflow's name now ("" once the workflow is gone); `retries`
 * (GetRun and WatchRun read them) are the runs that retry it.
 */
export function runMessage(r: RunDoc, workflowName: string, retries: string[] = []): MessageInitShape<typeof RunSchema> {
  return {
    id: r._id,
    workflowId: r.workflowId,
    workflowName,
    workflowVersion: r.workflowVersion,
    renderingId: r.renderingId,
    projectId: r.projectId,
    environmentId: r.environmentId,
    collection: r.collection,
    recordId: r.recordId,
    user: { id: r.userId, email: r.userEmail },
    via: r.via,
    state: r.state,
    steps: r.steps.map((s, index) => ({
      index,
      type: s.type,
      state: s.state,
      startedAt: ts(s.startedAt),
      finishedAt: ts(s.finishedAt),
      error: s.error,
      output: jsonOutput(s.output),
      doneInRunId: s.doneInRunId ?? "",
    })),
    error: r.error,
    createdAt: ts(r.createdAt),
    startedAt: ts(r.startedAt),
    finishedAt: ts(r.finishedAt),
    updatedAt: ts(r.updatedAt),
    version: BigInt(r.version),
    requestId: r.requestId ?? "",
    tokenId: r.tokenId,
    waitUntil: ts(r.waitUntil),
    retryOf: r.retryOf ?? "",
    retries,
    batchId: r.batchId ?? "",
  };
}
