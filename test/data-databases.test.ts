// Data databases belong to the server: an organization never reaches a database by naming
// it. CreateEnvironment makes one per environment; naming one works only for a database the
// operator allowed for that organization in configuration; no two environments (of one
// tenant or two) ever share one, down to a unique index. Real server and database.
import { describe, expect, it } from "vitest";
import { storeFixtures } from "../src/store/index.js";
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { ConfigError, loadConfig } from "../src/config.js";
import { isDuplicateKey } from "../src/store/index.js";
import { serverForFile, testEnv } from "./helpers/server.js";
import { bootstrapTenant } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });
const db = () => storeFixtures(server.deps.store);

let n = 0;
/** An organization and a project of its own, built through AdminService as a tenant would. */
async function tenant() {
  const { orgId, admin, project } = await bootstrapTenant(server.baseUrl);
  return { orgId, admin, project };
}

async function refused(p: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await p;
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, message: e.rawMessage };
  }
  throw new Error("expected the call to be refused");
}

describe("data databases", () => {
  it("a tenant cannot get a database by naming it: not another tenant's, not any other", async () => {
    const victim = await tenant();
    const attacker = await tenant();
    const victimEnv = (await victim.admin.createEnvironment({ projectId: victim.project.id, name: "production" })).environment!;
    expect(victimEnv.dataDatabase).toBe(`${server.deps.store.databaseName}_d_${victimEnv.id.replace(/-/g, "").slice(0, 12)}`);
    for (const name of ["shared_victim_db", "another_application"]) {
      const r = await refused(attacker.admin.createEnvironment({ projectId: attacker.project.id, name: `steal-${n++}`, dataDatabase: name }));
      expect(r.code, name).toBe(Code.PermissionDenied);
      expect(r.message).toContain("RUNHOOK_DATA_DATABASES_ALLOWED");
    }
    // The victim's own database is one the server made: reserved, whoever asks.
    const stolen = await refused(
      attacker.admin.createEnvironment({ projectId: attacker.project.id, name: `steal-${n++}`, dataDatabase: victimEnv.dataDatabase }),
    );
    expect(stolen.code).toBe(Code.InvalidArgument);
    expect(stolen.message).toContain("reserved");
    expect(await db().environments.countDocuments({ projectId: attacker.project.id })).toBe(0);
    expect(await db().environments.countDocuments({ dataDatabase: victimEnv.dataDatabase })).toBe(1);
    // What the server makes is the environment's own: the attacker's environment gets another.
    const own = (await attacker.admin.createEnvironment({ projectId: attacker.project.id, name: "production" })).environment!;
    expect(own.dataDatabase).not.toBe(victimEnv.dataDatabase);
  });

  it("an allowed database is attached by its organization only, and by one environment only", async () => {
    const owner = await tenant();
    const other = await tenant();
    const legacy = `legacy_crm_${n++}`;
    // As the operator configures it: RUNHOOK_DATA_DATABASES_ALLOWED=<legacy>=<owner's organization id>.
    server.deps.config.dataDatabasesAllowed.set(legacy, owner.orgId);
    const denied = await refused(other.admin.createEnvironment({ projectId: other.project.id, name: "production", dataDatabase: legacy }));
    expect(denied.code).toBe(Code.PermissionDenied);
    const env = (await owner.admin.createEnvironment({ projectId: owner.project.id, name: "production", dataDatabase: legacy })).environment!;
    expect(env.dataDatabase).toBe(legacy);
    const again = await refused(owner.admin.createEnvironment({ projectId: owner.project.id, name: "staging", dataDatabase: legacy }));
    expect(again.code).toBe(Code.AlreadyExists);
    expect(again.message).toContain(`"${legacy}" is already the database of another environment`);
    // The environment's own name clash is still told as such.
    const sameName = await refused(owner.admin.createEnvironment({ projectId: owner.project.id, name: "production" }));
    expect(sameName).toMatchObject({ code: Code.AlreadyExists, message: 'environment "production" already exists' });
    // Reserved names stay refused even when listed.
    server.deps.config.dataDatabasesAllowed.set(server.deps.store.databaseName, owner.orgId);
    expect(
      (await refused(owner.admin.createEnvironment({ projectId: owner.project.id, name: "svc", dataDatabase: server.deps.store.databaseName }))).code,
    ).toBe(Code.InvalidArgument);
    server.deps.config.dataDatabasesAllowed.delete(server.deps.store.databaseName);
    // In any case of letters (MongoDB tells database names apart only so), and the server's own
    // names for environments (another environment's database, now or once).
    for (const reserved of [
      server.deps.store.databaseName.toUpperCase(),
      "Admin",
      `${server.deps.store.databaseName}_d_0123456789ab`,
      `${server.deps.store.databaseName.toUpperCase()}_D_0123456789ab`,
    ]) {
      server.deps.config.dataDatabasesAllowed.set(reserved, owner.orgId);
      expect((await refused(owner.admin.createEnvironment({ projectId: owner.project.id, name: `svc-${n++}`, dataDatabase: reserved }))).code, reserved).toBe(
        Code.InvalidArgument,
      );
      server.deps.config.dataDatabasesAllowed.delete(reserved);
    }
  });

  it("two environments can never share a database: a unique index refuses even a direct insert", async () => {
    const t = await tenant();
    const env = (await t.admin.createEnvironment({ projectId: t.project.id, name: "production" })).environment!;
    const err = await server.deps.store.directory.environments
      .insert({ _id: randomUUID(), projectId: randomUUID(), name: "production", dataDatabase: env.dataDatabase, createdAt: new Date() })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(isDuplicateKey(err)).toBe(true);
  });

  it("the allow-list is configuration: database=organizationId pairs, reserved names refused", () => {
    const id = randomUUID();
    const base = testEnv("cfg");
    expect([...loadConfig({ ...base, RUNHOOK_DATA_DATABASES_ALLOWED: ` crm=${id}, billing_2=${id} ` }).dataDatabasesAllowed]).toEqual([
      ["crm", id],
      ["billing_2", id],
    ]);
    expect(loadConfig(base).dataDatabasesAllowed.size).toBe(0);
    for (const bad of ["crm", `admin=${id}`, `Config=${id}`, `a.b=${id}`, "crm=not-an-id"]) {
      expect(() => loadConfig({ ...base, RUNHOOK_DATA_DATABASES_ALLOWED: bad }), bad).toThrow(ConfigError);
    }
  });
});
