// Every index, in one place, created at start-up: each query runhook makes has one here.
import type { Database } from "./connection.js";

/** How often the fallback sweeps delete what a TTL index would (see sweepExpired). */
export const SWEEP_EVERY_MS = 60_000;

export async function ensureIndexes(d: Database): Promise<void> {
  await Promise.all([
    d.organizations.createIndex({ name: 1 }, { unique: true }),
    d.users.createIndex({ email: 1 }, { unique: true }),
    d.projects.createIndex({ organizationId: 1, name: 1 }, { unique: true }),
    d.projectRoles.createIndex({ projectId: 1, userId: 1 }, { unique: true }),
    d.environments.createIndex({ projectId: 1, name: 1 }, { unique: true }),
    // No two environments (of one tenant or two) ever share a data database.
    d.environments.createIndex({ dataDatabase: 1 }, { unique: true }),
    d.teams.createIndex({ projectId: 1, name: 1 }, { unique: true }),
    d.renderings.createIndex({ teamId: 1, environmentId: 1 }, { unique: true }),
    d.collections.createIndex({ environmentId: 1, name: 1 }, { unique: true }),
    d.workflows.createIndex({ renderingId: 1, name: 1 }),
    d.appTokens.createIndex({ hash: 1 }, { unique: true }),
    d.apiTokens.createIndex({ hash: 1 }, { unique: true }),
    // One ongoing run per (workflow, record): activeKey is `${workflowId}|${recordId}` while
    // the run is ongoing and the run's own id once it is finished. The 409 answer finds the
    // ongoing run by it.
    d.runs.createIndex({ activeKey: 1 }, { unique: true }),
    // Claiming: RUNNING runs whose lease expired, parked runs that are due, then QUEUED runs
    // project by project (round-robin), oldest first. Queue metrics: the oldest QUEUED run.
    d.runs.createIndex({ state: 1, "lease.expiresAt": 1 }),
    d.runs.createIndex({ state: 1, waitUntil: 1 }),
    d.runs.createIndex({ state: 1, projectId: 1, createdAt: 1 }),
    d.runs.createIndex({ state: 1, createdAt: 1 }),
    // Logs: unfiltered pages are `_id` (stream key) lookups and ranges; filtered pages, time
    // ranges and the export are scope + filter + the list order `seq`.
    d.activityLogs.createIndex({ environmentId: 1, seq: 1 }),
    d.activityLogs.createIndex({ runId: 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, action: 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, "user.id": 1, seq: 1 }),
    d.activityLogs.createIndex({ environmentId: 1, collection: 1, recordId: 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, seq: 1 }),
    d.adminLogs.createIndex({ projectId: 1, action: 1, seq: 1 }),
    d.notes.createIndex({ environmentId: 1, seq: 1 }),
    d.notes.createIndex({ environmentId: 1, collection: 1, recordId: 1, seq: 1 }),
    d.notes.createIndex({ seq: 1 }, { unique: true }),
    // MongoDB removes finished rate-limit windows itself; sweepExpired does it on servers
    // that accept the TTL index but never apply it (the embedded mongo-java-server).
    d.rateLimits.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 }),
  ]);
}

/** The fallback for the TTL index: deletes rate-limit windows that have ended. */
export async function sweepExpired(d: Database, now = new Date()): Promise<void> {
  await d.rateLimits.deleteMany({ expiresAt: { $lt: now } });
}
