// Inserts runs exactly as TriggerService stores them (newRunDoc: QUEUED, steps pre-filled),
// without going through the webhook, waits for runs to reach a state, and reads them over gRPC.
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { GetRunRequestSchema, GetRunResponseSchema, type GetRunResponse } from "../../gen/runhook/v1/run_pb.js";
import { storeFixtures, type Store } from "../../src/store/index.js";
import { newRunDoc } from "../../src/domain/runs/model.js";
import { latestActive } from "../../src/domain/runs/start.js";
import { sleep } from "../../src/lib/sleep.js";
import type { RunDoc, RunState, StepDoc } from "../../src/store/types.js";
import type { World } from "../../fixtures/world.js";

export interface QueueOpts {
  /** Acting user (default: world.user). */
  userId?: string;
  userEmail?: string;
  tokenId?: string;
  workflowId?: string;
  /** Default: the latest active version of the workflow. */
  workflowVersion?: number;
  via?: "webhook" | "grpc";
  createdAt?: Date;
  /** Use this version instead of reading it from the workflow (e.g. one that does not exist). */
  version?: { version: number; steps: StepDoc[] };
}

export async function queueRun(
  store: Store,
  world: Pick<World, "workflowId" | "collection" | "user">,
  recordId: string,
  opts: QueueOpts = {},
): Promise<RunDoc> {
  const workflowId = opts.workflowId ?? world.workflowId;
  const wf = await store.directory.workflows.get(workflowId);
  if (!wf) throw new Error(`no workflow ${workflowId}`);
  const stored = opts.workflowVersion !== undefined ? wf.versions.find((v) => v.version === opts.workflowVersion) : latestActive(wf.versions);
  const version = opts.version ?? (stored && { version: stored.version, steps: (await store.immutable.workflowSteps(workflowId, stored)) ?? [] });
  if (!version) throw new Error("no such (active) workflow version");
  const collection = await store.directory.collections.get(wf.collectionId);
  const now = opts.createdAt ?? new Date();
  const run = newRunDoc({
    workflowId,
    workflowVersion: version.version,
    steps: version.steps,
    renderingId: wf.renderingId,
    organizationId: (await store.directory.projects.get(wf.projectId))!.organizationId,
    projectId: wf.projectId,
    environmentId: wf.environmentId,
    collectionId: wf.collectionId,
    collection: collection?.name ?? world.collection,
    recordId,
    userId: opts.userId ?? world.user._id,
    userEmail: opts.userEmail ?? world.user.email,
    tokenId: opts.tokenId ?? randomUUID(),
    via: opts.via ?? "webhook",
    createdAt: now,
  });
  // A plain insert, so that a second ongoing run on the record fails with the unique index's error.
  await storeFixtures(store).insertRuns([run]);
  return run;
}

export const FINISHED: RunState[] = ["SUCCEEDED", "FAILED", "CANCELLED"];

/** Polls until the run satisfies `pred` (default: finished); throws after `timeoutMs`. */
export async function waitForRun(
  store: Store,
  runId: string,
  pred: (r: RunDoc) => boolean = (r) => FINISHED.includes(r.state),
  timeoutMs = 15_000,
): Promise<RunDoc> {
  const end = Date.now() + timeoutMs;
  let last: RunDoc | null = null;
  while (Date.now() < end) {
    last = await store.runs.get(runId);
    if (last && pred(last)) return last;
    await sleep(25);
  }
  throw new Error(`run ${runId} did not reach the expected state in ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
}

/** RunService.GetRun over native gRPC (@grpc/grpc-js), as the holder of `token`. */
export function grpcGetRun(addr: string, token: string, req: { runId: string; waitSeconds?: number; knownVersion?: bigint }): Promise<GetRunResponse> {
  const client = new grpc.Client(addr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return new Promise<GetRunResponse>((resolve, reject) =>
    client.makeUnaryRequest(
      "/runhook.v1.RunService/GetRun",
      (m: typeof req) => Buffer.from(toBinary(GetRunRequestSchema, create(GetRunRequestSchema, m))),
      (b: Buffer) => fromBinary(GetRunResponseSchema, b),
      req,
      md,
      (err, value) => (err ? reject(err) : resolve(value!)),
    ),
  ).finally(() => client.close());
}
