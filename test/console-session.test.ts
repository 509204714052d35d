// Console sign-in: an application token buys a session cookie (HttpOnly, SameSite=Strict,
// expiring, stored hashed); the console's Connect calls carry the cookie, which stands for the
// token only from the server's own origin; revoking the token or signing out ends the session;
// failed sign-ins count toward the limit on failed authentications. Real server and database.
import { randomUUID } from "node:crypto";
import { beforeAll, expect, it } from "vitest";
import { CONSOLE_SESSION_MAX_MS } from "../src/domain/auth/console-sessions.js";
import { CONSOLE_SIGN_INS_PER_MINUTE } from "../src/http/console.js";
import { hashToken } from "../src/domain/auth/tokens.js";
import { storeFixtures } from "../src/store/index.js";
import { addAppToken, createWorld, type World } from "../fixtures/world.js";
import { serverForFile, startServer } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_AUTH_FAILURE_LIMIT: "5" } });
let w: World;
let origin: string;

beforeAll(async () => {
  w = await createWorld(server);
  origin = new URL(server.baseUrl).origin;
});

const signIn = (token: string, from: string | null = origin) =>
  fetch(`${server.baseUrl}/console/session`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(from ? { origin: from } : {}) },
    body: JSON.stringify({ token }),
  });

/** The session cookie's value from a sign-in answer. */
const cookieOf = (res: Response) => /rh_console=([^;]*)/.exec(res.headers.get("set-cookie") ?? "")?.[1] ?? "";

/** A Connect call of the console (GetWorkflow, as JSON) with the cookie, from `from`: its status. */
const consoleCall = async (cookie: string, from: string | null = origin) =>
  (
    await fetch(`${server.baseUrl}/runhook.v1.AdminService/GetWorkflow`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: `other=1; rh_console=${cookie}`, ...(from ? { origin: from } : {}) },
      body: JSON.stringify({ workflowId: w.workflowId }),
    })
  ).status;

it("signs in with an application token: a session cookie that only the server's own pages can use", async () => {
  const res = await signIn(w.adminToken);
  expect(res.status).toBe(201);
  expect(await res.json()).toMatchObject({ user: { id: w.admin._id, email: w.admin.email }, expiresAt: expect.any(String) });
  const setCookie = res.headers.get("set-cookie")!;
  expect(setCookie).toMatch(/^rh_console=rh_ses_[0-9a-f]{32}_[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/);
  expect(Number(/Max-Age=(\d+)/.exec(setCookie)![1])).toBeLessThanOrEqual(CONSOLE_SESSION_MAX_MS / 1000);
  expect(res.headers.get("cache-control")).toBe("no-store");
  const cookie = cookieOf(res);
  // Stored as its hash only.
  const hex = /^rh_ses_([0-9a-f]{32})_/.exec(cookie)![1]!;
  const id = [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-");
  const stored = await storeFixtures(server.deps.store).consoleSessions.findOne({ _id: id });
  expect(stored).toMatchObject({ hash: hashToken(cookie), tokenId: expect.any(String), userId: w.admin._id });
  expect(JSON.stringify(stored)).not.toContain(cookie.slice(40));

  expect(await consoleCall(cookie)).toBe(200);
  // The page asks who is signed in (it cannot read the cookie): the user, or nobody.
  const who = (c: string) => fetch(`${server.baseUrl}/console/session`, { headers: { cookie: `rh_console=${c}` } }).then((r) => r.json());
  expect(await who(cookie)).toMatchObject({ user: { id: w.admin._id, email: w.admin.email } });
  // Another site's page, or no Origin at all: the cookie stands for nothing.
  expect(await consoleCall(cookie, "https://evil.example")).toBe(401);
  expect(await consoleCall(cookie, null)).toBe(401);
  // A sign-in from another site is refused before the token is looked at.
  expect((await signIn(w.adminToken, "https://evil.example")).status).toBe(403);
});

it("ends with a sign-out, and with a revoke of its token", async () => {
  const cookie = cookieOf(await signIn(w.adminToken));
  expect(await consoleCall(cookie)).toBe(200);
  const out = await fetch(`${server.baseUrl}/console/session`, { method: "DELETE", headers: { origin, cookie: `rh_console=${cookie}` } });
  expect(out.status).toBe(204);
  expect(out.headers.get("set-cookie")).toMatch(/^rh_console=; .*Max-Age=0/);
  expect(await consoleCall(cookie)).toBe(401);

  const token = await addAppToken(server, w.admin._id);
  const second = cookieOf(await signIn(token.plaintext));
  expect(await consoleCall(second)).toBe(200);
  await adminClient(server.baseUrl, w.ownerToken).revokeApplicationToken({ tokenId: token.id });
  expect(await consoleCall(second)).toBe(401);
});

it("refuses a session's own value, and counts failed sign-ins toward the limit on failed authentications", async () => {
  const cookie = cookieOf(await signIn(w.userToken));
  expect((await signIn(cookie)).status).toBe(401);
  const from = `10.9.${Math.floor(Math.random() * 250)}.1`;
  const statuses: number[] = [];
  for (let i = 0; i < 7; i++) {
    const res = await fetch(`${server.baseUrl}/console/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin, "x-forwarded-for": from },
      body: JSON.stringify({ token: `rh_app_${randomUUID().replace(/-/g, "")}_${"A".repeat(43)}` }),
    });
    statuses.push(res.status);
  }
  // Without a trusted proxy the forwarded address is ignored: these count by the test's own address.
  expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(5);
  expect(statuses.at(-1)).toBe(429);
});

it("counts a cookie that names no session as a failed authentication: guessing sessions is limited like guessing tokens", async () => {
  const limited = await startServer({ env: { RUNHOOK_AUTH_FAILURE_LIMIT: "3" } });
  try {
    const lw = await createWorld(limited);
    const who = (cookie: string) => fetch(`${limited.baseUrl}/console/session`, { headers: { cookie: `rh_console=${cookie}` } }).then((r) => r.json());
    // A real session's cookie, altered: nobody (a failed authentication of this address).
    const real = /rh_console=([^;]*)/.exec(
      (
        await fetch(`${limited.baseUrl}/console/session`, {
          method: "POST",
          headers: { "content-type": "application/json", origin: new URL(limited.baseUrl).origin },
          body: JSON.stringify({ token: lw.adminToken }),
        })
      ).headers.get("set-cookie")!,
    )![1]!;
    expect(await who(real)).toMatchObject({ user: { id: lw.admin._id } });
    expect(await who(`${real.slice(0, -1)}${real.endsWith("x") ? "y" : "x"}`)).toEqual({});
    for (let i = 0; i < 2; i++) expect(await who(`rh_ses_${randomUUID().replace(/-/g, "")}_${"A".repeat(43)}`)).toEqual({});
    // The address is now over its limit: a sign-in with a good token is refused before it is looked at.
    const res = await fetch(`${limited.baseUrl}/console/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: new URL(limited.baseUrl).origin },
      body: JSON.stringify({ token: lw.userToken }),
    });
    expect(res.status).toBe(429);
    // Asking who is signed in, even with the real cookie, says why instead of looking signed out.
    const asked = await fetch(`${limited.baseUrl}/console/session`, { headers: { cookie: `rh_console=${real}` } });
    expect(asked.status).toBe(429);
    expect(((await asked.json()) as { error?: string }).error).toMatch(/too many failed authentications/);
  } finally {
    await limited.stop();
  }
});

it("RUNHOOK_CONSOLE=false removes the sign-in with the pages: no session is made, and a session's cookie stands for nothing", async () => {
  // A database of its own (this file's has used up its failed authentications), served with the console and without.
  const on = await startServer();
  const off = await startServer({ dbName: on.dbName, env: { RUNHOOK_CONSOLE: "false" } });
  try {
    const ow = await createWorld(on);
    const post = (base: string, path: string, body: unknown, cookie = "") =>
      fetch(`${base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: new URL(base).origin, ...(cookie ? { cookie: `rh_console=${cookie}` } : {}) },
        body: JSON.stringify(body),
      });
    const cookie = cookieOf(await post(on.baseUrl, "/console/session", { token: ow.adminToken }));
    const getWorkflow = "/runhook.v1.AdminService/GetWorkflow";
    expect((await post(on.baseUrl, getWorkflow, { workflowId: ow.workflowId }, cookie)).status).toBe(200);
    const refused = await post(off.baseUrl, "/console/session", { token: ow.adminToken });
    expect(refused.status).toBe(404);
    expect(refused.headers.get("set-cookie")).toBeNull();
    expect((await post(off.baseUrl, getWorkflow, { workflowId: ow.workflowId }, cookie)).status).toBe(401);
  } finally {
    await off.stop();
    await on.stop();
  }
});

it("a session counts as its application token: one rate-limit budget however many sign-ins, and a bounded number of sign-ins; its secret is a token only as the cookie, and only once in it", async () => {
  const own = await startServer({ env: { RUNHOOK_ADMIN_RATE_LIMIT: "3" } });
  try {
    const ow = await createWorld(own);
    const ownOrigin = new URL(own.baseUrl).origin;
    const session = async () =>
      cookieOf(
        await fetch(`${own.baseUrl}/console/session`, {
          method: "POST",
          headers: { "content-type": "application/json", origin: ownOrigin },
          body: JSON.stringify({ token: ow.adminToken }),
        }),
      );
    const getWorkflow = (headers: Record<string, string>) =>
      fetch(`${own.baseUrl}/runhook.v1.AdminService/GetWorkflow`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: ownOrigin, ...headers },
        body: JSON.stringify({ workflowId: ow.workflowId }),
      }).then((r) => r.status);
    // Stay inside one window of the limits (a minute, fixed).
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_500 - intoMinute));
    const first = await session();
    // Its secret in an Authorization header, on Connect or /v1: no token (and no call counted).
    expect(await getWorkflow({ authorization: `Bearer ${first}` })).toBe(401);
    expect((await fetch(`${own.baseUrl}/v1/runs/${randomUUID()}`, { headers: { authorization: `Bearer ${first}` } })).status).toBe(401);
    // The cookie twice (one of them may be another site's of the domain): neither is trusted.
    expect(await getWorkflow({ cookie: `rh_console=${first}; rh_console=${first}` })).toBe(401);
    expect(await (await fetch(`${own.baseUrl}/console/session`, { headers: { cookie: `rh_console=${first}; rh_console=${first}` } })).json()).toEqual({});
    // Three calls a minute for the token: the sessions and the token itself share them.
    expect(await getWorkflow({ cookie: `rh_console=${first}` })).toBe(200);
    expect(await getWorkflow({ cookie: `rh_console=${first}` })).toBe(200);
    const second = await session();
    expect(await getWorkflow({ cookie: `rh_console=${second}` })).toBe(200);
    expect(await getWorkflow({ cookie: `rh_console=${second}` })).toBe(429);
    expect(await getWorkflow({ authorization: `Bearer ${ow.adminToken}` })).toBe(429);
    // Each sign-in stores a session: a token has CONSOLE_SIGN_INS_PER_MINUTE of them a minute (two made above).
    for (let i = 2; i < CONSOLE_SIGN_INS_PER_MINUTE; i++) expect(await session()).not.toBe("");
    const over = await fetch(`${own.baseUrl}/console/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ownOrigin },
      body: JSON.stringify({ token: ow.adminToken }),
    });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(over.headers.get("set-cookie")).toBeNull();
  } finally {
    await own.stop();
  }
});

it("behind HTTPS the cookie is __Host-rh_console and Secure: a plain rh_console (another site of the domain may set one) stands for nothing", async () => {
  const own = await startServer({ env: { PUBLIC_BASE_URL: "https://runhook.example" } });
  try {
    const ow = await createWorld(own);
    const origin = "https://runhook.example";
    const res = await fetch(`${own.baseUrl}/console/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin },
      body: JSON.stringify({ token: ow.adminToken }),
    });
    expect(res.status).toBe(201);
    const setCookie = res.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/^__Host-rh_console=rh_ses_[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+; Secure$/);
    const secret = /^__Host-rh_console=([^;]+)/.exec(setCookie)![1]!;
    const call = (cookie: string) =>
      fetch(`${own.baseUrl}/runhook.v1.AdminService/GetWorkflow`, {
        method: "POST",
        headers: { "content-type": "application/json", origin, cookie },
        body: JSON.stringify({ workflowId: ow.workflowId }),
      }).then((r) => r.status);
    expect(await call(`__Host-rh_console=${secret}`)).toBe(200);
    expect(await call(`rh_console=${secret}`)).toBe(401);
  } finally {
    await own.stop();
  }
});
