// Per-token rate limit of the public API: headers on every /v1 response, and one shared
// count across instances (two server processes, limit 5 per minute).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "./helpers/api.js";
import { openTestApp, serverForFile, spawnServer, testDbName, twoServersForFile, type ChildServer } from "./helpers/server.js";
import { addApiToken, createWorld, type World } from "../fixtures/world.js";
import { sleep } from "../src/lib/sleep.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { adminClient } from "./helpers/webhook.js";

describe("rate-limit headers", () => {
  const server = serverForFile();
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
  });

  it("are on every /v1 response, success or error, and count down", async () => {
    const c = apiClient(server.baseUrl, w.apiToken);
    const path = `/v1/project/${w.projectName}/admin-logs`;
    const r1 = await c.get(path);
    const r2 = await c.get(`/v1/project/${w.projectName}/environment/nope/notes`);
    expect(r1.status).toBe(200);
    expect(r2.status).toBe(404);
    const now = Math.floor(Date.now() / 1000);
    for (const [r, remaining] of [
      [r1, 599],
      [r2, 598],
    ] as const) {
      expect(r.headers.get("x-ratelimit-limit")).toBe("600");
      expect(r.headers.get("x-ratelimit-remaining")).toBe(String(remaining));
      const reset = Number(r.headers.get("x-ratelimit-reset"));
      expect(reset % 60).toBe(0);
      expect(reset).toBeGreaterThan(now - 1);
      expect(reset).toBeLessThanOrEqual(now + 61);
      expect(r.headers.get("ratelimit-policy")).toBe("600;w=60");
      expect(r.headers.get("ratelimit")).toMatch(new RegExp(`^limit=600, remaining=${remaining}, reset=\\d+$`));
    }
    // Other /v1 routes (runs, unknown paths) and requests without a token carry them too.
    for (const p of ["/v1/runs/00000000-0000-4000-8000-000000000000", "/v1/nope"]) {
      const r = await c.get(p);
      expect(r.headers.get("x-ratelimit-remaining"), p).not.toBeNull();
    }
    const anon = await apiClient(server.baseUrl).get(path);
    expect(anon.status).toBe(401);
    // No token, no token bucket: the figures of the address's limit on failed authentications.
    expect(anon.headers.get("x-ratelimit-limit")).toBe(String(server.deps.config.authFailureLimitPerMinute));
    // Not on routes outside /v1.
    expect((await fetch(`${server.baseUrl}/healthz`)).headers.get("x-ratelimit-limit")).toBeNull();
  });
});

describe("rate limit across two processes", () => {
  const { app, a, b } = twoServersForFile({ RUNHOOK_API_RATE_LIMIT: "5", RUNHOOK_EXECUTOR: "false" });
  let w: World;
  beforeAll(async () => {
    w = await createWorld(app);
  });

  it("shares one count per token: 5 answers per window in total, then 429 with Retry-After", async () => {
    // Stay inside one window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await sleep(60_500 - intoMinute);
    const path = `/v1/project/${w.projectName}/admin-logs`;
    const statuses: number[] = [];
    let throttled: Awaited<ReturnType<ReturnType<typeof apiClient>["get"]>> | undefined;
    for (let i = 0; i < 12; i++) {
      const r = await apiClient(i % 2 ? a.baseUrl : b.baseUrl, w.apiToken).get(path);
      statuses.push(r.status);
      if (r.status === 429) throttled = r;
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
    expect(statuses.slice(0, 5).every((s) => s === 200)).toBe(true);
    expect(throttled!.body).toEqual({
      code: "resource_exhausted",
      message: expect.stringContaining("rate limit"),
      error: (throttled!.body as { message: string }).message,
    });
    const retryAfter = Number(throttled!.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(throttled!.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(throttled!.headers.get("x-ratelimit-limit")).toBe("5");
    // Another token has its own budget.
    const t2 = await addApiToken(app!, w.admin._id, w.projectId);
    expect((await apiClient(a.baseUrl, t2.plaintext).get(path)).status).toBe(200);
  });
});

describe("the AdminService's limit, per token and per organization", () => {
  let server: ChildServer;
  let app: Awaited<ReturnType<typeof openTestApp>> | undefined;
  let w: World;
  let other: World;
  beforeAll(async () => {
    const dbName = testDbName();
    app = await openTestApp(dbName);
    [w, other] = [await createWorld(app), await createWorld(app)];
    server = await spawnServer(dbName, { env: { RUNHOOK_ADMIN_RATE_LIMIT: "3", RUNHOOK_ADMIN_ORG_RATE_LIMIT: "5", RUNHOOK_EXECUTOR: "false" } });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    app?.stop();
    await app?.deps.store.close();
  });

  it("refuses a token's 4th call in a minute, and the organization's 6th from any of its tokens; others go on", async () => {
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await sleep(60_500 - intoMinute);
    const call = (token: string, world: World) =>
      adminClient(server.baseUrl, token)
        .getWorkflow({ workflowId: world.workflowId })
        .then(
          () => "ok",
          (e: unknown) => {
            const err = ConnectError.from(e);
            return `${Code[err.code]} retry-after=${err.metadata.get("retry-after") !== null}`;
          },
        );
    const refused = "ResourceExhausted retry-after=true";
    expect([await call(w.ownerToken, w), await call(w.ownerToken, w), await call(w.ownerToken, w)]).toEqual(["ok", "ok", "ok"]);
    expect(await call(w.ownerToken, w)).toBe(refused); // the token's limit
    expect([await call(w.adminToken, w), await call(w.adminToken, w)]).toEqual(["ok", "ok"]);
    expect(await call(w.adminToken, w)).toBe(refused); // the organization's limit: 5 in all
    expect(await call(other.ownerToken, other)).toBe("ok"); // another organization
    // A made-up token is answered unauthenticated and counts nowhere.
    expect(await call(`rh_app_${"z".repeat(43)}`, w)).toBe("Unauthenticated retry-after=false");
  });
});
