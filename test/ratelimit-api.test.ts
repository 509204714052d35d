// Per-token rate limit of the public API: its configuration (a minute, an hour and a day),
// headers on every /v1 response for the tightest window, each window enforced on its own, and
// one shared count across instances (two server processes, limit 5 per minute).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, type ApiResponse } from "./helpers/api.js";
import {
  openTestApp,
  serverForFile,
  spawnServer,
  startServer,
  testDbName,
  testEnv,
  twoServersForFile,
  type ChildServer,
  type TestServer,
} from "./helpers/server.js";
import { addApiToken, createWorld, type World } from "../fixtures/world.js";
import { sleep } from "../src/lib/sleep.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { adminClient, awaitFreshWindow } from "./helpers/webhook.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { errorBody } from "../src/rpc/errors.js";

describe("the per-token limits' configuration", () => {
  const UNSET = { RUNHOOK_API_RATE_LIMIT: "", RUNHOOK_API_RATE_LIMIT_HOURLY: "", RUNHOOK_API_RATE_LIMIT_DAILY: "" };
  const load = (env: Record<string, string>) => loadConfig({ ...testEnv(testDbName()), ...UNSET, ...env });

  it("defaults to 60 a minute, 1,000 an hour and 10,000 a day, for organization API tokens too", () => {
    const config = load({});
    expect(config.apiRateLimit).toEqual({ perMinute: 60, perHour: 1000, perDay: 10_000 });
    expect(config.orgApiRateLimit).toEqual({ perMinute: 60, perHour: 1000, perDay: 10_000 });
  });

  it("reads each window's variable; an organization API token's follow the API's unless set", () => {
    const config = load({
      RUNHOOK_API_RATE_LIMIT: "7",
      RUNHOOK_API_RATE_LIMIT_HOURLY: "70",
      RUNHOOK_API_RATE_LIMIT_DAILY: "700",
      RUNHOOK_ORG_API_RATE_LIMIT_DAILY: "9",
    });
    expect(config.apiRateLimit).toEqual({ perMinute: 7, perHour: 70, perDay: 700 });
    expect(config.orgApiRateLimit).toEqual({ perMinute: 7, perHour: 70, perDay: 9 });
    const org = load({ RUNHOOK_ORG_API_RATE_LIMIT: "3", RUNHOOK_ORG_API_RATE_LIMIT_HOURLY: "4" });
    expect(org.orgApiRateLimit).toEqual({ perMinute: 3, perHour: 4, perDay: 10_000 });
    expect(org.apiRateLimit).toEqual({ perMinute: 60, perHour: 1000, perDay: 10_000 });
  });

  it("refuses what is not a whole number from 1 to a million a minute kept up the whole window", () => {
    const highest = { RUNHOOK_API_RATE_LIMIT: "1000000", RUNHOOK_API_RATE_LIMIT_HOURLY: "60000000", RUNHOOK_API_RATE_LIMIT_DAILY: "1440000000" };
    expect(load(highest).apiRateLimit).toEqual({ perMinute: 1_000_000, perHour: 60_000_000, perDay: 1_440_000_000 });
    for (const [name, top] of Object.entries(highest)) {
      for (const bad of ["0", "-1", "1.5", "ten", " 5", String(Number(top) + 1)]) {
        expect(() => load({ [name]: bad }), `${name}=${bad}`).toThrow(ConfigError);
        expect(() => load({ [name.replace("RUNHOOK_", "RUNHOOK_ORG_")]: bad }), `ORG ${name}=${bad}`).toThrow(ConfigError);
      }
    }
  });
});

describe("rate-limit headers", () => {
  // The minute and the hour tie (600 each): the headers show the minute, which ends first.
  const server = serverForFile({ env: { RUNHOOK_API_RATE_LIMIT: "600", RUNHOOK_API_RATE_LIMIT_HOURLY: "600", RUNHOOK_API_RATE_LIMIT_DAILY: "100000" } });
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
      expect(r.headers.get("ratelimit-policy")).toBe("600;w=60, 600;w=3600, 100000;w=86400");
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
    // The API reference lists this server's windows.
    const doc = (await server.gateway.inject({ method: "GET", url: "/openapi.json" })).json();
    const headers = doc.paths["/v1/project/{projectName}/admin-logs"].get.responses["200"].headers;
    expect(headers["RateLimit-Policy"].description).toContain("600;w=60, 600;w=3600, 100000;w=86400");
  });
});

/**
 * A refusal's Retry-After, checked against its message and against the end of the refusing
 * window (`windowSeconds` long), as the clock read before and after the call places it.
 */
function retryAfterOf(r: ApiResponse, windowSeconds: number, calledAt: { before: number; after: number }): number {
  const retryAfter = Number(r.headers.get("retry-after"));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(r.body.message).toMatch(new RegExp(`; retry after ${retryAfter} s$`));
  const windowEnd = (Math.floor(calledAt.before / 1000 / windowSeconds) + 1) * windowSeconds;
  expect(windowEnd - retryAfter).toBeGreaterThanOrEqual(Math.floor(calledAt.before / 1000));
  expect(windowEnd - retryAfter).toBeLessThanOrEqual(Math.floor(calledAt.after / 1000));
  return retryAfter;
}

/** A call, with the clock read before and after it. */
async function timed(call: () => Promise<ApiResponse>) {
  const before = Date.now();
  const r = await call();
  return { r, calledAt: { before, after: Date.now() } };
}

describe("each window on its own: a minute, an hour, a day", () => {
  // This server allows 5 calls an hour; the second, on the same database, 9 a minute and 8 a day.
  const server = serverForFile({
    env: { RUNHOOK_API_RATE_LIMIT: "1000", RUNHOOK_API_RATE_LIMIT_HOURLY: "5", RUNHOOK_API_RATE_LIMIT_DAILY: "1000", RUNHOOK_EXECUTOR: "false" },
  });
  let daily: TestServer;
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
    daily = await startServer({
      dbName: server.dbName,
      env: { RUNHOOK_API_RATE_LIMIT: "9", RUNHOOK_API_RATE_LIMIT_HOURLY: "1000", RUNHOOK_API_RATE_LIMIT_DAILY: "8", RUNHOOK_EXECUTOR: "false" },
    });
  });
  afterAll(async () => daily?.stop());
  /** The window of an answer's X-RateLimit-Reset: a minute's is at most a minute away (the last minute of a day ends with it). */
  const shownWindow = (r: ApiResponse) => {
    const reset = Number(r.headers.get("x-ratelimit-reset"));
    const window = reset - Math.floor(Date.now() / 1000) <= 60 ? "minute" : reset % 86_400 === 0 ? "day" : reset % 3600 === 0 ? "hour" : "?";
    return `${r.headers.get("x-ratelimit-limit")}/${r.headers.get("x-ratelimit-remaining")}/${window}`;
  };

  it("the hour refuses past its limit, and the headers show the tightest window; refused calls spend no other window", async () => {
    await awaitFreshWindow(20_000); // every window (each ends on a minute) stays the same
    const token = (await addApiToken(server, w.admin._id, w.projectId)).plaintext;
    const path = `/v1/project/${w.projectName}/admin-logs`;
    const hourly = apiClient(server.gateway, token);
    for (let i = 1; i <= 5; i++) {
      const r = await hourly.get(path);
      expect(r.status).toBe(200);
      // 1000 − i left a minute and a day, 5 − i an hour.
      expect(shownWindow(r)).toBe(`5/${5 - i}/hour`);
      expect(r.headers.get("ratelimit")).toMatch(new RegExp(`^limit=5, remaining=${5 - i}, reset=\\d+$`));
      expect(r.headers.get("ratelimit-policy")).toBe("1000;w=60, 5;w=3600, 1000;w=86400");
    }
    for (let i = 0; i < 3; i++) {
      const { r, calledAt } = await timed(() => hourly.get(path));
      expect(r.status).toBe(429);
      expect(r.body).toEqual(errorBody("resource_exhausted", expect.stringMatching(/^rate limit of 5 requests per hour exceeded; retry after \d+ s$/)));
      expect(shownWindow(r)).toBe("5/0/hour");
      retryAfterOf(r, 3600, calledAt);
    }
    // The other server counts the same token in the same windows: had the three refused calls
    // been counted, its minute (9) or its day (8) would refuse this one; they have 3 and 2 left.
    const r = await apiClient(daily.gateway, token).get(path);
    expect(r.status).toBe(200);
    expect(shownWindow(r)).toBe("8/2/day");
    expect(r.headers.get("ratelimit-policy")).toBe("9;w=60, 1000;w=3600, 8;w=86400");
  });

  it("the day refuses past its limit, with the day's Retry-After", async () => {
    await awaitFreshWindow(20_000);
    const token = (await addApiToken(server, w.admin._id, w.projectId)).plaintext;
    const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;
    const api = apiClient(daily.gateway, token);
    const shown: string[] = [];
    for (let i = 1; i <= 8; i++) {
      const r = await api.get(path);
      expect(r.status).toBe(200);
      shown.push(shownWindow(r)); // 9 − i left a minute, 8 − i a day
    }
    expect(shown).toEqual(["8/7/day", "8/6/day", "8/5/day", "8/4/day", "8/3/day", "8/2/day", "8/1/day", "8/0/day"]);
    for (let i = 0; i < 3; i++) {
      const { r, calledAt } = await timed(() => api.get(path));
      expect(r.status).toBe(429);
      expect(r.body).toEqual(errorBody("resource_exhausted", expect.stringMatching(/^rate limit of 8 requests per day exceeded; retry after \d+ s$/)));
      expect(shownWindow(r)).toBe("8/0/day");
      expect(Number(r.headers.get("x-ratelimit-reset"))).toBe(Math.floor(calledAt.before / 1000) - (Math.floor(calledAt.before / 1000) % 86_400) + 86_400);
      retryAfterOf(r, 86_400, calledAt);
    }
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
    expect(throttled!.body).toEqual(
      errorBody("resource_exhausted", expect.stringMatching(/^rate limit of 5 requests per minute exceeded; retry after \d+ s$/)),
    );
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
