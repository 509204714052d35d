// Tenants and security, the small ones: a demoted admin's API token no longer follows runs;
// e-mail addresses are unique per organization only; the CLI shows terminal controls escaped;
// no demo on a real MongoDB unless asked; the log filters have indexes. Real server and database.
import { spawn } from "node:child_process";
import { storeFixtures } from "../src/store/index.js";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorBody } from "../src/rpc/errors.js";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { loadConfig } from "../src/config.js";
import { apiClient } from "./helpers/api.js";
import { queueRun, waitForRun } from "./helpers/runs.js";
import { BOOTSTRAP_SECRET, ROOT, startServer, type TestServer } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server?.stop());

describe("a demoted or removed admin's API token", () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server, { steps: [{ type: "wait", seconds: 60 }] });
  });

  it("gets 403 following runs: GET, ?wait and WatchRun", async () => {
    const run = await queueRun(server.deps.store, w, "r1");
    const api = apiClient(server.gateway, w.apiToken);
    expect((await api.get(`/v1/runs/${run._id}`)).status).toBe(200);
    const watch = () =>
      createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" })).watchRun(
        { runId: run._id },
        { headers: { authorization: `Bearer ${w.apiToken}` } },
      );
    const roles = server.deps.store.directory.roles;
    for (const demote of [() => roles.set(w.orgId, w.projectId, w.admin._id, "editor"), () => roles.remove(w.orgId, w.projectId, w.admin._id)]) {
      await demote();
      for (const path of [`/v1/runs/${run._id}`, `/v1/runs/${run._id}?wait=1s`]) {
        const r = await api.get(path);
        expect(r.status, path).toBe(403);
        expect(r.body).toEqual(errorBody("permission_denied", "the token's creator is no longer an admin of the project"));
      }
      const err = await (async () => {
        for await (const _ of watch()) return undefined;
      })().catch((e: unknown) => ConnectError.from(e));
      expect(err?.code).toBe(Code.PermissionDenied);
      await roles.set(w.orgId, w.projectId, w.admin._id, "admin");
    }
  });
});

describe("e-mail addresses", () => {
  it("are unique per organization: another organization's addresses neither collide nor show", async () => {
    const tag = Date.now().toString(36);
    const boot = (name: string, email: string) => adminClient(server.baseUrl, BOOTSTRAP_SECRET).bootstrap({ organizationName: name, adminEmail: email });
    const a = await boot(`a-${tag}`, `root-${tag}@example.test`);
    const b = await boot(`b-${tag}`, `root-${tag}@example.test`);
    expect(b.admin!.email).toBe(a.admin!.email);
    const inA = adminClient(server.baseUrl, a.adminToken);
    const inB = adminClient(server.baseUrl, b.adminToken);
    await inA.createUser({ email: `shared-${tag}@example.test` });
    expect((await inB.createUser({ email: `shared-${tag}@example.test` })).user!.email).toBe(`shared-${tag}@example.test`);
    const again = await inB.createUser({ email: `shared-${tag}@example.test` }).catch((e: unknown) => ConnectError.from(e));
    expect((again as ConnectError).code).toBe(Code.AlreadyExists);
  });
});

/** `runhook …args` as a user runs it; stopped after `stopWhen` sees enough output (or 20 s). */
function cli(args: string[], env: Record<string, string>, stopWhen: (out: string) => boolean = () => false): Promise<string> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNHOOK_") && k !== "MONGODB_URI"));
  const child = spawn(process.execPath, [join(ROOT, "bin/runhook.js"), ...args], {
    env: { ...base, RUNHOOK_URL: server.baseUrl, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const take = (d: Buffer) => {
    out += d.toString();
    if (stopWhen(out)) child.kill("SIGTERM");
  };
  child.stdout.on("data", take);
  child.stderr.on("data", take);
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  return new Promise((resolve) =>
    child.once("close", () => {
      clearTimeout(timer);
      resolve(out);
    }),
  );
}

describe("the CLI shows what tenants wrote with terminal controls escaped", () => {
  // Clear the screen, set the clipboard (OSC 52), a C1 CSI, a right-to-left override.
  const evil = "r1\x1b[2J\x1b]52;c;ZXZpbA==\x07\u009b31m\u202e";
  let w: World;
  let runId: string;
  beforeAll(async () => {
    w = await createWorld(server);
    runId = (await queueRun(server.deps.store, w, evil))._id;
    expect((await waitForRun(server.deps.store, runId)).state).toBe("FAILED"); // no such record
  });

  it("runhook runs watch", async () => {
    const out = await cli(["runs", "watch", runId], { RUNHOOK_TOKEN: w.apiToken });
    expect(out).toContain("r1\\u001b[2J\\u001b]52;c;ZXZpbA==\\u0007\\u009b31m\\u202e");
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that no control character reaches the terminal
    expect(out).not.toMatch(/[\x1b\x07\u009b\u202e]/);
  });

  it("runhook logs tail (NDJSON that still parses to the same record id)", async () => {
    const out = await cli(
      ["logs", "tail", "--project", w.projectName, "--environment", w.environmentName, "--interval", "0.2"],
      { RUNHOOK_TOKEN: w.apiToken },
      // The failed run's entry, as the /v1 list shows it.
      (o) => o.includes('"abortWorkflow"'),
    );
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that no control character reaches the terminal
    expect(out).not.toMatch(/[\x1b\x07\u009b\u202e]/);
    const failed = out
      .split("\n")
      .filter((l) => l.includes('"abortWorkflow"'))
      .map((l) => JSON.parse(l) as { recordIds: string[]; label: string });
    expect(failed[0]!.label).toMatch(/failed$/);
    expect(failed[0]!.recordIds).toEqual([evil]);
  });
});

describe("configuration", () => {
  const base = { RUNHOOK_BOOTSTRAP_SECRET: BOOTSTRAP_SECRET, RUNHOOK_SIGNING_KEYS: `k1:${Buffer.alloc(32, 1).toString("base64url")}` };
  it("seeds no demo on a real MongoDB unless RUNHOOK_DEMO asks for it", () => {
    expect(loadConfig({ ...base, MONGODB_URI: "mongodb://db.example/runhook" }).demo).toBe(false);
    expect(loadConfig({ ...base, MONGODB_URI: "mongodb://db.example/runhook", RUNHOOK_DEMO: "1" }).demo).toBe(true);
    expect(loadConfig({ ...base }).demo).toBe(true);
  });

  it("reads the limit before authentication, trusted proxies and the Bootstrap switch", () => {
    const c = loadConfig({ ...base });
    expect([c.authFailureLimitPerMinute, c.trustedProxies, c.bootstrap]).toEqual([100, [], true]);
    const d = loadConfig({ ...base, RUNHOOK_AUTH_FAILURE_LIMIT: "30", RUNHOOK_TRUSTED_PROXIES: "10.0.0.0/8, ::1", RUNHOOK_BOOTSTRAP: "off" });
    expect([d.authFailureLimitPerMinute, d.trustedProxies, d.bootstrap]).toEqual([30, ["10.0.0.0/8", "::1"], false]);
    expect(() => loadConfig({ ...base, RUNHOOK_TRUSTED_PROXIES: "proxy.example" })).toThrow(/RUNHOOK_TRUSTED_PROXIES/);
  });
});

describe("indexes", () => {
  it("serve the log filters by user id and e-mail, and e-mails per organization", async () => {
    const keys = async (c: { listIndexes(): { toArray(): Promise<{ key: Record<string, number>; unique?: boolean }[]> } }) =>
      (await c.listIndexes().toArray()).map((i) => ({ key: JSON.stringify(i.key), unique: i.unique === true }));
    const db = storeFixtures(server.deps.store);
    const activity = (await keys(db.activityLogs)).map((i) => i.key);
    const admin = (await keys(db.adminLogs)).map((i) => i.key);
    expect(activity).toContain(JSON.stringify({ environmentId: 1, "user.id": 1, seq: 1 }));
    expect(activity).toContain(JSON.stringify({ environmentId: 1, "user.email": 1, seq: 1 }));
    expect(admin).toContain(JSON.stringify({ projectId: 1, "actor.id": 1, seq: 1 }));
    expect(admin).toContain(JSON.stringify({ projectId: 1, "actor.email": 1, seq: 1 }));
    const users = await keys(db.users);
    expect(users).toContainEqual({ key: JSON.stringify({ organizationId: 1, email: 1 }), unique: true });
    expect(users.map((i) => i.key)).not.toContain(JSON.stringify({ email: 1 }));
  });
});
