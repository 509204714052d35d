// Test fixtures written straight into the database: an organization with a project,
// environment, team, rendering, collection with records, users with roles, a workflow
// with its webhook enabled, and tokens. Returns the plaintext tokens.
import { randomUUID } from "node:crypto";
import type { Database } from "../../src/store/index.js";
import type { Role } from "../../src/domain/auth/roles.js";
import type { StepDoc, UserDoc } from "../../src/store/types.js";
import { projectRoleId } from "../../src/store/index.js";
import { API_TOKEN_PREFIX, APP_TOKEN_PREFIX, newToken } from "../../src/domain/auth/tokens.js";

export interface World {
  orgId: string;
  projectId: string;
  projectName: string;
  environmentId: string;
  environmentName: string;
  teamId: string;
  renderingId: string;
  collectionId: string;
  collection: string;
  dataDatabase: string;
  workflowId: string;
  admin: UserDoc;
  user: UserDoc;
  adminToken: string;
  userToken: string;
  apiToken: string;
  recordIds: string[];
}

export async function addUser(
  db: Database,
  orgId: string,
  projectId: string,
  role: Role | null,
  opts: { teamId?: string; email?: string } = {},
): Promise<UserDoc> {
  const user: UserDoc = {
    _id: randomUUID(),
    organizationId: orgId,
    email: opts.email ?? `${randomUUID().slice(0, 8)}@example.test`,
    name: "Test User",
    organizationAdmin: false,
    createdAt: new Date(),
  };
  await db.users.insertOne(user);
  if (role) await db.projectRoles.insertOne({ _id: projectRoleId(projectId, user._id), projectId, userId: user._id, role });
  if (opts.teamId) await db.teams.updateOne({ _id: opts.teamId }, { $addToSet: { memberIds: user._id } });
  return user;
}

export async function addAppToken(db: Database, userId: string, opts: { sso?: boolean; expiresAt?: Date } = {}): Promise<{ id: string; plaintext: string }> {
  const id = randomUUID();
  const t = newToken(APP_TOKEN_PREFIX, id);
  await db.appTokens.insertOne({
    _id: id,
    hash: t.hash,
    userId,
    name: "test",
    expiresAt: opts.expiresAt ?? new Date(Date.now() + 86400_000),
    revokedAt: null,
    createdAt: new Date(),
    sso: opts.sso ?? false,
  });
  return { id, plaintext: t.plaintext };
}

export async function addApiToken(db: Database, userId: string, projectId: string): Promise<{ id: string; plaintext: string }> {
  const id = randomUUID();
  const t = newToken(API_TOKEN_PREFIX, id);
  await db.apiTokens.insertOne({
    _id: id,
    hash: t.hash,
    userId,
    projectId,
    name: "test",
    expiresAt: new Date(Date.now() + 86400_000),
    revokedAt: null,
    createdAt: new Date(),
  });
  return { id, plaintext: t.plaintext };
}

export async function createWorld(
  db: Database,
  opts: { steps?: StepDoc[]; requiresSso?: boolean; records?: Record<string, unknown>[]; primaryKey?: string[]; scope?: Record<string, unknown> } = {},
): Promise<World> {
  const now = new Date();
  const tag = randomUUID().slice(0, 8);
  const orgId = randomUUID();
  const projectId = randomUUID();
  const environmentId = randomUUID();
  const teamId = randomUUID();
  const renderingId = randomUUID();
  const collectionId = randomUUID();
  const workflowId = randomUUID();
  const projectName = `proj-${tag}`;
  const environmentName = "production";
  const collection = "orders";
  const dataDatabase = `${db.name}_d_${tag}`;
  await db.organizations.insertOne({ _id: orgId, name: `org-${tag}`, createdAt: now });
  await db.projects.insertOne({ _id: projectId, organizationId: orgId, name: projectName, requiresSso: opts.requiresSso ?? false, createdAt: now });
  await db.environments.insertOne({ _id: environmentId, projectId, name: environmentName, dataDatabase, createdAt: now });
  await db.teams.insertOne({ _id: teamId, projectId, name: "ops", memberIds: [], createdAt: now });
  await db.renderings.insertOne({ _id: renderingId, projectId, teamId, environmentId, createdAt: now });
  const primaryKey = opts.primaryKey ?? ["id"];
  await db.collections.insertOne({ _id: collectionId, environmentId, name: collection, primaryKey, createdAt: now });
  await db.permissions.insertOne({
    _id: `${renderingId}:${collectionId}`,
    renderingId,
    collectionId,
    readRoles: ["admin", "editor", "user"],
    editRoles: ["admin", "editor", "user"],
    scope: opts.scope ?? {},
  });
  const admin = await addUser(db, orgId, projectId, "admin", { teamId });
  const user = await addUser(db, orgId, projectId, "user", { teamId });
  await db.workflows.insertOne({
    _id: workflowId,
    projectId,
    environmentId,
    renderingId,
    collectionId,
    name: "test workflow",
    triggerRoles: [],
    versions: [
      { version: 1, active: true, steps: opts.steps ?? [{ type: "load_record" }, { type: "update_record", set: { status: "done" } }], publishedAt: now },
    ],
    webhook: { enabled: true, generation: 1, rateLimitPerMinute: 60, everEnabled: true },
    createdAt: now,
  });
  const records = opts.records ?? [1, 2, 3, 4, 5].map((i) => ({ id: `r${i}`, status: "new", region: "eu" }));
  await db
    .dataDb(dataDatabase)
    .collection(collection)
    .insertMany(records.map((r) => ({ ...r })));
  const recordIds = records.map((r) => primaryKey.map((k) => String((r as Record<string, unknown>)[k])).join("|"));
  const adminToken = (await addAppToken(db, admin._id)).plaintext;
  const userToken = (await addAppToken(db, user._id)).plaintext;
  const apiToken = (await addApiToken(db, admin._id, projectId)).plaintext;
  return {
    orgId,
    projectId,
    projectName,
    environmentId,
    environmentName,
    teamId,
    renderingId,
    collectionId,
    collection,
    dataDatabase,
    workflowId,
    admin,
    user,
    adminToken,
    userToken,
    apiToken,
    recordIds,
  };
}
