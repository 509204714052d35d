// The public API's logs and notes from the console: a console session of an admin of the
// project, or of its organization, reads and writes what the project's API token would; one of
// a user with another role, or of another organization, is refused; SSO's rule holds. An
// application token stays no public-API token (401), and so does a session's secret outside
// its cookie. Real server, over Connect as the console calls it, and /v1.
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { beforeAll, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { NoteService } from "../gen/runhook/v1/note_pb.js";
import { addAppToken, addUser, createWorld, type World } from "../fixtures/world.js";
import { apiClient } from "./helpers/api.js";
import { serverForFile } from "./helpers/server.js";
import { adminClient, code } from "./helpers/webhook.js";

const server = serverForFile();
let w: World;
beforeAll(async () => {
  w = await createWorld(server);
});

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

/** The public API's calls as the console makes them: Connect, with the session cookie, from the server's own origin; a Connect code or "ok". */
function asConsole(cookie: string) {
  const transport = createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" });
  const headers = { cookie: `rh_console=${cookie}`, origin: new URL(server.baseUrl).origin };
  const logs = createClient(LogService, transport);
  const notes = createClient(NoteService, transport);
  return {
    logs,
    notes,
    headers,
    /** The three reads of a project's admin: activity log, admin log, notes. */
    reads: (scope: { projectName: string; environmentName: string }) =>
      Promise.all([
        code(logs.listActivityLogs(scope, { headers })),
        code(logs.listAdminLogs({ projectName: scope.projectName }, { headers })),
        code(notes.listNotes({ scope }, { headers })),
      ]),
  };
}

it("an admin's console session reads the logs and writes notes as the project's API token would; other roles are refused", async () => {
  const editor = await addUser(server, w, "editor");
  const outsider = await createWorld(server);
  const scope = { projectName: w.projectName, environmentName: w.environmentName };
  const all = (outcome: "ok" | Code) => [outcome, outcome, outcome];
  for (const [who, token, outcome] of [
    ["project admin", w.adminToken, "ok"],
    ["organization admin", w.ownerToken, "ok"],
    ["user", w.userToken, Code.PermissionDenied],
    ["editor", (await addAppToken(server, editor._id)).plaintext, Code.PermissionDenied],
    ["admin of another organization", outsider.ownerToken, Code.PermissionDenied],
  ] as const) {
    expect([who, await asConsole(await sessionOf(token)).reads(scope)]).toEqual([who, all(outcome)]);
  }
  const session = await sessionOf(w.adminToken);
  // Neither the application token nor the session's secret is a public-API token on /v1 (the
  // session is a token only as the console's cookie).
  for (const token of [w.adminToken, session])
    for (const path of [`${env()}/activity-logs`, `/v1/project/${w.projectName}/admin-logs`, `${env()}/notes`])
      expect([path, (await apiClient(server.baseUrl, token).get(path)).status]).toEqual([path, 401]);
  // A note written from an admin's session is the admin's.
  const admin = asConsole(session);
  const note = await admin.notes.createNote({ scope, collection: w.collection, recordId: "r1", content: "<p>hi</p>" }, { headers: admin.headers });
  expect(note.note?.user).toMatchObject({ id: w.admin._id, email: w.admin.email });
  // A project name that does not exist is refused as one without a role (no probing).
  expect(await admin.reads({ projectName: `nope-${w.projectName}`, environmentName: w.environmentName })).toEqual(all(Code.PermissionDenied));
  const page = await admin.logs.listAdminLogs({ projectName: w.projectName }, { headers: admin.headers });
  expect(page.adminLogs.length).toBeGreaterThan(0);
});

it("an SSO project refuses an admin's session opened with a token made outside an SSO session", async () => {
  const sso = await createWorld(server, { requiresSso: true });
  const scope = { projectName: sso.projectName, environmentName: sso.environmentName };
  expect((await asConsole(await sessionOf(sso.adminToken)).reads(scope))[1]).toBe(Code.PermissionDenied);
  const ssoToken = (await adminClient(server.baseUrl, server.deps.config.bootstrapSecret).issueSsoToken({ userId: sso.admin._id })).plaintext;
  expect((await asConsole(await sessionOf(ssoToken)).reads(scope))[1]).toBe("ok");
});
