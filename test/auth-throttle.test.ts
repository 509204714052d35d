// The limit before authentication: failed authentications per client address, on every way
// in (webhook, /v1, Connect, gRPC-Web, native gRPC, AdminService.Bootstrap); guessed tokens
// never write a rate-limit bucket; X-Forwarded-For counts only from trusted proxies; the
// operator can switch Bootstrap off. Real servers on the real database.
import { randomBytes, randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { AdminService, BootstrapRequestSchema, BootstrapResponseSchema } from "../gen/runhook/v1/admin_pb.js";
import { addressBucket, AuthFailureThrottle, coarseBucket } from "../src/rpc/auth-throttle.js";
import { clientAddressRule } from "../src/rpc/client-address.js";
import { API_TOKEN_PREFIX, newToken } from "../src/domain/auth/tokens.js";
import { signWebhookKey, webhookUrl } from "../src/domain/webhook-keys.js";
import { apiClient } from "./helpers/api.js";
import { liveTokenBuckets } from "./helpers/rate-limits.js";
import { BOOTSTRAP_SECRET, serverForFile } from "./helpers/server.js";
import { adminClient, awaitFreshWindow, grpcTrigger, grpcUnary } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";

/** A well-formed token nobody issued: it reaches the token lookup, like a real guess. */
const guess = () => newToken(API_TOKEN_PREFIX, randomUUID()).plaintext;
const bootstrapOverGrpc = (addr: string, secret: string) =>
  grpcUnary(
    addr,
    "/runhook.v1.AdminService/Bootstrap",
    BootstrapRequestSchema,
    BootstrapResponseSchema,
    { organizationName: `o-${randomUUID().slice(0, 8)}`, adminEmail: "a@example.test" },
    secret,
  );

describe("guessing tokens over /v1 and the webhook (default limit, behind a trusted proxy)", () => {
  // "" = the default limit; the proxy in front is this machine.
  const server = serverForFile({ env: { RUNHOOK_AUTH_FAILURE_LIMIT: "", RUNHOOK_TRUSTED_PROXIES: "127.0.0.1,::1" } });
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
  });

  it("1,500 made-up tokens from one address: 100 × 401, then 429 with Retry-After, and no bucket document per guess", async () => {
    await awaitFreshWindow(20_000);
    const before = await liveTokenBuckets(server.deps.store);
    const from = { "x-forwarded-for": "203.0.113.7" };
    const path = `/v1/project/${w.projectName}/admin-logs`;
    const statuses: number[] = [];
    let last: Awaited<ReturnType<ReturnType<typeof apiClient>["get"]>> | undefined;
    for (let i = 0; i < 1500; i++) {
      last = await apiClient(server.gateway, guess()).get(path, { headers: from });
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 100).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(100).every((s) => s === 429)).toBe(true);
    expect(last!.body).toEqual({
      code: "resource_exhausted",
      message: expect.stringContaining("failed authentications"),
      error: (last!.body as { message: string }).message,
    });
    expect(Number(last!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(last!.headers.get("x-ratelimit-limit")).toBe("100");
    expect(last!.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(await liveTokenBuckets(server.deps.store)).toBe(before);
    // The address is refused before its token is looked at: the real token too, and the webhook.
    expect((await apiClient(server.gateway, w.apiToken).get(path, { headers: from })).status).toBe(429);
    const hook = await server.gateway.inject({
      method: "POST",
      url: "/hooks/x",
      headers: { ...from, authorization: `Bearer ${w.userToken}`, "content-type": "application/json" },
      payload: "{}",
    });
    expect(hook.statusCode).toBe(429);
    expect(hook.headers["retry-after"]).toBeDefined();
    // Another address is not affected; its authenticated calls count in the token's bucket only.
    const ok = await apiClient(server.gateway, w.apiToken).get(path, { headers: { "x-forwarded-for": "203.0.113.8" } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-ratelimit-limit")).toBe("600");
  });

  it("webhook 401s count too", async () => {
    await awaitFreshWindow(10_000);
    const key = signWebhookKey(server.deps.config, { workflowId: w.workflowId, renderingId: w.renderingId, generation: 1 });
    const url = webhookUrl({ publicBaseUrl: "" }, key);
    const from = { "x-forwarded-for": "198.51.100.3" };
    const statuses: number[] = [];
    for (let i = 0; i < 110; i++) {
      const r = await server.gateway.inject({
        method: "POST",
        url,
        headers: { ...from, authorization: `Bearer rh_app_${randomBytes(8).toString("hex")}`, "content-type": "application/json" },
        payload: JSON.stringify({ record_id: "r1" }),
      });
      statuses.push(r.statusCode);
    }
    expect(statuses.filter((s) => s === 401)).toHaveLength(100);
    expect(statuses.slice(100).every((s) => s === 429)).toBe(true);
  });

  it("/v1 answers without a token carry the address's figures, not a token bucket", async () => {
    await awaitFreshWindow(5_000);
    const r = await apiClient(server.gateway).get(`/v1/project/${w.projectName}/admin-logs`, { headers: { "x-forwarded-for": "192.0.2.44" } });
    expect(r.status).toBe(401);
    expect(r.headers.get("x-ratelimit-limit")).toBe("100");
    expect(r.headers.get("x-ratelimit-remaining")).toBe("99");
  });
});

describe("every RPC surface, Bootstrap included (limit 20, no trusted proxy)", () => {
  const server = serverForFile({ env: { RUNHOOK_AUTH_FAILURE_LIMIT: "20" } });
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
  });

  it("native gRPC Bootstrap guesses are limited, then every surface refuses the address, whatever X-Forwarded-For says", async () => {
    await awaitFreshWindow(15_000);
    for (let i = 0; i < 20; i++) expect((await bootstrapOverGrpc(server.grpcAddr, `guess-${i}-0123456789abcdef`)).error?.code).toBe(16); // UNAUTHENTICATED
    const refused = await bootstrapOverGrpc(server.grpcAddr, BOOTSTRAP_SECRET);
    expect(refused.error?.code).toBe(8); // RESOURCE_EXHAUSTED, even with the right secret
    expect(Number(refused.error!.metadata.get("retry-after")[0])).toBeGreaterThanOrEqual(1);
    expect((await grpcTrigger(server.grpcAddr, "http://x/hooks/y", "r1", w.userToken)).error?.code).toBe(8);
    // Connect and gRPC-Web on the gateway: same address (X-Forwarded-For is not trusted here).
    const connectErr = await adminClient(server.baseUrl, w.adminToken)
      .getWorkflow({ workflowId: w.workflowId })
      .catch((e: unknown) => e);
    expect(ConnectError.from(connectErr).code).toBe(Code.ResourceExhausted);
    const web = createClient(AdminService, createGrpcWebTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const webErr = await web
      .getWorkflow({ workflowId: w.workflowId }, { headers: { authorization: `Bearer ${w.adminToken}`, "x-forwarded-for": "203.0.113.9" } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(webErr).code).toBe(Code.ResourceExhausted);
    expect(
      (await apiClient(server.baseUrl, w.apiToken).get(`/v1/project/${w.projectName}/admin-logs`, { headers: { "x-forwarded-for": "203.0.113.9" } })).status,
    ).toBe(429);
    // Health needs no token and is never refused.
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
  });
});

describe("RUNHOOK_BOOTSTRAP=off", () => {
  const server = serverForFile({ env: { RUNHOOK_BOOTSTRAP: "off" } });

  it("refuses Bootstrap even with the operator secret", async () => {
    const r = await bootstrapOverGrpc(server.grpcAddr, BOOTSTRAP_SECRET);
    expect(r.error?.code).toBe(7); // PERMISSION_DENIED
    expect(r.error?.details).toContain("switched off");
  });
});

describe("addressBucket", () => {
  it("keeps IPv4, unmaps IPv4-mapped IPv6 and groups IPv6 by /64", () => {
    expect(addressBucket("203.0.113.7")).toBe("203.0.113.7");
    expect(addressBucket("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(addressBucket("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressBucket("2001:db8:1:2::bbbb")).toBe("2001:db8:1:2::/64");
    expect(addressBucket("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressBucket(undefined)).toBe("unknown");
  });
});

describe("coarseBucket", () => {
  it("names the network of an address bucket: IPv4 /16, IPv6 /32", () => {
    expect(coarseBucket("198.51.100.7")).toBe("198.51.0.0/16");
    expect(coarseBucket(addressBucket("2001:db8:1:2:aaaa::1"))).toBe("2001:db8::/32");
    expect(coarseBucket("unknown")).toBe("overflow");
  });
});

describe("AuthFailureThrottle", () => {
  it("refuses an address at the limit until its minute ends; beyond 100,000 failing addresses, new ones share their network's bucket", () => {
    const t = new AuthFailureThrottle(2);
    const at = 1_800_000_000_000; // a whole minute
    t.fail("192.0.2.1", at);
    expect(t.check("192.0.2.1", at).allowed).toBe(true);
    t.fail("192.0.2.1", at + 1000);
    expect(t.check("192.0.2.1", at + 1000)).toMatchObject({ allowed: false, remaining: 0, retryAfter: 59 });
    expect(t.check("192.0.2.2", at + 1000).allowed).toBe(true);
    expect(t.check("192.0.2.1", at + 60_000).allowed).toBe(true); // a new window
    for (let i = 0; i < 100_000; i++) t.fail(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, at + 60_000);
    t.fail("198.51.100.1", at + 60_000);
    t.fail("198.51.100.2", at + 60_000);
    expect(t.check("198.51.100.3", at + 60_000).allowed).toBe(false);
    expect(t.check("10.0.0.1", at + 60_000).allowed).toBe(true); // tracked on its own
    // Only the failing network shares that bucket: a new client elsewhere is not locked out.
    expect(t.check("203.0.113.5", at + 60_000).allowed).toBe(true);
    t.fail("2001:db8:aaaa:1::1", at + 60_000);
    t.fail("2001:db8:bbbb:2::1", at + 60_000);
    expect(t.check("2001:db8:cccc:3::1", at + 60_000).allowed).toBe(false);
    expect(t.check("2001:db9::1", at + 60_000).allowed).toBe(true);
  });
});

describe("AuthFailureThrottle, shared with the other processes", () => {
  it("adds the total the others counted to its own; a database error fails no call and loses no count", async () => {
    vi.useFakeTimers({ now: 1_800_000_000_000 });
    try {
      let down = true;
      let stored = 0; // the bucket's document: what every process has added
      const sent: Array<[string, number][]> = [];
      const errors: unknown[] = [];
      const t = new AuthFailureThrottle(10, {
        share: async (_windowStart, increments) => {
          if (down) throw new Error("database down");
          sent.push([...increments]);
          for (const n of increments.values()) stored += n;
          return new Map([...increments.keys()].map((k) => [k, stored]));
        },
        onError: (err) => errors.push(err),
      });
      t.fail("192.0.2.1");
      t.fail("192.0.2.1");
      await vi.advanceTimersByTimeAsync(0); // the first round: the database is down
      expect(errors).toHaveLength(1);
      expect(t.check("192.0.2.1")).toMatchObject({ allowed: true, remaining: 8 }); // its own count holds meanwhile
      down = false;
      stored = 7; // meanwhile, other processes counted 7
      await vi.advanceTimersByTimeAsync(1000); // the next round sends the two again
      expect(sent).toEqual([[["auth:192.0.2.1", 2]]]);
      expect(t.check("192.0.2.1")).toMatchObject({ allowed: true, remaining: 1 }); // 7 + 2
      t.fail("192.0.2.1"); // not shared yet, counted at once
      expect(t.check("192.0.2.1")).toMatchObject({ allowed: false, remaining: 0 });
      await vi.advanceTimersByTimeAsync(1000);
      expect(sent).toHaveLength(2);
      expect(stored).toBe(10);
      t.close();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("clientAddressRule (both servers' client address)", () => {
  it("takes X-Forwarded-For only from a trusted peer, from its right end past every trusted proxy", () => {
    const r = clientAddressRule(["10.0.0.0/8", "2001:db8::/32", "127.0.0.1"]);
    expect(r.clientAddress("203.0.113.1", "198.51.100.1")).toBe("203.0.113.1"); // an untrusted peer: its header is ignored
    expect(r.clientAddress("10.1.1.1", "198.51.100.1")).toBe("198.51.100.1");
    expect(r.clientAddress("10.1.1.1", "192.0.2.9, 198.51.100.1, 10.2.2.2")).toBe("198.51.100.1"); // a spoofed left part changes nothing
    expect(r.clientAddress("::ffff:127.0.0.1", ["198.51.100.1", "10.3.3.3"])).toBe("198.51.100.1"); // IPv4-mapped peer; repeated headers
    expect(r.clientAddress("2001:db8::5", "2001:db9::1")).toBe("2001:db9::1");
    expect(r.clientAddress("10.1.1.1", "10.2.2.2,10.3.3.3")).toBe("10.2.2.2"); // all trusted: the leftmost
    expect(r.clientAddress("10.1.1.1", undefined)).toBe("10.1.1.1");
    expect(r.clientAddress("10.1.1.1", "not-an-address")).toBe("not-an-address"); // as proxy-addr: a hop that is no address is not trusted
    expect(clientAddressRule([]).clientAddress("10.1.1.1", "198.51.100.1")).toBe("10.1.1.1");
  });
});
