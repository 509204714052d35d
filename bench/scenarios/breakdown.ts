// Where a webhook accept's time goes: the same database operations the accept path makes
// (src/trigger/service.ts triggerRun, in order), issued one at a time with the raw driver on
// the webhook scenario's database right after its load, so each stage's cost is visible.
// Also asks the server how it plans the two range queries that grow with data
// (FerretDB's explain tells whether the filter was pushed down to SQLite).
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Database } from "../../src/db/mongo.js";
import { isDuplicateKey } from "../../src/db/mongo.js";
import { projectRoleId } from "../../src/auth/access.js";
import { activityStream, streamKey } from "../../src/logs/writer.js";
import type { BenchWorld } from "../lib/context.js";
import { round, summarize } from "../lib/load.js";
import { runDocLike } from "./webhook.js";

export interface Stage { stage: string; p50Ms: number | null; p99Ms: number | null }
export interface Breakdown {
  iterations: number;
  rateLimitSlotsInWindow: number;
  rateLimitDocs: number;
  stages: Stage[];
  sumP50Ms: number;
  explain: Record<string, unknown>;
}

export async function acceptBreakdown(db: Database, w: BenchWorld, iterations: number): Promise<Breakdown> {
  // rh_app_<32 hex id>_<secret>: the token document's _id is the id, as a UUID.
  const hex = /^rh_app_([0-9a-f]{32})_/.exec(w.userToken)![1]!;
  const tokenId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  const times = new Map<string, number[]>();
  const time = async <T>(stage: string, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const r = await fn();
    (times.get(stage) ?? times.set(stage, []).get(stage)!).push(performance.now() - t);
    return r;
  };
  const bucket = `webhook:${w.workflowId}`;
  const now = Date.now();
  const windowStart = now - (now % 60_000);
  const range = { _id: { $gte: `${bucket}:${windowStart}:`, $lt: `${bucket}:${windowStart};` } };
  const rateLimitSlotsInWindow = await db.rateLimits.countDocuments(range);
  const rateLimitDocs = await db.rateLimits.estimatedDocumentCount();
  for (let i = 0; i < iterations; i++) {
    // The token id is part of the plaintext: the service reads the token by _id and compares hashes.
    const token = await time("1 appTokens.findOne(_id)", () => db.appTokens.findOne({ _id: tokenId }));
    await time("2 users.findOne(_id)", () => db.users.findOne({ _id: token!.userId }));
    await time("3 workflows.findOne(_id)", () => db.workflows.findOne({ _id: w.workflowId }));
    await time("4 rendering+project+environment+collection (parallel)", () =>
      Promise.all([db.renderings.findOne({ _id: w.renderingId }), db.projects.findOne({ _id: w.projectId }), db.environments.findOne({ _id: w.environmentId }), db.collections.findOne({ _id: w.collectionId })]));
    await time("5 projectRoles + teams (parallel)", () => Promise.all([db.projectRoles.findOne({ _id: projectRoleId(w.projectId, w.user._id) }), db.teams.findOne({ _id: w.teamId }, { projection: { memberIds: 1 } })]));
    await time("6 rateLimits.insertOne(slot)", () => db.rateLimits.insertOne({ _id: `bench-breakdown:${randomUUID()}`, count: 1, expiresAt: new Date(now + 60_000) }));
    await time("7 runs.insertOne", () => db.runs.insertOne(runDocLike(w, `breakdown-${i}-${randomUUID()}`, [])));
    await time("8 counters.findOneAndUpdate($inc)", () => db.counters.findOneAndUpdate({ _id: `${activityStream(w.environmentId)}_breakdown` }, { $inc: { seq: 1 } }, { upsert: true, returnDocument: "after" }));
    await time("9 activityLogs.insertOne", async () => {
      try {
        const environmentId = randomUUID();
        const seq = 1e11 + i + Math.floor(Math.random() * 1e9);
        await db.activityLogs.insertOne({ _id: streamKey(activityStream(environmentId), seq), seq, timestamp: new Date(), projectId: w.projectId, environmentId, environment: "x", rendering: null, user: { id: w.user._id, email: w.user.email }, action: "workflow.run.triggered", via: "webhook", collection: w.collection, recordId: "x", runId: null, details: {} });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    });
  }
  const stages = [...times].map(([stage, v]) => ({ stage, ...summarize(v) })).map(({ stage, p50Ms, p99Ms }) => ({ stage, p50Ms, p99Ms }));
  const explain: Record<string, unknown> = {};
  const pick = (e: Record<string, unknown>) => Object.fromEntries(Object.entries(e).filter(([k]) => /pushdown|queryPlanner|winningPlan|stage/i.test(k)));
  try {
    explain.rateLimitCount = pick(await db.db.command({ explain: { count: "rate_limits", query: range }, verbosity: "queryPlanner" }));
  } catch (err) {
    explain.rateLimitCount = String(err);
  }
  try {
    // A filtered page (indexed query path); unfiltered pages are `_id` point lookups (activityLookup).
    explain.activityPage = pick(await db.db.command({ explain: { find: "activity_logs", filter: { environmentId: w.environmentId, seq: { $gt: 0 } }, sort: { seq: 1 }, limit: 1000 }, verbosity: "queryPlanner" }));
  } catch (err) {
    explain.activityPage = String(err);
  }
  try {
    explain.activityLookup = pick(await db.db.command({ explain: { find: "activity_logs", filter: { _id: streamKey(activityStream(w.environmentId), 1) } }, verbosity: "queryPlanner" }));
  } catch (err) {
    explain.activityLookup = String(err);
  }
  return { iterations, rateLimitSlotsInWindow, rateLimitDocs, stages, sumP50Ms: round(stages.reduce((a, s) => a + (s.p50Ms ?? 0), 0)), explain };
}
