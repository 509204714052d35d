// TriggerService and the one trigger function that the webhook route and the RPC share.
// The checks run in exactly the order of CONTRACT §2; the first that fails answers.
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { OngoingRunSchema, TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import { assertMayTrigger } from "../auth/access.js";
import { authenticateApp } from "../auth/tokens.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { RunDoc, WorkflowVersionDoc } from "../db/types.js";
import { authorization, viaOf, type Deps } from "../deps.js";
import { fail, ONGOING_RUN_ID } from "../errors.js";
import { writeActivity } from "../logs/writer.js";
import { hit } from "../ratelimit.js";
import { enqueueRun, findOngoingRunId, noteActiveRun } from "../runs/queue.js";
import { keyOfUrl, verifyWebhookKey } from "./keys.js";
import { activeKeyOf, newRunDoc } from "../runs/model.js";

/** The request body as the route parsed it: the record id, or why the body is unusable. */
export type TriggerBody = { recordId: unknown } | { bodyError: string };

export interface TriggerInput {
  key: string;
  authorization: string | null | undefined;
  body: TriggerBody;
  via: "webhook" | "grpc";
}

/** Parses a raw webhook body: a JSON object with a non-empty string `record_id` (other fields ignored). */
export function parseWebhookBody(raw: string | undefined): TriggerBody {
  if (raw === undefined || raw.trim() === "") return { bodyError: "the body must be a JSON object with record_id" };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { bodyError: "the body is not valid JSON" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { bodyError: "the body must be a JSON object" };
  if (!Object.prototype.hasOwnProperty.call(value, "record_id")) return { bodyError: "record_id is required" };
  return { recordId: (value as Record<string, unknown>).record_id };
}

/** The latest active version, or undefined. */
export function latestActive(versions: WorkflowVersionDoc[]): WorkflowVersionDoc | undefined {
  let best: WorkflowVersionDoc | undefined;
  for (const v of versions) if (v.active && (!best || v.version > best.version)) best = v;
  return best;
}

function ongoingError(runId: string): ConnectError {
  return new ConnectError("a run of this workflow is already ongoing on this record", Code.AlreadyExists, { [ONGOING_RUN_ID]: runId }, [
    { desc: OngoingRunSchema, value: { runId } },
  ]);
}

/** Creates and queues a run (CONTRACT §2), returning its id; throws ConnectErrors for every refusal. */
export async function triggerRun(deps: Deps, input: TriggerInput): Promise<{ runId: string }> {
  const { db } = deps;
  // 1. The key: well-formed and signed.
  const key = verifyWebhookKey(deps.config, input.key);
  if (!key) throw fail.invalid("malformed or tampered webhook URL");

  // The workflow is read while the token is checked (a read changes nothing); failures are
  // still reported in the contract's order: the token's first.
  const workflowRead = db.workflows.findOne({ _id: key.workflowId });
  workflowRead.catch(() => {}); // awaited below unless the token check throws first

  // 2. The token.
  const principal = await authenticateApp(db, input.authorization);

  // 3. The webhook: known, current generation, enabled, with an active version.
  const workflow = await workflowRead;
  if (!workflow || workflow.renderingId !== key.renderingId || !workflow.webhook.everEnabled) throw fail.notFound("unknown webhook");
  if (key.generation < workflow.webhook.generation) throw fail.invalid("this webhook URL was superseded by a regenerated one");
  if (key.generation > workflow.webhook.generation) throw fail.notFound("unknown webhook");
  if (!workflow.webhook.enabled) throw fail.notFound("the webhook trigger is disabled");
  const version = latestActive(workflow.versions);
  if (!version) throw fail.notFound("no active workflow version for the rendering");
  const [rendering, project, environment, collection] = await Promise.all([
    db.renderings.findOne({ _id: workflow.renderingId }),
    db.projects.findOne({ _id: workflow.projectId }),
    db.environments.findOne({ _id: workflow.environmentId }),
    db.collections.findOne({ _id: workflow.collectionId }),
  ]);
  if (!rendering || !project || !environment || !collection) throw fail.notFound("unknown webhook");

  // 4. The token's user may trigger this workflow.
  await assertMayTrigger(db, principal.user, principal.token, project, rendering, workflow);

  // 5. The webhook's rate limit.
  const rate = await hit(db, `webhook:${workflow._id}`, workflow.webhook.rateLimitPerMinute);
  if (!rate.allowed) throw fail.throttled(rate.retryAfter, `rate limit of ${rate.limit} requests per minute exceeded for this webhook`);

  // 6. The body.
  if ("bodyError" in input.body) throw fail.invalid(input.body.bodyError);
  const recordId = input.body.recordId;
  if (recordId === undefined || recordId === null) throw fail.invalid("record_id is required");
  if (typeof recordId !== "string") throw fail.invalid("record_id must be a string");
  if (recordId === "") throw fail.invalid("record_id must not be empty");
  if (recordId.length > 1024) throw fail.invalid("record_id is longer than 1024 characters");

  // 7–8. One ongoing run per (workflow, record), by the unique index on activeKey. The
  // ongoing run of a 409 is found through the active_runs hint, by primary key (runs/queue.ts).
  const activeKey = activeKeyOf(workflow._id, recordId);
  let run: RunDoc | undefined;
  for (let attempt = 0; !run; attempt++) {
    const doc = newRunDoc({
      workflowId: workflow._id,
      workflowVersion: version.version,
      steps: version.steps,
      renderingId: rendering._id,
      projectId: project._id,
      environmentId: environment._id,
      collectionId: collection._id,
      collection: collection.name,
      recordId,
      userId: principal.user._id,
      userEmail: principal.user.email,
      tokenId: principal.token._id,
      via: input.via,
    });
    try {
      await db.runs.insertOne(doc);
      run = doc;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const ongoing = await findOngoingRunId(db, activeKey);
      if (ongoing) throw ongoingError(ongoing);
      // The ongoing run finished between the insert and the read: try again.
      if (attempt >= 2) throw new ConnectError("the record's run changed state concurrently; retry", Code.Aborted);
    }
  }

  // The triggered entry goes into the activity log before the run is queued for executors
  // (so no executor can log the run's outcome ahead of it), next to the 409 hint. All of
  // these follow the stored run: a failure here is logged, never turned into an error.
  const stored = run;
  await Promise.all([
    noteActiveRun(db, activeKey, stored._id).catch((err: unknown) => deps.logger.warn({ err, runId: stored._id }, "could not record the ongoing run hint")),
    writeActivity(db, {
      projectId: project._id,
      environmentId: environment._id,
      environment: environment.name,
      rendering: rendering._id,
      user: { id: principal.user._id, email: principal.user.email },
      action: "workflow.run.triggered",
      via: input.via,
      collection: collection.name,
      recordId,
      runId: run._id,
      details: { workflowId: workflow._id, workflowVersion: version.version, workflowName: workflow.name },
    }).catch((err: unknown) => deps.logger.error({ err, runId: stored._id }, "could not write the workflow.run.triggered activity entry")),
  ]);
  // Without its queue entry the executors' sweep still finds the run.
  await enqueueRun(db, stored._id, stored.createdAt).catch((err: unknown) => deps.logger.warn({ err, runId: stored._id }, "could not queue the run (the executors' sweep will)"));
  deps.events.emit("run.queued", run._id);
  return { runId: run._id };
}

export function createTriggerService(deps: Deps): ServiceImpl<typeof TriggerService> {
  return {
    async triggerRun(req, ctx) {
      return triggerRun(deps, {
        key: keyOfUrl(req.webhookUrl),
        authorization: authorization(ctx),
        body: { recordId: req.recordId },
        via: viaOf(ctx) === "webhook" ? "webhook" : "grpc",
      });
    },
  };
}
