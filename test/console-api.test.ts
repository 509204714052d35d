// The public API's logs and notes from the console: a console session of an admin of the
// project, or of its organization, reads and writes what the project's API token would; one of
// a user with another role, or of another organization, is refused; SSO's rule holds. An
// application token itself stays no public-API token (401). Real server, over HTTP and Connect.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { addAppToken, addUser, createWorld, type World } from "../fixtures/world.js";
import { apiClient } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";

let server: TestServer;
let w: World;
beforeAll(async () => {
  server = await startServer();
  w = await createWorld(server);
});
afterAll(async () => server?.stop());

const env = () => `/v1/project/${w.projectName}/environment/${w.environmentName}`;

/** A console session of the token's user: the cookie's value. */
async function sessionOf(token: string): Promise<string> {
  const res = await fetch(`${server.baseUrl}/console/session`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: new URL(server.baseUrl).origin },
    body: JSON.stringify({ token }),
  });
  expect(res.status).toBe(201);
  return /rh_console=([^;]*)/.exec(res.headers.get("set-cookie")!)![1]!;
}

it("an admin's console session reads the logs and writes notes as the project's API token would; other roles are refused", async () => {
  const editor = await addUser(server, w, "editor");
  const outsider = await createWorld(server);
  for (const [who, token, status] of [
    ["project admin", await sessionOf(w.adminToken), 200],
    ["organization admin", await sessionOf(w.ownerToken), 200],
    ["user", await sessionOf(w.userToken), 403],
    ["editor", await sessionOf((await addAppToken(server, editor._id)).plaintext), 403],
    ["admin of another organization", await sessionOf(outsider.ownerToken), 403],
    ["project admin's application token", w.adminToken, 401],
  ] as const) {
    const api = apiClient(server.baseUrl, token);
    for (const path of [`${env()}/activity-logs`, `/v1/project/${w.projectName}/admin-logs`, `${env()}/notes`])
      expect([who, path, (await api.get(path)).status]).toEqual([who, path, status]);
  }
  // A note written from an admin's session is the admin's.
  const session = await sessionOf(w.adminToken);
  const note = await apiClient(server.baseUrl, session).post(`${env()}/notes`, { collection: w.collection, recordId: "r1", content: "<p>hi</p>" });
  expect(note.status).toBe(201);
  expect(note.body.user).toMatchObject({ id: w.admin._id, email: w.admin.email });
  // A project name that does not exist is refused as one without a role (no probing).
  expect((await apiClient(server.baseUrl, session).get(`/v1/project/nope-${w.projectName}/admin-logs`)).status).toBe(403);
  // As the console calls it: Connect, with the cookie, from the server's own origin.
  const logs = createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const page = await logs.listAdminLogs(
    { projectName: w.projectName },
    { headers: { cookie: `rh_console=${session}`, origin: new URL(server.baseUrl).origin } },
  );
  expect(page.adminLogs.length).toBeGreaterThan(0);
});

it("an SSO project refuses an admin's session opened with a token made outside an SSO session", async () => {
  const sso = await createWorld(server, { requiresSso: true });
  expect((await apiClient(server.baseUrl, await sessionOf(sso.adminToken)).get(`/v1/project/${sso.projectName}/admin-logs`)).status).toBe(403);
  const ssoToken = (await adminClient(server.baseUrl, server.deps.config.bootstrapSecret).issueSsoToken({ userId: sso.admin._id })).plaintext;
  expect((await apiClient(server.baseUrl, await sessionOf(ssoToken)).get(`/v1/project/${sso.projectName}/admin-logs`)).status).toBe(200);
});
