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
import type { WorkflowDoc } from "../src/store/types.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, postHook } from "./helpers/webhook.js";
import { createWorld } from "../fixtures/world.js";

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

it("keeps the directory cache within its bytes, whatever size the workflows read through it", async () => {
  const w = await createWorld(server);
  const dir = server.deps.store.directory;
  const base = (await dir.workflows.get(w.workflowId))!;
  // Workflows of ~900 KB each, as years of large versions could leave them (written straight in).
  const big = { type: "add_note" as const, title: "", content: "x".repeat(60_000) };
  const version = (n: number) => ({ version: n, active: true, publishedAt: new Date(), steps: [big] });
  const ids: string[] = [];
  for (let i = 0; i < 80; i++) {
    const doc: WorkflowDoc = { ...base, _id: randomUUID(), name: `big-${i}`, versions: Array.from({ length: 15 }, (_, k) => version(k + 1)) };
    await dir.workflows.insert(doc);
    ids.push(doc._id);
  }
  for (const id of ids) {
    expect((await dir.view().workflows.get(id))?._id).toBe(id);
    expect(dir.cachedBytes()).toBeLessThanOrEqual(MAX_CACHE_BYTES);
  }
  // One larger than a cached document may be is read, never kept.
  const huge: WorkflowDoc = { ...base, _id: randomUUID(), name: "huge", versions: Array.from({ length: 20 }, (_, k) => version(k + 1)) };
  await dir.workflows.insert(huge);
  const before = dir.cachedBytes();
  expect((await dir.view().workflows.get(huge._id))?.versions).toHaveLength(20);
  expect(dir.cachedBytes()).toBe(before);
  expect(MAX_CACHED_DOC_BYTES).toBeLessThan(20 * 60_000);
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
