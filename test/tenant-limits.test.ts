// What one tenant can make every process hold: workflows are read only for a caller whose token
// authenticated, the directory cache is bounded in bytes, and a workflow's versions are bounded
// in size and number. Real server and database.
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { StepSchema } from "../gen/runhook/v1/common_pb.js";
import { MAX_KEPT_VERSIONS, MAX_VERSION_BYTES } from "../src/services/admin/convert.js";
import { MAX_CACHE_BYTES, MAX_CACHED_DOC_BYTES } from "../src/store/directory-cache.js";
import { storeFixtures, type CommandStartedEvent } from "../src/store/index.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, grpcTrigger, postHook, sleep } from "./helpers/webhook.js";
import * as grpc from "@grpc/grpc-js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { createWorld } from "../fixtures/world.js";
import { errorBody } from "../src/rpc/errors.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server?.stop());

type Step = MessageInitShape<typeof StepSchema>;
const load: Step = { kind: { case: "loadRecord", value: {} } };

it("reads nothing of a workflow for calls with made-up tokens", async () => {
  const w = await createWorld(server);
  const fx = storeFixtures(server.deps.store);
  const workflows = fx.collectionNameOf("workflows");
  const reads: string[] = [];
  const events = fx.commandEvents();
  const record = (e: CommandStartedEvent) =>
    void (e.commandName === "find" && (e.command as { find?: string }).find === workflows && reads.push(e.commandName));
  events.on("commandStarted", record);
  try {
    for (let i = 0; i < 20; i++) {
      const r = await postHook(`${server.baseUrl}${w.hookPath}`, `rh_app_${randomUUID().replace(/-/g, "").padEnd(43, "x")}`, { record_id: "r1" });
      expect(r.status).toBe(401);
    }
  } finally {
    events.off("commandStarted", record);
  }
  expect(reads).toEqual([]);
});

it("keeps the directory cache within its bytes, whatever size the documents read through it", async () => {
  const w = await createWorld(server);
  const dir = server.deps.store.directory;
  const fx = storeFixtures(server.deps.store);
  const { versions: _, ...base } = (await dir.workflows.get(w.workflowId))!;
  // Workflows of ~900 KB each, stored with their steps inside as years of large versions once left them.
  const big = { type: "add_note" as const, title: "", content: "x".repeat(60_000) };
  const version = (n: number) => ({ version: n, active: true, publishedAt: new Date(), steps: [big] });
  const ids: string[] = [];
  for (let i = 0; i < 80; i++) {
    const doc = { ...base, _id: randomUUID(), name: `big-${i}`, versions: Array.from({ length: 15 }, (_, k) => version(k + 1)) };
    await fx.insertEmbeddedStepsWorkflow(doc);
    ids.push(doc._id);
  }
  for (const id of ids) {
    expect((await dir.view().workflows.get(id))?.versions).toHaveLength(15);
    expect(dir.cachedBytes()).toBeLessThanOrEqual(MAX_CACHE_BYTES);
  }
  // One larger than a cached document may be (a team of 30,000 members) is read, never kept.
  const members = Array.from({ length: 30_000 }, () => randomUUID());
  const team = { _id: randomUUID(), projectId: w.projectId, name: "huge", memberIds: members, createdAt: new Date() };
  await dir.teams.insert(team);
  const before = dir.cachedBytes();
  expect(await dir.view().teams.memberIds(team._id)).toHaveLength(members.length);
  expect(dir.cachedBytes()).toBe(before);
  expect(MAX_CACHED_DOC_BYTES).toBeLessThan(members.length * 40);
});

it("refuses a version larger than its limit, and a publish beyond the versions a workflow keeps", async () => {
  const w = await createWorld(server);
  const editor = adminClient(server.baseUrl, w.ownerToken);
  const note = (bytes: number): Step => ({ kind: { case: "addNote", value: { title: "", content: "y".repeat(bytes) } } });
  const tooBig = Array.from({ length: Math.ceil(MAX_VERSION_BYTES / 30_000) + 1 }, () => note(30_000));
  const refused = await editor.publishWorkflow({ workflowId: w.workflowId, steps: tooBig }).catch((e: unknown) => ConnectError.from(e));
  expect(refused).toBeInstanceOf(ConnectError);
  expect((refused as ConnectError).code).toBe(Code.InvalidArgument);
  expect((refused as ConnectError).rawMessage).toMatch(/at most 64 KiB/);
  for (let v = 2; v <= MAX_KEPT_VERSIONS; v++) await editor.publishWorkflow({ workflowId: w.workflowId, steps: [load] });
  const beyond = await editor.publishWorkflow({ workflowId: w.workflowId, steps: [load] }).catch((e: unknown) => ConnectError.from(e));
  expect((beyond as ConnectError).code).toBe(Code.FailedPrecondition);
  expect((beyond as ConnectError).rawMessage).toMatch(/at most 100 versions/);
  const kept = await editor.getWorkflow({ workflowId: w.workflowId });
  expect(kept.workflow!.versions).toHaveLength(MAX_KEPT_VERSIONS);
});

it("refuses a trigger with 429 once its project has its quota of ongoing runs, on the webhook and gRPC alike; other projects go on; a finished run makes room", async () => {
  const quota = await startServer({ env: { RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT: "3", RUNHOOK_EXECUTOR: "false" } });
  try {
    const [w, other] = [await createWorld(quota), await createWorld(quota)];
    const hook = (world: typeof w, recordId: string) => postHook(`${quota.baseUrl}${world.hookPath}`, world.userToken, { record_id: recordId });
    for (const r of ["r1", "r2", "r3"]) expect((await hook(w, r)).status).toBe(202);
    const refused = await hook(w, "r4");
    expect([refused.status, refused.headers.get("retry-after"), refused.body]).toEqual([
      429,
      "5",
      errorBody("resource_exhausted", "the project has 3 ongoing runs, its limit: retry once some have finished"),
    ]);
    // Over native gRPC too: the same check.
    const grpcRefused = await grpcTrigger(quota.grpcAddr, `${quota.deps.config.publicBaseUrl}${w.hookPath}`, "r5", w.userToken);
    expect(grpcRefused.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect((await hook(other, "r1")).status).toBe(202);
    // One run cancelled: the next count (at most a second later) finds room.
    const [first] = await storeFixtures(quota.deps.store).runs.find({ state: "QUEUED", projectId: w.projectId }, { limit: 1 }).toArray();
    const runs = createClient(RunService, createConnectTransport({ baseUrl: quota.baseUrl, httpVersion: "1.1" }));
    await runs.cancelRun({ runId: first!._id }, { headers: { authorization: `Bearer ${w.userToken}` } });
    const end = Date.now() + 10_000;
    let status = 429;
    while (status === 429 && Date.now() < end) {
      await sleep(200);
      status = (await hook(w, "r4")).status;
    }
    expect(status).toBe(202);
    expect((await hook(w, "r6")).status).toBe(429);
  } finally {
    await quota.stop();
  }
});
