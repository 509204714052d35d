// A trigger call (the webhook, or TriggerRun naming its URL): the webhook's own checks (its
// key, the token, the webhook), then the checks and the start every run shares (runs/start.ts).
import type { EventEmitter } from "node:events";
import type { Logger } from "pino";
import { authenticateApp } from "./auth/tokens.js";
import type { Config } from "../config.js";
import { fail } from "./errors.js";
import type { Metrics } from "../lib/metrics.js";
import { checkedRecordId } from "./runs/records.js";
import { admit, latestActive, readWorkflow, startAccepted, targetOf, type Accepted } from "./runs/start.js";
import type { Store } from "../store/index.js";
import { verifyWebhookKey } from "./webhook-keys.js";
import { checkIdempotencyKey, type Outcome } from "./idempotency.js";

/** What a run's start uses: the store, the webhook keys' secret, and where it reports what happened. */
export interface TriggerDeps {
  store: Store;
  config: Pick<Config, "signingKeys" | "idempotencyTtlMs" | "projectOngoingRunsLimit">;
  logger: Pick<Logger, "warn" | "error">;
  metrics: Pick<Metrics, "rateLimitRefusals" | "runsCreated">;
  /** Told RUN_QUEUED (runId) for each run stored: this instance's executors wake at once. */
  events: Pick<EventEmitter, "emit">;
}

/** The request body as the route parsed it: the record id, or why the body is unusable. */
export type TriggerBody = { recordId: unknown } | { bodyError: string };

export interface TriggerInput {
  key: string;
  authorization: string | null | undefined;
  body: TriggerBody;
  via: "webhook" | "grpc";
  /** The call's request id, stored on the run (logs of its executor carry it). */
  requestId?: string;
  /** The caller's idempotency key (Idempotency-Key header, TriggerRunRequest.idempotency_key); none: every call is a new one. */
  idempotencyKey?: string;
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
  if (!Object.hasOwn(value, "record_id")) return { bodyError: "record_id is required" };
  return { recordId: (value as Record<string, unknown>).record_id };
}

/**
 * Creates and queues a run, returning its id; throws DomainErrors for every refusal. The
 * checks run in the contract's order and the first that fails answers; independent reads are
 * started early, but a failure is only ever reported at its place in that order. A keyed call
 * is checked like any (authenticated, authorized, counted by the rate limit) before its key is.
 */
export async function triggerRun(deps: TriggerDeps, input: TriggerInput): Promise<Outcome> {
  const accepted = await checkTrigger(deps, input);
  const key = input.idempotencyKey === undefined ? undefined : { key: input.idempotencyKey };
  return startAccepted(deps, accepted, { via: input.via, requestId: input.requestId }, key);
}

/** Checks 1 to 6: the key, the token, the webhook, the permission, the rate limits, the body (and its idempotency key). */
async function checkTrigger(deps: TriggerDeps, input: TriggerInput): Promise<Accepted> {
  // One view for the whole check: one read of the organization's directory version, shared with the calls that arrive together.
  const directory = deps.store.directory.view();
  // 1. The key: well-formed and signed.
  const key = verifyWebhookKey(deps.config, input.key);
  if (!key) throw fail.invalid("malformed or tampered webhook URL");

  // 2. The token. Before anything of the workflow is read: a call with a made-up token reads (and
  // caches) nothing of the tenant's, however large its workflows.
  const principal = await authenticateApp(directory, input.authorization);

  // The workflow and what it names (its latest active version's steps among them: only those), read together.
  const read = readWorkflow(deps, directory, key.workflowId);

  // 3. The webhook: known, current generation, enabled, with an active version.
  const workflow = await read.workflow;
  if (!workflow || workflow.renderingId !== key.renderingId || !workflow.webhook.everEnabled) throw fail.notFound("unknown webhook");
  if (key.generation < workflow.webhook.generation) throw fail.invalid("this webhook URL was superseded by a regenerated one");
  if (key.generation > workflow.webhook.generation) throw fail.notFound("unknown webhook");
  if (!workflow.webhook.enabled) throw fail.notFound("the webhook trigger is disabled");
  if (!latestActive(workflow.versions)) throw fail.notFound("no active workflow version for the rendering");
  const target = targetOf(workflow, await read.related, "unknown webhook");
  const version = target.version!;

  // 4. The token's user may trigger this workflow. 5. The rate limits.
  await admit(deps, directory, principal, { ...target, version });

  // 6. The body, and the idempotency key beside it.
  const recordId = recordIdOfBody(input.body);
  if (input.idempotencyKey !== undefined) checkIdempotencyKey(input.idempotencyKey);
  return { ...target, version, principal, recordId };
}

/** The body's record id, or INVALID_ARGUMENT saying why it is unusable. */
function recordIdOfBody(body: TriggerBody): string {
  if ("bodyError" in body) throw fail.invalid(body.bodyError);
  return checkedRecordId(body.recordId, "record_id");
}
