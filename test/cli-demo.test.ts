// `runhook start` on an empty database with the demo on (RUNHOOK_DEMO), as a newcomer runs it: the
// banner names two tokens that work — the demo user's application token and the demo admin's, for
// every console page — and the demo's first runs are there to see: two that succeed on records of
// the demo, one that fails on a record that does not exist. The banner's own first command (a
// webhook call on record 1001) still starts a run.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { sleep } from "../src/lib/sleep.js";
import { spawnServer, testDbName, type ChildServer } from "./helpers/server.js";
import { adminClient, local, postHook } from "./helpers/webhook.js";

let server: ChildServer;
let banner: string;

beforeAll(async () => {
  server = await spawnServer(testDbName(), { env: { RUNHOOK_DEMO: "true", PUBLIC_BASE_URL: "http://demo.example.test:8080" } });
  // The banner ends with the command-line example, printed once the demo is seeded.
  for (let waited = 0; !server.logs.raw().includes("npx runhook runs watch") && waited < 60_000; waited += 100) await sleep(100);
  banner = server.logs.raw();
}, 120_000);
afterAll(async () => server?.stop());

/** The value the banner prints after `label`. */
function printed(label: string): string {
  const line = banner.split("\n").find((l) => l.trimStart().startsWith(label));
  expect(line, `no "${label}" line in:\n${banner}`).toBeDefined();
  return line!.slice(line!.indexOf(label) + label.length).trim();
}

it("prints the user's application token and the admin's console token, each one working", async () => {
  const userToken = printed("application token (the identity of webhook runs):");
  const adminToken = printed("console (admin: every page):");
  expect([userToken, adminToken]).toEqual([expect.stringMatching(/^rh_app_/), expect.stringMatching(/^rh_app_/)]);
  expect(banner).toMatch(/sign in with the console \(admin\) token to see every page/);

  const admin = (await adminClient(server.baseUrl, adminToken).whoAmI({})).user;
  expect([admin?.email, admin?.organizationAdmin]).toEqual(["admin@demo.example", true]);
  const user = (await adminClient(server.baseUrl, userToken).whoAmI({})).user;
  expect([user?.email, user?.organizationAdmin]).toEqual(["user@demo.example", false]);
});

it("seeds the demo's first runs: two succeed, the one on a record that does not exist fails; record 1001 stays free", { timeout: 90_000 }, async () => {
  expect(printed("first runs, to see in the console:")).toBe("on 1002, 1003, and on 9999, which does not exist (it fails)");
  const adminToken = printed("console (admin: every page):");
  const runs = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const headers = { authorization: `Bearer ${adminToken}` };
  const listed = await runs.listRuns({ projectName: "demo", environmentName: "production", options: { limit: 10 } }, { headers });
  expect(listed.runs.map((r) => [r.recordId, r.via, r.user?.email]).sort()).toEqual([
    ["1002", "webhook", "user@demo.example"],
    ["1003", "webhook", "user@demo.example"],
    ["9999", "webhook", "user@demo.example"],
  ]);
  const ended = await Promise.all(listed.runs.map(async (r) => (await runs.getRun({ runId: r.id, waitSeconds: 60 }, { headers })).run!));
  expect(Object.fromEntries(ended.map((r) => [r.recordId, r.state]))).toEqual({ "1002": "SUCCEEDED", "1003": "SUCCEEDED", "9999": "FAILED" });
  expect(ended.find((r) => r.recordId === "9999")?.error).toMatch(/record "9999" of collection "orders" not found/);

  // The banner's first command: a webhook call on record 1001 starts a run (no seeded run holds it).
  const webhookUrl = local(/curl -i -X POST '([^']+)'/.exec(banner)![1]!, "http://demo.example.test:8080", server.baseUrl);
  const hook = await postHook(webhookUrl, printed("application token (the identity of webhook runs):"), { record_id: "1001" });
  expect(hook.status).toBe(202);
});
