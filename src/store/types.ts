// Shapes of the documents runhook stores. Ids are UUID strings unless noted.

/** The roles a project membership can hold (the rules about them live in domain/auth/). */
export const ROLES = ["admin", "editor", "user"] as const;
export type Role = (typeof ROLES)[number];

export interface OrganizationDoc {
  _id: string;
  name: string;
  createdAt: Date;
}
export interface UserDoc {
  _id: string;
  organizationId: string;
  /**
   * The user's number in the organization (1, 2, …, never reused): the integer id the public
   * REST API gives users. Absent on users stored before runhook numbered them, until the start
   * that numbers them (domain/auth/user-numbers.ts).
   */
  number?: number;
  email: string;
  name: string;
  organizationAdmin: boolean;
  createdAt: Date;
}
export interface ProjectDoc {
  _id: string;
  organizationId: string;
  name: string;
  requiresSso: boolean;
  createdAt: Date;
}
/** One document per (project, user): the user's role on the project. _id = `${projectId}:${userId}`. */
export interface ProjectRoleDoc {
  _id: string;
  projectId: string;
  userId: string;
  role: Role;
}
export interface EnvironmentDoc {
  _id: string;
  projectId: string;
  name: string;
  dataDatabase: string;
  createdAt: Date;
}
export interface TeamDoc {
  _id: string;
  projectId: string;
  name: string;
  memberIds: string[];
  createdAt: Date;
}
export interface RenderingDoc {
  _id: string;
  projectId: string;
  teamId: string;
  environmentId: string;
  createdAt: Date;
}
export interface CollectionDoc {
  _id: string;
  environmentId: string;
  name: string;
  primaryKey: string[];
  createdAt: Date;
}
/** _id = `${renderingId}:${collectionId}` */
export interface PermissionDoc {
  _id: string;
  renderingId: string;
  collectionId: string;
  readRoles: Role[];
  editRoles: Role[];
  scope: Record<string, unknown>;
}

export type StepDoc =
  | { type: "load_record" }
  | { type: "update_record"; set: Record<string, unknown> }
  | { type: "add_note"; content: string; title: string }
  | { type: "wait"; seconds: number };

/**
 * A version as its workflow lists it: a summary, its steps in a document of their own
 * (WorkflowStepsDoc), so that a workflow stays small however long its history.
 */
export interface WorkflowVersionDoc {
  version: number;
  active: boolean;
  publishedAt: Date;
  /**
   * The WorkflowStepsDoc of its steps. Absent on versions stored with their steps inside the
   * workflow document, as runhook stored them before: store/immutable.ts reads both.
   */
  stepsId?: string;
  /** Its steps' size as JSON (what the workflow's total is counted in); absent on those versions too. */
  bytes?: number;
}
/** A version with its steps: what a trigger starts and an executor runs (and how versions were once stored). */
export interface WorkflowVersionWithSteps extends WorkflowVersionDoc {
  steps: StepDoc[];
}
/** A version's steps: written before the version that names them, never changed. */
export interface WorkflowStepsDoc {
  _id: string;
  workflowId: string;
  steps: StepDoc[];
  /** As JSON. */
  bytes: number;
  createdAt: Date;
}
export interface WebhookDoc {
  enabled: boolean;
  generation: number;
  rateLimitPerMinute: number;
  everEnabled: boolean;
}
export interface WorkflowDoc {
  _id: string;
  projectId: string;
  environmentId: string;
  renderingId: string;
  collectionId: string;
  name: string;
  triggerRoles: Role[];
  versions: WorkflowVersionDoc[];
  webhook: WebhookDoc;
  createdAt: Date;
}

export interface TokenDocBase {
  _id: string;
  /** sha256 of the plaintext, hex. The plaintext is never stored. */
  hash: string;
  userId: string;
  name: string;
  expiresAt: Date;
  revokedAt: Date | null;
  createdAt: Date;
  /** When it last authenticated a call, to the minute (last-used.ts); absent until then. */
  lastUsedAt?: Date;
}
export interface AppTokenDoc extends TokenDocBase {
  sso: boolean;
}
export interface ApiTokenDoc extends TokenDocBase {
  projectId: string;
  /**
   * Whether it was generated in an SSO session (the creator's token was an SSO token). Absent on
   * tokens made before runhook recorded it, which count as not: a project that requires SSO
   * refuses them (domain/auth/access.ts, assertApiTokenMayAct).
   */
  sso?: boolean;
  /**
   * With `sso`: the SSO token of the session that made it, whose expiry it never outlives
   * (domain/auth/sso-tokens.ts); "" where that token could no longer be found. Absent (null to
   * a query) on tokens made before runhook recorded it, until the start that binds them.
   */
  ssoTokenId?: string;
}
/** An organization API token: reads its organization's own admin log (stream `m:org:<organizationId>`) over /v1, nothing else. */
export interface OrgApiTokenDoc extends TokenDocBase {
  organizationId: string;
}

/**
 * A console sign-in: the browser holds its secret in an HttpOnly cookie, and each call acts as
 * the application token it was opened with, for as long as that token is usable (a revoked
 * token ends its sessions) and at most until `expiresAt`.
 */
export interface ConsoleSessionDoc {
  _id: string;
  /** sha256 of the cookie's value, hex. The value itself is never stored. */
  hash: string;
  tokenId: string;
  userId: string;
  createdAt: Date;
  expiresAt: Date;
}

export type RunState = "QUEUED" | "RUNNING" | "SUCCEEDED" | "FAILED" | "CANCELLED";
export const ONGOING_STATES: RunState[] = ["QUEUED", "RUNNING"];
export type StepState = "PENDING" | "RUNNING" | "SUCCEEDED" | "FAILED" | "CANCELLED" | "SKIPPED";

export interface StepResultDoc {
  type: StepDoc["type"];
  state: StepState;
  startedAt: Date | null;
  finishedAt: Date | null;
  error: string;
  output: Record<string, unknown> | null;
  /** How many times an executor started this step (set by executors; absent until then). */
  attempts?: number;
  /** The executor that last started this step. */
  executor?: string;
  /** A SKIPPED step (a retry from the failed step): the run in which it ran and succeeded. */
  doneInRunId?: string;
}

/** How a run was started: the webhook route, gRPC or Connect, the /v1 REST routes, or the console. */
export type RunVia = "webhook" | "grpc" | "api" | "console";

export interface RunDoc {
  _id: string;
  /**
   * `${workflowId}|${recordId}` while the run is ongoing, `${finishedAt}|${runId}` once finished:
   * the unique index on it allows one ongoing run per (workflow, record).
   */
  activeKey: string;
  workflowId: string;
  workflowVersion: number;
  renderingId: string;
  /** The project's organization (absent on runs stored before executors shared by organization). */
  organizationId?: string;
  projectId: string;
  environmentId: string;
  collectionId: string;
  collection: string;
  recordId: string;
  userId: string;
  userEmail: string;
  tokenId: string;
  via: RunVia;
  /** The run this one retries (RetryRun, a retry batch). */
  retryOf?: string;
  /** The batch that started this run. */
  batchId?: string;
  /** The request id of the call that created the run (absent on runs stored before it was kept). */
  requestId?: string;
  state: RunState;
  steps: StepResultDoc[];
  /** Index of the step to run next. */
  stepIndex: number;
  error: string;
  lease: { owner: string; expiresAt: Date } | null;
  /**
   * Set while the run is parked on a wait step (RUNNING, no lease): when it is due. Claimers
   * take it then (absent on runs stored before parking existed).
   */
  waitUntil?: Date | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  updatedAt: Date;
  version: number;
  /**
   * The activity entries the run's latest changes imply, written in the same update as the change
   * and kept until they are in the log (domain/runs/activity.ts): a change and its entry are one fact.
   */
  pendingLog?: PendingLogEntry[];
}

/** An activity entry at its reserved position (`key`: the stream key of `seq`, store/logs.ts), not yet known to be in the log. */
export interface PendingLogEntry {
  key: string;
  seq: number;
  /** The entry's time, taken with its number (store/counters.ts). */
  micros: number;
  entry: Omit<ActivityLogDoc, "_id" | "seq" | "timestamp" | "micros" | "tomb">;
}

export interface UserRefDoc {
  id: string;
  email: string;
}

/**
 * One entry of an environment's activity log (stream `a:<environmentId>`, see
 * store/logs.ts). `_id` is `<stream>:<seq zero-padded to 12 digits>`; `seq` is the
 * list order within the stream.
 */
export interface ActivityLogDoc {
  _id: string;
  seq: number;
  /** Placeholder left by a reader for a sequence number that was never written (null scope fields). */
  tomb?: true;
  /** The entry's time to the millisecond (what retention and the time index read). */
  timestamp: Date;
  /**
   * Its time in microseconds since the epoch, unique within the stream and rising with `seq`
   * (timestamp is its millisecond). Absent on entries written before runhook kept it: their
   * time is `timestamp`, which several may share.
   */
  micros?: number;
  projectId: string;
  environmentId: string;
  environment: string;
  rendering: string | null;
  user: UserRefDoc;
  action: string;
  via: RunVia | "workflow";
  collection: string | null;
  recordId: string | null;
  runId: string | null;
  /** The run's workflow (absent on entries about no run, and on run entries written before runhook kept it). */
  workflowId?: string;
  details: Record<string, unknown>;
}

/** One entry of a project's admin log (stream `m:<projectId>`, or `m:org:<organizationId>` without a project). */
export interface AdminLogDoc {
  _id: string;
  seq: number;
  tomb?: true;
  timestamp: Date;
  /** As ActivityLogDoc's. */
  micros?: number;
  organizationId: string;
  projectId: string | null;
  environment: string | null;
  actor: UserRefDoc;
  action: string;
  target: string;
  details: Record<string, unknown>;
}

export interface NoteMessageDoc {
  id: string;
  content: string;
  user: UserRefDoc;
  createdAt: Date;
}
export interface NoteDoc {
  _id: string;
  /** Creation order, for stable paging. */
  seq: number;
  projectId: string;
  environmentId: string;
  collection: string;
  recordId: string;
  title: string;
  user: UserRefDoc;
  /** The rendering (so the team) it was written in: a run's; null or absent when written through the API. */
  renderingId?: string | null;
  messages: NoteMessageDoc[];
  createdAt: Date;
  updatedAt: Date;
  archivedAt: Date | null;
}

/**
 * A signed digest of a stretch of one log stream (`_id` = the stream key of its first
 * position, so that two processes never store two digests starting at one position).
 * domain/logs/digest-format.ts has the rules.
 */
export interface LogDigestDoc {
  _id: string;
  stream: string;
  from: number;
  to: number;
  /** The signed text: the canonical JSON of the digest's payload. */
  payload: string;
  signature: string;
  /** The hash of the signed text, which the stream's next digest names as `previous`. */
  digest: string;
  /** The positions of the range that hold no entry (tombstones), ascending. */
  empty: number[];
  /** The hashes of the range's entries, by position: 32 bytes each, concatenated, base64. */
  hashes: string;
  createdAt: Date;
  /** The time of the range's first entry (or of the digest, if it has none): retention removes the digest with that entry. */
  timestamp: Date;
}

export interface CounterDoc {
  _id: string;
  seq: number;
  /**
   * A log stream's counter: number n's time is n + lead microseconds (store/group-commit.ts), so
   * that every entry's time is its own and rises with its number.
   */
  lead?: number;
}
/**
 * An organization's directory version (`_id: "org:<id>"`, or `"directory"` for every
 * organization): raised by every change of a document that grants or revokes access (a token, a
 * role, a team's members, a workflow, a project…), so that a cache of those documents knows
 * whether it is still exact. `pending` holds the changes under way (written before the
 * change, removed with the raise after it): while one is, nothing is served from a cache.
 */
export interface DirectoryVersionDoc {
  _id: string;
  version: number;
  pending: { id: string; at: Date }[];
}
/** A fixed-window rate-limit counter, `_id` = `${bucket}:${windowStart}`; removed once `expiresAt` has passed. */
export interface RateLimitDoc {
  _id: string;
  count: number;
  expiresAt: Date;
}
/**
 * An idempotency key of trigger calls, reserved by the first call that used it: `_id` names the
 * (workflow, token user, key), `runId` the run that call starts (chosen before the run is
 * stored, so a repeat finds it), `requestHash` what that call asked for. Removed once
 * `expiresAt` has passed.
 */
export interface IdempotencyKeyDoc {
  _id: string;
  runId: string;
  requestHash: string;
  reservedAt: Date;
  expiresAt: Date;
}

/** A run batch's action. */
export type RunBatchAction = "retry" | "cancel";
export type RunBatchState = "RUNNING" | "SUCCEEDED" | "CANCELLED" | "FAILED";
/** What the batch did with one run. */
export type RunBatchOutcome = "done" | "skipped" | "failed";

/** A batch's run filter, as CreateRunBatch took it (ListRuns' filter). */
export interface RunBatchFilterDoc {
  workflowId: string;
  /** The workflow name asked for (absent on batches made before the filter took one). */
  workflowName?: string;
  /** The workflows the name named when the batch was created (null: no name). */
  namedWorkflowIds?: string[] | null;
  collection: string;
  recordId: string;
  states: string[];
  via: string;
  userId: string;
  finishedFrom: Date | null;
  finishedTo: Date | null;
}

/** The skipped (or failed) runs of one reason: how many, and the first few. */
export interface RunBatchReasonDoc {
  outcome: "skipped" | "failed";
  reason: string;
  count: number;
  runIds: string[];
}

/**
 * A run batch (store/run-batches.ts): an action on the runs a filter matches, worked through in
 * the background under a lease like a run's. `cursor` is the last run handled in the walk's
 * order (createdAt, _id); the counters and reasons move with it in one update.
 */
export interface RunBatchDoc {
  _id: string;
  organizationId: string;
  projectId: string;
  environmentId: string;
  action: RunBatchAction;
  filter: RunBatchFilterDoc;
  /** The workflows whose runs its creator saw when it was created (null: every one, an admin). */
  seenWorkflowIds: string[] | null;
  /** Only these runs among those the filter matches (empty: all of them). */
  runIds: string[];
  createdFrom: Date | null;
  /** Only runs created before this: never after the batch itself, so it never meets its own retries. */
  createdTo: Date;
  fromFailedStep: boolean;
  dryRun: boolean;
  state: RunBatchState;
  createdBy: UserRefDoc;
  /** The application token it was created with: its runs are started as that token's. */
  tokenId: string;
  via: string;
  matched: number;
  done: number;
  skipped: number;
  failed: number;
  /** By a hash of outcome and reason. */
  reasons: Record<string, RunBatchReasonDoc>;
  error: string;
  cursor: { createdAt: Date; id: string } | null;
  lease: { owner: string; expiresAt: Date } | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/**
 * What a batch did with one run (`_id` = `${batchId}:${runId}`), stored before the batch's
 * counters move: a batch that resumes reuses it instead of acting on the run again.
 */
export interface RunBatchItemDoc {
  _id: string;
  batchId: string;
  runId: string;
  outcome: RunBatchOutcome;
  /** The reason as the batch's reasons count it (skipped, failed). */
  reason: string;
  /** The reason with its details (the ongoing run's id…). */
  detail: string;
  /** The run a retry started. */
  newRunId: string | null;
  at: Date;
}
