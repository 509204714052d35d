// A run batch survives the death of its process: a retry batch of failed runs is worked through
// by a server that is killed with SIGKILL midway; another server takes the batch over once its
// lease expires and finishes it. Every matched run is retried exactly once, and the batch's
// counters count each run once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService, type RunBatch } from "../../gen/runhook/v1/run_pb.js";
import { finishedActiveKey, storeFixtures, type StoreFixtures } from "../../src/store/index.js";
import type { RunDoc, StepDoc } from "../../src/store/types.js";
import { sleep } from "../../src/lib/sleep.js";
import { createWorld, worldRun, type World } from "../../fixtures/world.js";
import { openTestApp, spawnServer, testDbName, type ChildServer } from "../helpers/server.js";

const RUNS = 30;
const LEASE_MS = 2000;
const env = { RUNHOOK_EXECUTOR_LEASE_MS: String(LEASE_MS), RUNHOOK_EXECUTOR_POLL_MS: "100", RUNHOOK_BATCH_ONGOING_RUNS: "2" };
// Each retry takes a second or so: the batch is midway for seconds.
const steps: StepDoc[] = [{ type: "load_record" }, { type: "wait", seconds: 1 }];

let app: Awaited<ReturnType<typeof openTestApp>> | undefined;
let db: StoreFixtures;
let dbName: string;
let w: World;
const servers: ChildServer[] = [];

beforeAll(async () => {
  dbName = testDbName();
  app = await openTestApp(dbName);
  app.stop();
  db = storeFixtures(app.deps.store);
  w = await createWorld(app, { steps, records: Array.from({ length: RUNS }, (_, i) => ({ id: `r${i}`, status: "new" })) });
});

afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.kill()));
  await app?.deps.store.close();
});

function failedRun(recordId: string, createdAt: Date): RunDoc {
  const run = worldRun(w, recordId, steps, { createdAt });
  const finishedAt = new Date(createdAt.getTime() + 5);
  return { ...run, state: "FAILED", error: "failed", activeKey: finishedActiveKey(run._id, finishedAt), finishedAt };
}

const client = (s: ChildServer) => createClient(RunService, createConnectTransport({ baseUrl: s.baseUrl, httpVersion: "1.1" }));
const auth = () => ({ headers: { authorization: `Bearer ${w.adminToken}` } });

async function batchUntil(s: ChildServer, id: string, done: (b: RunBatch) => boolean, timeoutMs: number): Promise<RunBatch> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const { batch } = await client(s).getRunBatch({ batchId: id }, auth());
    if (done(batch!)) return batch!;
    if (Date.now() > end) throw new Error(`batch ${id}: ${batch!.state}, done ${batch!.done} of ${batch!.matched}`);
    await sleep(100);
  }
}

describe("a run batch and a SIGKILL", () => {
  it("resumes on another server and retries every matched run exactly once", async () => {
    const failed = Array.from({ length: RUNS }, (_, i) => failedRun(`r${i}`, new Date(Date.now() - 60_000 + i)));
    await db.insertRuns(failed);
    const a = await spawnServer(dbName, { env });
    servers.push(a);
    const created = (
      await client(a).createRunBatch(
        { projectName: w.projectName, environmentName: w.environmentName, action: "retry", filter: { states: ["FAILED"] } },
        auth(),
      )
    ).batch!;
    // Midway: some runs retried, most not.
    const midway = await batchUntil(a, created.id, (b) => Number(b.done) >= 6, 60_000);
    expect(Number(midway.done)).toBeLessThan(RUNS);
    await a.kill();

    const b = await spawnServer(dbName, { env });
    servers.push(b);
    const batch = await batchUntil(b, created.id, (x) => x.state !== "RUNNING", 180_000);
    expect({
      state: batch.state,
      matched: Number(batch.matched),
      done: Number(batch.done),
      skipped: Number(batch.skipped),
      failed: Number(batch.failed),
    }).toEqual({
      state: "SUCCEEDED",
      matched: RUNS,
      done: RUNS,
      skipped: 0,
      failed: 0,
    });
    const retries = (await db.runs.find({ batchId: created.id } as never).toArray()) as (RunDoc & { retryOf?: string })[];
    expect(retries.map((r) => r.retryOf).sort()).toEqual(failed.map((r) => r._id).sort());
    for (const f of failed) expect(await db.runs.countDocuments({ retryOf: f._id } as never)).toBe(1);
  });
});
