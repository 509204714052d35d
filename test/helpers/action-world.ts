// A world whose logs hold a real entry of every action runhook writes, each made the way a
// user makes it: runs triggered through the webhook and run by the server's executors (one
// succeeds with a step that updates the record and one that adds a note, one fails, one is
// cancelled), notes created, replied to, renamed, archived and deleted through /v1, and the
// AdminService changes that fill a project's admin log.
import { callAdmin } from "../../src/cli/demo.js";
import { keyOfUrl } from "../../src/domain/webhook-keys.js";
import type { Services } from "../../src/services/index.js";
import { addUser, createWorld, type World } from "../../fixtures/world.js";
import { apiClient } from "./api.js";
import { waitForRun } from "./runs.js";
import type { TestServer } from "./server.js";
import { BOOTSTRAP_SECRET } from "./server.js";
import { postHook } from "./webhook.js";

type R = Record<string, any>;

export interface ActionWorld {
  w: World;
  /** The workflows' names: the world's (load, update, add a note) and one that waits (cancelled). */
  workflows: { main: string; slow: string };
  runs: { succeeded: string[]; failed: string; cancelled: string };
  /** The /v1 answers of the note writes, in the published shapes. */
  answers: { notes: R[]; message: R; patched: R[] };
  /** The notes' numbers: kept (one archived, one renamed) and deleted. */
  notes: { kept: number[]; archived: number; deleted: number };
}

const MAIN_WORKFLOW_STEPS = [
  { type: "load_record" as const },
  { type: "update_record" as const, set: { status: "done" } },
  { type: "add_note" as const, title: "Checked", content: "<p>checked by the workflow</p>" },
];

/** Calls one AdminService method in process as the holder of `token`. */
function admin(services: Services, token: string, method: keyof Services["admin"], init: R): Promise<R> {
  return callAdmin(services.admin, method, token, init as never) as Promise<R>;
}

/** Triggers the workflow behind `hookPath` on `recordId` through the webhook; the run's id. */
async function trigger(server: TestServer, hookPath: string, token: string, recordId: string): Promise<string> {
  const r = await postHook(`${server.baseUrl}${hookPath}`, token, { record_id: recordId });
  if (r.status !== 202 || !r.body.runId) throw new Error(`trigger on ${recordId}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.runId;
}

/** A workflow that waits ten minutes, on the world's rendering and collection, with its webhook on. */
async function slowWorkflow(server: TestServer, w: World): Promise<{ id: string; hookPath: string; name: string }> {
  const name = "slow workflow";
  const steps = [{ kind: { case: "wait", value: { seconds: 600 } } }];
  const wf = (await admin(server.services, w.ownerToken, "createWorkflow", { renderingId: w.renderingId, collectionId: w.collectionId, name, steps })).workflow;
  const hook = (await admin(server.services, w.ownerToken, "enableWebhook", { workflowId: wf.id })).webhook;
  return { id: wf.id, hookPath: `/hooks/${keyOfUrl(hook.url as string)}`, name };
}

/** Runs through the webhook: two succeed (by the user and by the admin), one fails (no such record), one is cancelled. */
async function runs(server: TestServer, w: World, slow: { hookPath: string }): Promise<ActionWorld["runs"]> {
  const succeeded = [await trigger(server, w.hookPath, w.userToken, "r1"), await trigger(server, w.hookPath, w.adminToken, "r2")];
  const failed = await trigger(server, w.hookPath, w.userToken, "no-such-record");
  const cancelled = await trigger(server, slow.hookPath, w.userToken, "r3");
  await waitForRun(server.deps.store, cancelled, (r) => r.state === "RUNNING");
  const cancel = await apiClient(server.gateway, w.userToken).post(`/v1/runs/${cancelled}/cancel`);
  if (cancel.status !== 200) throw new Error(`cancel: ${cancel.status} ${JSON.stringify(cancel.body)}`);
  for (const id of succeeded) if ((await waitForRun(server.deps.store, id)).state !== "SUCCEEDED") throw new Error(`run ${id} did not succeed`);
  if ((await waitForRun(server.deps.store, failed)).state !== "FAILED") throw new Error(`run ${failed} did not fail`);
  return { succeeded, failed, cancelled };
}

/** Notes through /v1 by the world's admin and by the organization's owner: created, replied to, renamed, archived, deleted. */
async function notes(server: TestServer, w: World, ownerApiToken: string): Promise<Pick<ActionWorld, "answers" | "notes">> {
  const base = `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;
  const byAdmin = apiClient(server.gateway, w.apiToken);
  const byOwner = apiClient(server.gateway, ownerApiToken);
  const created: R[] = [];
  for (const [client, body] of [
    [byAdmin, { collectionName: "orders", recordId: "r1", title: "First look", content: "<p>Looks <b>fine</b></p>" }],
    [byOwner, { collectionName: "customers", recordId: "c1", title: "Customer", content: "<p>Call back</p>" }],
    [byAdmin, { collectionName: "orders", recordId: "r4", content: "<p>untitled</p>" }],
    [byOwner, { collectionName: "orders", recordId: "r2", title: "Gone soon", content: "<p>to delete</p>" }],
  ] as const) {
    const r = await client.post(base, body);
    if (r.status !== 201) throw new Error(`create note: ${r.status} ${JSON.stringify(r.body)}`);
    created.push(r.body);
  }
  const [first, second, third, doomed] = created.map((n) => n.id as number) as [number, number, number, number];
  const message = await byOwner.post(`${base}/${first}/messages`, { content: "<p>Agreed</p>" });
  const renamed = await byAdmin.patch(`${base}/${first}`, { title: "First look (renamed)" });
  const archived = await byAdmin.patch(`${base}/${second}`, { archived: true });
  const deleted = await byOwner.del(`${base}/${doomed}`);
  for (const r of [message, renamed, archived, deleted]) if (r.status >= 300) throw new Error(`note write: ${r.status} ${JSON.stringify(r.body)}`);
  return {
    answers: { notes: created, message: message.body, patched: [renamed.body, archived.body] },
    notes: { kept: [first, second, third], archived: second, deleted: doomed },
  };
}

/** The AdminService changes that fill the project's admin log beyond the world's making. */
async function adminChanges(server: TestServer, w: World, slowId: string): Promise<{ ownerApiToken: string }> {
  const c = (method: keyof Services["admin"], init: R) => admin(server.services, w.ownerToken, method, init);
  await c("disableWebhook", { workflowId: slowId });
  await c("enableWebhook", { workflowId: slowId });
  await c("regenerateWebhook", { workflowId: slowId });
  await c("publishWorkflow", { workflowId: slowId, steps: [{ kind: { case: "wait", value: { seconds: 60 } } }] });
  await c("deactivateWorkflowVersion", { workflowId: slowId, version: 1 });
  // Changing requires_sso takes a token of an SSO session: the identity provider's (the operator's secret) for the owner.
  const sso = (await admin(server.services, BOOTSTRAP_SECRET, "issueSsoToken", { userId: w.owner._id, name: "sso session" })).plaintext as string;
  await admin(server.services, sso, "updateProject", { projectId: w.projectId, requiresSso: false });
  const support = (await c("createTeam", { projectId: w.projectId, name: "support" })).team;
  await c("createRendering", { teamId: support.id, environmentId: w.environmentId });
  const leaver = await addUser(server, w, "editor", { teamId: w.teamId });
  await c("setTeamMember", { teamId: w.teamId, userId: leaver._id, member: false });
  const appToken = (await c("createApplicationToken", { userId: w.user._id, name: "short-lived" })).token;
  await c("revokeApplicationToken", { tokenId: appToken.id });
  const spare = (await admin(server.services, w.adminToken, "createApiToken", { projectId: w.projectId, name: "spare" })).token;
  await admin(server.services, w.adminToken, "revokeApiToken", { tokenId: spare.id });
  const orgToken = (await c("createOrganizationApiToken", { name: "siem" })).token;
  await c("revokeOrganizationApiToken", { tokenId: orgToken.id });
  const customers = (await c("createCollection", { environmentId: w.environmentId, name: "customers", primaryKey: ["id"] })).collection;
  const roles = ["admin", "editor", "user"];
  await c("setCollectionPermission", { permission: { renderingId: w.renderingId, collectionId: customers.id, readRoles: roles, editRoles: roles } });
  // A project API token answers for its creator's role on the project: the owner takes one first.
  await c("setProjectRole", { projectId: w.projectId, userId: w.owner._id, role: "admin" });
  const ownerApiToken = (await c("createApiToken", { projectId: w.projectId, name: "owner's" })).plaintext as string;
  return { ownerApiToken };
}

/** Makes the world and its entries; every run has finished when it returns. */
export async function createActionWorld(server: TestServer): Promise<ActionWorld> {
  const w = await createWorld(server, { steps: MAIN_WORKFLOW_STEPS });
  const slow = await slowWorkflow(server, w);
  const ran = await runs(server, w, slow);
  const { ownerApiToken } = await adminChanges(server, w, slow.id);
  const written = await notes(server, w, ownerApiToken);
  return { w, workflows: { main: "test workflow", slow: slow.name }, runs: ran, ...written };
}
