// Workflows that cannot blow up memory: a workflow's versions are bounded in total size, its
// history costs nothing per trigger or run read (the workflow is read without steps, and a
// version's steps on their own), ListWorkflows answers without steps, and every List page stays
// under its byte budget. Workflows stored with their steps inside (as runhook once stored them)
// keep working. Real server and database.
import { randomUUID } from "node:crypto";
import { toBinary, toJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ListWorkflowsResponseSchema, ListWorkflowVersionsResponseSchema, type Workflow } from "../gen/runhook/v1/admin_pb.js";
import { MAX_WORKFLOW_BYTES, stepToProto } from "../src/services/admin/convert.js";
import { LIST_BYTE_BUDGET } from "../src/services/admin/paging.js";
import { storeFixtures, type CommandStartedEvent } from "../src/store/index.js";
import type { StepDoc, WorkflowDoc } from "../src/store/types.js";
import type { Step } from "../gen/runhook/v1/common_pb.js";
import { createWorld, type World } from "../fixtures/world.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { grpcGetRun, queueRun, waitForRun } from "./helpers/runs.js";
import { adminClient, local, postHook } from "./helpers/webhook.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server?.stop());

const load: StepDoc = { type: "load_record" };
const setStatus = (status: string): StepDoc => ({ type: "update_record", set: { status } });
/** Steps of about `bytes` bytes as JSON. */
const sized = (bytes: number, tag = ""): StepDoc[] => [load, { type: "update_record", set: { status: tag, blob: "x".repeat(bytes) } }];

/** The status an update_record step sets, as the API answers it. */
const statusOf = (s: Step | undefined) => (s?.kind.case === "updateRecord" ? s.kind.value.set?.status : undefined);

/** What an answer weighs, as the budget counts it: its protobuf or its JSON encoding, whichever is larger. */
const weight = <S extends DescMessage>(schema: S, m: MessageShape<S>) => Math.max(toBinary(schema, m).length, Buffer.byteLength(toJsonString(schema, m)));

const publish = (w: World, steps: StepDoc[]) =>
  adminClient(server.baseUrl, w.ownerToken).publishWorkflow({ workflowId: w.workflowId, steps: steps.map(stepToProto) });
const refusal = (p: Promise<unknown>) => p.then(() => null).catch((e: unknown) => ConnectError.from(e));

/** A workflow stored with its steps inside, as runhook once stored them: the world's workflow's settings, `versions` steps. */
async function embeddedStepsWorkflow(w: World, versions: StepDoc[][], name = `old-${randomUUID()}`): Promise<string> {
  const { versions: _, ...base } = (await server.deps.store.directory.workflows.get(w.workflowId))!;
  const _id = randomUUID();
  const publishedAt = new Date();
  await storeFixtures(server.deps.store).insertEmbeddedStepsWorkflow({
    ...base,
    _id,
    name,
    versions: versions.map((steps, i) => ({ version: i + 1, active: true, publishedAt, steps })),
  });
  return _id;
}

/** Every page of a list, each checked against the budget. */
async function allPages<T>(page: (pageToken: string) => Promise<{ items: T[]; nextPageToken: string; bytes: number }>) {
  const pages: T[][] = [];
  let token = "";
  do {
    const p = await page(token);
    expect(p.bytes).toBeLessThanOrEqual(LIST_BYTE_BUDGET);
    pages.push(p.items);
    token = p.nextPageToken;
  } while (token);
  return pages;
}

it("refuses a publish past the workflow's total size, naming the limit and the sizes; a smaller one still fits", async () => {
  const w = await createWorld(server);
  const editor = adminClient(server.baseUrl, w.ownerToken);
  let refused: ConnectError | null = null;
  let published = 1;
  for (let i = 0; i < 30 && !refused; i++) {
    refused = await refusal(publish(w, sized(60_000, `big${i}`)));
    if (!refused) published++;
  }
  expect(refused?.code).toBe(Code.FailedPrecondition);
  const m = /at most 1024 KiB of steps in all \(as JSON\): its (\d+) versions hold (\d+) KiB and these steps (\d+) KiB/.exec(refused!.rawMessage);
  expect(m, refused!.rawMessage).not.toBeNull();
  const [versions, held, these] = m!.slice(1).map(Number) as [number, number, number];
  expect(versions).toBe(published);
  expect(held).toBeLessThanOrEqual(MAX_WORKFLOW_BYTES / 1024);
  expect(held + these).toBeGreaterThan(MAX_WORKFLOW_BYTES / 1024);
  // Nothing was added; a version that fits in what is left is published.
  expect((await editor.getWorkflow({ workflowId: w.workflowId })).workflow!.versions).toHaveLength(published);
  const small = await editor.publishWorkflow({ workflowId: w.workflowId, steps: [load, setStatus("small")].map(stepToProto) });
  expect(small.workflow!.versions.map((v) => v.version).at(-1)).toBe(published + 1);

  // A page of versions of 60 KB stops at the budget; the pages hold every version once, with its steps.
  const pages = await allPages(async (pageToken) => {
    const r = await editor.listWorkflowVersions({ workflowId: w.workflowId, pageSize: 1000, pageToken });
    return { items: r.workflowVersions, nextPageToken: r.nextPageToken, bytes: weight(ListWorkflowVersionsResponseSchema, r) };
  });
  expect(pages.length).toBeGreaterThan(1);
  const all = pages.flat();
  expect(all.map((v) => v.version)).toEqual(Array.from({ length: published + 1 }, (_, i) => i + 1));
  expect(all.map((v) => v.steps.at(-1)?.kind.case)).toEqual(all.map(() => "updateRecord"));
  expect(all.slice(1, -1).map((v) => statusOf(v.steps[1]))).toEqual(Array.from({ length: published - 1 }, (_, i) => `big${i}`));
  // GetWorkflow has every version's steps too.
  const got = (await editor.getWorkflow({ workflowId: w.workflowId })).workflow!;
  expect(got.versions.every((v) => v.steps.length === 2)).toBe(true);
});

it("lists workflows without their versions' steps, in pages under the byte budget", async () => {
  const w = await createWorld(server);
  const dir = server.deps.store.directory;
  // Workflows of 100 versions each: half stored with their steps inside, half as runhook stores them now.
  const history = Array.from({ length: 100 }, (_, i) => [load, setStatus(`v${i + 1}`)]);
  const { versions: _, ...base } = (await dir.workflows.get(w.workflowId))!;
  const stepsId = await dir.workflows.putSteps(w.workflowId, history[0]!, 60);
  for (let i = 0; i < 60; i++) {
    await embeddedStepsWorkflow(w, history);
    const versions = history.map((_, k) => ({ version: k + 1, active: true, publishedAt: new Date(), stepsId, bytes: 60 }));
    await dir.workflows.insert({ ...base, _id: randomUUID(), name: `new-${i}`, versions } satisfies WorkflowDoc);
  }
  const reader = adminClient(server.baseUrl, w.userToken);
  const pages = await allPages(async (pageToken) => {
    const r = await reader.listWorkflows({ renderingId: w.renderingId, pageSize: 1000, pageToken });
    return { items: r.workflows, nextPageToken: r.nextPageToken, bytes: weight(ListWorkflowsResponseSchema, r) };
  });
  expect(pages.length).toBeGreaterThan(1);
  const all: Workflow[] = pages.flat();
  expect(all).toHaveLength(121);
  expect(new Set(all.map((x) => x.id)).size).toBe(121);
  expect(all.filter((x) => x.id !== w.workflowId).every((x) => x.versions.length === 100)).toBe(true);
  expect(all.flatMap((x) => x.versions).filter((v) => v.steps.length > 0)).toEqual([]);
  // The versions list of one of them has the steps.
  const versions = await reader.listWorkflowVersions({ workflowId: all[0]!.id, pageSize: 1000 });
  expect(versions.workflowVersions.every((v) => v.steps.length > 0)).toBe(true);
});

it("triggers and runs an old version after many publishes", async () => {
  const w = await createWorld(server, { steps: [load, setStatus("v1")] });
  const editor = adminClient(server.baseUrl, w.ownerToken);
  for (let v = 2; v <= 40; v++) await publish(w, [load, { type: "wait", seconds: 0 }, setStatus(`v${v}`)]);
  for (let v = 2; v <= 40; v++) await editor.deactivateWorkflowVersion({ workflowId: w.workflowId, version: v });
  const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: "r1" });
  expect(hook.status).toBe(202);
  const run = await waitForRun(server.deps.store, hook.body.runId!);
  expect([run.state, run.workflowVersion, run.steps.map((s) => s.type)]).toEqual(["SUCCEEDED", 1, ["load_record", "update_record"]]);
  // A run of an inactive version in between still runs that version's steps.
  const queued = await queueRun(server.deps.store, w, "r2", { workflowVersion: 7 });
  expect((await waitForRun(server.deps.store, queued._id)).state).toBe("SUCCEEDED");
  const records = storeFixtures(server.deps.store).records(w.dataDatabase, w.collection);
  expect((await records.find({ id: { $in: ["r1", "r2"] } }, { sort: { id: 1 } }).toArray()).map((r) => r.status)).toEqual(["v1", "v7"]);
});

it("triggers, runs, lists and publishes a workflow stored with its steps inside", async () => {
  const w = await createWorld(server);
  const editor = adminClient(server.baseUrl, w.ownerToken);
  const id = await embeddedStepsWorkflow(w, [
    [load, setStatus("old1")],
    [load, setStatus("old2")],
  ]);
  const url = (await editor.enableWebhook({ workflowId: id })).webhook!.url;
  const hook = local(url, server.deps.config.publicBaseUrl, server.baseUrl);
  const trigger = async (recordId: string) => {
    const r = await postHook(hook, w.userToken, { record_id: recordId });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    return waitForRun(server.deps.store, r.body.runId!);
  };
  const first = await trigger("r1");
  expect([first.state, first.workflowVersion]).toEqual(["SUCCEEDED", 2]);
  expect((await grpcGetRun(server.grpcAddr, w.userToken, { runId: first._id })).run?.workflowVersion).toBe(2);
  const queued = await queueRun(server.deps.store, w, "r2", { workflowId: id, workflowVersion: 1 });
  expect((await waitForRun(server.deps.store, queued._id)).state).toBe("SUCCEEDED");
  // Its reads: without steps in the list, with them from GetWorkflow and the versions list.
  const listed = (await editor.listWorkflows({ renderingId: w.renderingId })).workflows.find((x) => x.id === id)!;
  expect(listed.versions.map((v) => [v.version, v.steps.length])).toEqual([
    [1, 0],
    [2, 0],
  ]);
  const got = (await editor.getWorkflow({ workflowId: id })).workflow!;
  expect(got.versions.map((v) => statusOf(v.steps[1]))).toEqual(["old1", "old2"]);
  const versions = (await editor.listWorkflowVersions({ workflowId: id })).workflowVersions;
  expect(versions.map((v) => v.steps.length)).toEqual([2, 2]);
  // A new version beside the old ones; deactivated, the old one runs again.
  const published = await editor.publishWorkflow({ workflowId: id, steps: [load, setStatus("new3")].map(stepToProto) });
  expect(published.workflow!.versions.map((v) => v.steps.length)).toEqual([2, 2, 2]);
  expect((await trigger("r3")).workflowVersion).toBe(3);
  await editor.deactivateWorkflowVersion({ workflowId: id, version: 3 });
  expect((await trigger("r4")).workflowVersion).toBe(2);
  const records = storeFixtures(server.deps.store).records(w.dataDatabase, w.collection);
  expect((await records.find({}, { sort: { id: 1 } }).toArray()).map((r) => r.status)).toEqual(["old2", "old1", "new3", "old2", "new"]);
});

it("keeps each version's own steps when publishes run at once", async () => {
  const w = await createWorld(server);
  const n = 8;
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => publish(w, [load, setStatus(`p${i}`)])));
  // Each answer is the workflow right after its own version: the last one, with the steps it published.
  const own = answers.map((a, i) => {
    const last = a.workflow!.versions.at(-1)!;
    expect(statusOf(last.steps[1])).toBe(`p${i}`);
    return last.version;
  });
  expect(new Set(own).size).toBe(n);
  const versions = (await adminClient(server.baseUrl, w.ownerToken).listWorkflowVersions({ workflowId: w.workflowId })).workflowVersions;
  expect(versions.map((v) => v.version)).toEqual(Array.from({ length: n + 1 }, (_, i) => i + 1));
  for (const [i, version] of own.entries()) {
    expect(statusOf(versions[version - 1]!.steps[1])).toBe(`p${i}`);
  }
});

it("reads nothing of a workflow's history per trigger or run read, however large", async () => {
  const quiet = await startServer({ env: { RUNHOOK_EXECUTOR: "false" } });
  try {
    const w = await createWorld(quiet, { rateLimitPerMinute: 100_000 });
    const fx = storeFixtures(quiet.deps.store);
    // 100 versions of 60 KB, stored inside the workflow (about 6 MB) as runhook once stored them.
    const { versions: _, ...base } = (await quiet.deps.store.directory.workflows.get(w.workflowId))!;
    await fx.insertEmbeddedStepsWorkflow({
      ...base,
      _id: randomUUID(),
      name: "history",
      versions: Array.from({ length: 100 }, (_, i) => ({ version: i + 1, active: true, publishedAt: new Date(), steps: sized(60_000, `v${i + 1}`) })),
    });
    const id = (await fx.workflows.findOne({ renderingId: w.renderingId, name: "history" }))!._id;
    const url = (await adminClient(quiet.baseUrl, w.ownerToken).enableWebhook({ workflowId: id })).webhook!.url;
    const hook = local(url, quiet.deps.config.publicBaseUrl, quiet.baseUrl);
    const runIds: string[] = [];
    const trigger = async (recordId: string) => {
      const r = await postHook(hook, w.userToken, { record_id: recordId });
      expect(r.status).toBe(202);
      runIds.push(r.body.runId!);
    };
    await trigger("warm");
    await grpcGetRun(quiet.grpcAddr, w.userToken, { runId: runIds[0]! });
    const reads: string[] = [];
    const names = new Set([fx.collectionNameOf("workflows"), fx.collectionNameOf("workflowSteps")]);
    const record = (e: CommandStartedEvent) => {
      const on = (e.command as Record<string, unknown>)[e.commandName];
      if (typeof on === "string" && names.has(on)) reads.push(`${e.commandName} ${on}`);
    };
    const events = fx.commandEvents();
    events.on("commandStarted", record);
    try {
      for (let i = 0; i < 5; i++) await trigger(`r${i}`);
      for (const runId of runIds) expect((await grpcGetRun(quiet.grpcAddr, w.userToken, { runId })).run?.workflowVersion).toBe(100);
    } finally {
      events.off("commandStarted", record);
    }
    expect(reads).toEqual([]);
  } finally {
    await quiet.stop();
  }
});

it("stores nothing for a CreateWorkflow it refuses (a bad trigger role)", async () => {
  const w = await createWorld(server);
  const steps = storeFixtures(server.deps.store).workflowSteps;
  const before = await steps.estimatedDocumentCount();
  const refused = await refusal(
    adminClient(server.baseUrl, w.ownerToken).createWorkflow({
      renderingId: w.renderingId,
      collectionId: w.collectionId,
      name: "refused",
      triggerRoles: ["nobody"],
      steps: sized(60_000, "refused").map(stepToProto),
    }),
  );
  expect(refused?.code).toBe(Code.InvalidArgument);
  expect(await steps.estimatedDocumentCount()).toBe(before);
});
