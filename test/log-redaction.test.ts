// No secret runhook issues or is configured with reaches its log: every kind (application,
// project API, organization API tokens, a console session's cookie, the bootstrap secret, a
// webhook key) is sent in every place a request has (a URL's path and query, headers, body
// fields) to a server process, whose own output is then read; and the logger itself is given
// each in every field a line can carry.
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configuredSecrets, loadConfig } from "../src/config.js";
import { createLogger } from "../src/lib/logging.js";
import { keyOfUrl } from "../src/domain/webhook-keys.js";
import { createWorld, type World } from "../fixtures/world.js";
import { BOOTSTRAP_SECRET, openTestApp, spawnServer, testDbName, testEnv, type ChildServer, type TestApp } from "./helpers/server.js";
import { adminClient, sleep } from "./helpers/webhook.js";

let app: TestApp;
let server: ChildServer;
let w: World;
/** Each kind of secret, by name. */
let secrets: Record<string, string>;

beforeAll(async () => {
  const dbName = testDbName();
  app = await openTestApp(dbName);
  w = await createWorld(app, { rateLimitPerMinute: 10_000 });
  server = await spawnServer(dbName, { env: { RUNHOOK_EXECUTOR: "false" } });
  const signIn = await fetch(`${server.baseUrl}/console/session`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: new URL(server.baseUrl).origin },
    body: JSON.stringify({ token: w.userToken }),
  });
  const orgToken = await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "redaction" });
  secrets = {
    application: w.userToken,
    "project API": w.apiToken,
    "organization API": orgToken.plaintext,
    "console session": /rh_console=([^;]*)/.exec(signIn.headers.get("set-cookie")!)![1]!,
    bootstrap: BOOTSTRAP_SECRET,
    "webhook key": keyOfUrl(w.hookPath),
  };
  expect(secrets["console session"]).toMatch(/^rh_ses_/);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  app?.stop();
  await app?.deps.store.close();
});

/** The part of a secret a leak would show (a token's prefix is no secret; its id and secret part are). */
const tell = (secret: string) => secret.slice(-24);

/** Every way a request carries `secret`: in its path and query (as is, and escaped), in headers, in body fields. */
function requestsCarrying(secret: string): { path: string; init?: RequestInit }[] {
  const s = encodeURIComponent(secret);
  const escaped = secret.replace(/_/g, "%5F");
  const origin = new URL(server.baseUrl).origin;
  const json = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({
    method: "POST",
    headers: { "content-type": "application/json", origin, ...headers },
    body: JSON.stringify(body),
  });
  return [
    // The path: unrouted, routed, and in a route's parameter.
    { path: `/nowhere/${s}` },
    { path: `/nowhere/${escaped}/more` },
    { path: `/v1/runs/${s}` },
    { path: `/hooks/${s}` },
    // The query: a value, a name, escaped, and a URL holding it.
    { path: `/healthz?token=${s}` },
    { path: `/healthz?${s}` },
    { path: `/v1/runs/${w.workflowId}?wait=${escaped}&x=1` },
    { path: `/healthz?next=${encodeURIComponent(`https://example.test/hooks/${secret}?t=${secret}`)}` },
    // Headers: the request id (logged), the credential headers, any other.
    { path: "/healthz", init: { headers: { "x-request-id": secret } } },
    { path: "/v1/runs/00000000-0000-4000-8000-000000000000", init: { headers: { authorization: `Bearer ${secret}`, "x-request-id": secret } } },
    { path: "/runhook.v1.AdminService/WhoAmI", init: json({}, { cookie: `rh_console=${secret}`, "x-request-id": secret }) },
    { path: "/healthz", init: { headers: { "x-api-key": secret, cookie: `other=${secret}` } } },
    // Body fields: a sign-in, a webhook call, a Connect call.
    { path: "/console/session", init: json({ token: secret }) },
    { path: w.hookPath, init: json({ record_id: secret }, { authorization: `Bearer ${w.userToken}` }) },
    { path: "/runhook.v1.RunService/GetRun", init: json({ runId: secret }, { authorization: `Bearer ${w.userToken}` }) },
  ];
}

describe("a server's own log output", () => {
  it("never shows any kind of secret, from any place of a request", async () => {
    const before = server.logs.lines().length;
    let sent = 0;
    for (const [kind, secret] of Object.entries(secrets)) {
      for (const { path, init } of requestsCarrying(secret)) {
        const res = await fetch(server.baseUrl + path, init);
        await res.arrayBuffer();
        expect(res.status, `${kind}: ${path}`).toBeGreaterThanOrEqual(200);
        sent++;
      }
    }
    await sleep(500); // the log is written asynchronously
    const lines = server.logs.lines().slice(before);
    // Every request was logged: the test reads the lines that could have leaked.
    expect(lines.filter((l) => l.msg === "request").length).toBeGreaterThanOrEqual(sent);
    const raw = server.logs.raw();
    for (const [kind, secret] of Object.entries(secrets)) {
      expect(raw.includes(secret), kind).toBe(false);
      expect(raw.includes(tell(secret)), kind).toBe(false);
    }
    // What a request with a secret shows instead: its URL redacted, and a request id of the server's own.
    expect(lines.some((l) => l.msg === "request" && String(l.url).startsWith("/healthz?token=[redacted]"))).toBe(true);
    const ids = lines.filter((l) => l.url === "/healthz").map((l) => String(l.requestId));
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("keeps a long request id of one case (a client's prefix and UUIDs, a trace id): echoed and logged as sent", async () => {
    const id = `client-${randomUUID()}-${randomUUID()}`;
    const res = await fetch(`${server.baseUrl}/healthz`, { headers: { "x-request-id": id } });
    expect(res.headers.get("x-request-id")).toBe(id);
    await sleep(500); // the log is written asynchronously
    expect(server.logs.lines().some((l) => l.requestId === id)).toBe(true);
  });
});

describe("the logger", () => {
  it("replaces every kind of secret in any field of a line: headers, a body, an error, the message", async () => {
    let out = "";
    const destination = new Writable({
      write(chunk, _encoding, done) {
        out += String(chunk);
        done();
      },
    });
    // The server's configuration (its bootstrap secret, and its webhook signing keys in both spellings).
    const configured = configuredSecrets(loadConfig({ ...process.env, ...testEnv("redaction") }));
    expect(configured).toContain(BOOTSTRAP_SECRET);
    const logger = createLogger("info", { secrets: configured, destination });
    const all = [...Object.values(secrets), ...configured];
    for (const secret of all) {
      const err = new Error(`could not use ${secret}`);
      logger.info(
        { headers: { cookie: `rh_console=${secret}`, "x-note": secret }, body: { field: secret, nested: [{ value: secret }] }, err },
        `seen ${secret}`,
      );
      logger.warn({ url: `/x?u=${encodeURIComponent(secret)}`, quoted: `"${secret}"` }, "encoded");
    }
    expect(out.split("\n").filter(Boolean)).toHaveLength(2 * all.length);
    for (const secret of all) {
      expect(out).not.toContain(tell(secret));
      expect(out).not.toContain(tell(encodeURIComponent(secret)));
    }
    expect(out).toContain('"field":"[redacted]"');
  });
});
