// The demo world (what `runhook seed` prints), built through the AdminService implementation (so every change
// is in the admin log). Idempotent: a second call reuses the demo world and only makes
// fresh tokens. The first start on an empty database also makes its first runs (webhook calls).
import type { DescMessage, DescMethodUnary, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import type { Deps } from "../deps.js";
import { callUnary } from "../rpc/in-process.js";
import { codeOf } from "../rpc/errors.js";
import { Code, createContextValues } from "@connectrpc/connect";
import { TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import { webhookCallKey } from "../services/context.js";
import { hashToken } from "../domain/auth/tokens.js";
import { isDuplicateKey, type Store } from "../store/index.js";
import type { DirectoryStore } from "../store/directory.js";
import type { Services } from "../services/index.js";
import { keyOfUrl } from "../domain/webhook-keys.js";
import { adminLog } from "../services/admin/common.js";
import { DEFAULT_TOKEN_TTL_MS, issueAppToken } from "../services/admin/tokens.js";

export interface SeedOutput {
  baseUrl: string;
  projectName: string;
  environmentName: string;
  collection: string;
  recordIds: string[];
  webhookUrl: string;
  userToken: string;
  apiToken: string;
  /** An application token of the demo organization's admin: every page of the console. */
  adminToken: string;
}

const DEMO = {
  organization: "demo",
  adminEmail: "admin@demo.example",
  userEmail: "user@demo.example",
  project: "demo",
  environment: "production",
  team: "operations",
  collection: "orders",
  workflow: "process-order",
  records: [
    { id: "1001", customer: "Ada Lovelace", total: 120.5, status: "new" },
    { id: "1002", customer: "Grace Hopper", total: 75, status: "new" },
    { id: "1003", customer: "Alan Turing", total: 310.25, status: "new" },
  ],
  /**
   * The records of the runs a first start makes, so that the console has something to show: two
   * that succeed, and one on a record that does not exist, which fails. Record 1001, the one the
   * printed commands use, is left free.
   */
  firstRunRecords: ["1002", "1003", "9999"],
};

type Admin = Services["admin"];

/** Calls one AdminService method in process through the one bridge, as the holder of `token` (the demo and the benchmarks' fixtures). */
export async function callAdmin<I extends DescMessage, O extends DescMessage>(
  admin: Admin,
  method: keyof Admin,
  token: string,
  init: MessageInitShape<I>,
): Promise<MessageShape<O>> {
  const desc = AdminService.method[method] as unknown as DescMethodUnary<I, O>;
  return callUnary(admin, desc, init, { headers: new Headers({ authorization: `Bearer ${token}` }), via: "api" });
}

/** The demo organization's admin, if both exist. */
async function demoAdmin(dir: DirectoryStore) {
  const org = await dir.organizations.byName(DEMO.organization);
  return org && dir.users.byEmail(org._id, DEMO.adminEmail);
}

/** The demo organization's admin and a fresh application token for them (logged). */
async function demoAdminToken(deps: Deps, services: Services): Promise<string> {
  try {
    const res = await callAdmin(services.admin, "bootstrap", deps.config.bootstrapSecret, {
      organizationName: DEMO.organization,
      adminEmail: DEMO.adminEmail,
      adminName: "Demo Admin",
    });
    return (res as unknown as { adminToken: string }).adminToken;
  } catch (err) {
    if (codeOf(err) !== Code.AlreadyExists) throw err;
  }
  const admin = await demoAdmin(deps.store.directory);
  if (!admin) throw new Error(`the demo organization exists but its admin ${DEMO.adminEmail} does not`);
  const t = await issueAppToken(deps, admin, { name: "demo seed", ttlMs: DEFAULT_TOKEN_TTL_MS, sso: false });
  await adminLog(deps, admin, "token.created", `token/${t.doc._id}`, { userId: admin._id, name: "demo seed" });
  return t.plaintext;
}

/** Finds by `find`, else creates by `make` (tolerating a concurrent creator). */
async function ensure<T>(find: () => Promise<T | null>, make: () => Promise<T>): Promise<T> {
  const found = await find();
  if (found) return found;
  try {
    return await make();
  } catch (err) {
    if (codeOf(err) !== Code.AlreadyExists && !isDuplicateKey(err)) throw err;
    const again = await find();
    if (!again) throw err;
    return again;
  }
}

// biome-ignore lint/suspicious/noExplicitAny: admin answers are read loosely, field by field, `_id` or `id`
type Loose = Record<string, any>;
/** One AdminService call as the demo's admin; documents and answers are read loosely (`_id` or `id`). */
type AdminCall = (method: keyof Admin, init: Loose) => Promise<Loose>;

/** A document's id (found in the database) or a message's (just created). */
const idOf = (found: Loose): string => found._id ?? found.id;

interface DemoWorld {
  projectId: string;
  dataDatabase: string;
  teamId: string;
  renderingId: string;
  collectionId: string;
  userId: string;
}

/** The project, its environment, team, rendering and collection, and the demo user. */
async function seedWorld(dir: DirectoryStore, c: AdminCall, orgId: string): Promise<DemoWorld> {
  const project = await ensure(
    () => dir.projects.byName(orgId, DEMO.project),
    async () => (await c("createProject", { name: DEMO.project })).project,
  );
  const projectId = idOf(project);
  const environment = await ensure(
    () => dir.environments.byName(projectId, DEMO.environment),
    async () => (await c("createEnvironment", { projectId, name: DEMO.environment })).environment,
  );
  const environmentId = idOf(environment);
  const team = await ensure(
    () => dir.teams.byName(projectId, DEMO.team),
    async () => (await c("createTeam", { projectId, name: DEMO.team })).team,
  );
  const teamId = idOf(team);
  const rendering = await ensure(
    () => dir.renderings.of(teamId, environmentId),
    async () => (await c("createRendering", { teamId, environmentId })).rendering,
  );
  const collection = await ensure(
    () => dir.collections.byName(environmentId, DEMO.collection),
    async () => (await c("createCollection", { environmentId, name: DEMO.collection, primaryKey: ["id"] })).collection,
  );
  const user = await ensure(
    () => dir.users.byEmail(orgId, DEMO.userEmail),
    async () => (await c("createUser", { email: DEMO.userEmail, name: "Demo User" })).user,
  );
  return { projectId, dataDatabase: environment.dataDatabase, teamId, renderingId: idOf(rendering), collectionId: idOf(collection), userId: idOf(user) };
}

/** The admin and the user on the project and in the team; every role may read and edit the collection. */
async function grantDemoAccess(dir: DirectoryStore, c: AdminCall, world: DemoWorld, adminId: string): Promise<void> {
  const { projectId, teamId, renderingId, collectionId, userId } = world;
  if ((await dir.roles.get(projectId, adminId)) === null) await c("setProjectRole", { projectId, userId: adminId, role: "admin" });
  if ((await dir.roles.get(projectId, userId)) === null) await c("setProjectRole", { projectId, userId, role: "user" });
  const members = (await dir.teams.memberIds(teamId)) ?? [];
  for (const id of [adminId, userId]) if (!members.includes(id)) await c("setTeamMember", { teamId, userId: id, member: true });
  if (!(await dir.permissions.get(renderingId, collectionId))) {
    await c("setCollectionPermission", {
      permission: { renderingId, collectionId, readRoles: ["admin", "editor", "user"], editRoles: ["admin", "editor", "user"], scope: {} },
    });
  }
}

/** The demo workflow with its webhook enabled; returns the webhook's URL. */
async function seedWorkflow(dir: DirectoryStore, c: AdminCall, { renderingId, collectionId }: DemoWorld): Promise<string> {
  const workflow = await ensure(
    () => dir.workflows.byName(renderingId, DEMO.workflow),
    async () =>
      (
        await c("createWorkflow", {
          renderingId,
          collectionId,
          name: DEMO.workflow,
          steps: [
            { kind: { case: "loadRecord", value: {} } },
            { kind: { case: "wait", value: { seconds: 5 } } },
            { kind: { case: "updateRecord", value: { set: { status: "processed" } } } },
            { kind: { case: "addNote", value: { title: "Processed", content: "<p>Processed by the <b>process-order</b> workflow.</p>" } } },
          ],
        })
      ).workflow,
  );
  const webhook = (await c("enableWebhook", { workflowId: idOf(workflow) })).webhook;
  return webhook.url as string;
}

async function seedRecords(store: Store, dataDatabase: string): Promise<void> {
  for (const r of DEMO.records) await store.records.putIfAbsent(dataDatabase, DEMO.collection, { id: r.id }, r);
}

/** Creates the demo world (fresh tokens each call) and returns what a user needs. */
export async function seedDemo(deps: Deps, services: Services): Promise<SeedOutput> {
  const { store } = deps;
  const dir = store.directory;
  const adminToken = await demoAdminToken(deps, services);
  const admin = (await demoAdmin(dir))!;
  const c: AdminCall = (method, init) => callAdmin(services.admin, method, adminToken, init as never) as Promise<Loose>;

  const world = await seedWorld(dir, c, admin.organizationId);
  await grantDemoAccess(dir, c, world, admin._id);
  const webhookUrl = await seedWorkflow(dir, c, world);
  await seedRecords(store, world.dataDatabase);

  const userToken = (await c("createApplicationToken", { userId: world.userId, name: "demo webhook" })).plaintext as string;
  const apiToken = (await c("createApiToken", { projectId: world.projectId, name: "demo public API" })).plaintext as string;
  const consoleToken = (await c("createApplicationToken", { userId: admin._id, name: "demo console (admin)" })).plaintext as string;
  // The admin token existed only to build the demo.
  const seedToken = await dir.appTokens.byHash(hashToken(adminToken));
  if (seedToken) await c("revokeApplicationToken", { tokenId: seedToken._id });

  // `seed` runs without a listening gateway (port 0): name the configured public URL, or the default port.
  const baseUrl = deps.config.publicBaseUrl.replace(/:0$/, ":8080");
  return {
    baseUrl,
    projectName: DEMO.project,
    environmentName: DEMO.environment,
    collection: DEMO.collection,
    recordIds: DEMO.records.map((r) => r.id),
    webhookUrl: `${baseUrl}/hooks/${keyOfUrl(webhookUrl)}`,
    userToken,
    apiToken,
    adminToken: consoleToken,
  };
}

/** The demo's first runs: webhook calls as the demo user, in process (the same route as `curl`). */
async function seedFirstRuns(services: Services, out: SeedOutput): Promise<void> {
  const headers = new Headers({ authorization: `Bearer ${out.userToken}` });
  const key = keyOfUrl(out.webhookUrl);
  for (const recordId of DEMO.firstRunRecords) {
    const values = createContextValues().set(webhookCallKey, { key, body: { recordId } });
    await callUnary(services.trigger, TriggerService.method.triggerRun, {}, { headers, via: "webhook", values });
  }
}

/** What a first start seeded: the demo, and the records of its first runs. */
export interface FirstStart extends SeedOutput {
  firstRunRecords: string[];
}

/** On an empty database, seeds the demo with its first runs and returns it; otherwise null. */
export async function seedDemoIfEmpty(deps: Deps, services: Services): Promise<FirstStart | null> {
  if (await deps.store.directory.organizations.any()) return null;
  const out = await seedDemo(deps, services);
  await seedFirstRuns(services, out);
  return { ...out, firstRunRecords: DEMO.firstRunRecords };
}
