// The limit on failed authentications is one for the whole deployment: two server processes on
// one database share it (guesses spread over both hit one limit, not one each); and native gRPC
// behind a trusted proxy counts the client address the proxy forwards, exactly as the HTTP
// gateway does, so one guesser behind a load balancer locks out no one else.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { BootstrapRequestSchema, BootstrapResponseSchema } from "../gen/runhook/v1/admin_pb.js";
import { API_TOKEN_PREFIX, newToken } from "../src/domain/auth/tokens.js";
import { storeFixtures } from "../src/store/index.js";
import { apiClient } from "./helpers/api.js";
import { BOOTSTRAP_SECRET, twoServersForFile, type ChildServer } from "./helpers/server.js";
import { awaitFreshWindow, grpcUnary, sleep } from "./helpers/webhook.js";

const LIMIT = 5;
/** A /v1 path; a made-up token is answered 401 before its project is looked at. */
const PATH = "/v1/project/any/admin-logs";
/** A well-formed token nobody issued: it reaches the token lookup, like a real guess. */
const guess = () => newToken(API_TOKEN_PREFIX, randomUUID()).plaintext;

// The proxy in front of both is this machine.
const { app, a, b } = twoServersForFile({ RUNHOOK_EXECUTOR: "false", RUNHOOK_AUTH_FAILURE_LIMIT: String(LIMIT), RUNHOOK_TRUSTED_PROXIES: "127.0.0.1" });

/** The failures of `address` the processes have shared this minute (its window document). */
async function sharedCount(address: string): Promise<number> {
  const now = Date.now();
  const doc = await storeFixtures(app.deps.store).rateLimits.findOne({ _id: `auth:${address}:${now - (now % 60_000)}` });
  return doc?.count ?? 0;
}

/** Until the processes have shared `n` failures of `address` (each shares its counts within about a second), or a few seconds. */
async function untilShared(address: string, n: number): Promise<void> {
  for (let i = 0; i < 100 && (await sharedCount(address)) < n; i++) await sleep(50);
}

describe("failed authentications, across processes and proxies", () => {
  it("guesses spread over two processes hit one limit, not one each", async () => {
    await awaitFreshWindow(30_000);
    const from = "203.0.113.60";
    let failures = 0;
    const refusing = new Set<ChildServer>();
    for (let i = 0; i < 4 * LIMIT && refusing.size < 2; i++) {
      const server = i % 2 === 0 ? a : b;
      const r = await apiClient(server.baseUrl, guess()).get(PATH, { headers: { "x-forwarded-for": from } });
      if (r.status === 401) {
        failures++;
        await untilShared(from, failures);
      } else {
        expect(r.status).toBe(429);
        refusing.add(server);
      }
    }
    // Both refuse the address, after about one limit's worth of failures in all: alone, each
    // process would have let through LIMIT (2 × LIMIT for the two); sharing, at most one more
    // per process than the limit (a process learns the total when it shares its own failure).
    expect(refusing.size).toBe(2);
    expect(failures).toBeGreaterThanOrEqual(LIMIT);
    expect(failures).toBeLessThan(2 * LIMIT);
    expect(await sharedCount(from)).toBe(failures);
  }, 120_000);

  it("native gRPC behind a trusted proxy counts the address in x-forwarded-for, as the HTTP gateway does", async () => {
    await awaitFreshWindow(15_000);
    const bootstrap = (secret: string, from?: string) =>
      grpcUnary(
        a.grpcAddr,
        "/runhook.v1.AdminService/Bootstrap",
        BootstrapRequestSchema,
        BootstrapResponseSchema,
        { organizationName: `o-${randomUUID().slice(0, 8)}`, adminEmail: "a@example.test" },
        secret,
        from === undefined ? {} : { metadata: { "x-forwarded-for": from } },
      );
    const from = "198.51.100.70";
    for (let i = 0; i < LIMIT; i++) expect((await bootstrap(`guess-${i}-0123456789abcdef`, from)).error?.code).toBe(16); // UNAUTHENTICATED
    expect((await bootstrap(BOOTSTRAP_SECRET, from)).error?.code).toBe(8); // RESOURCE_EXHAUSTED, even with the right secret
    // Behind the same proxy, another client is not refused, nor is the proxy's own address.
    expect((await bootstrap("guess-other-0123456789abcdef", "198.51.100.71")).error?.code).toBe(16);
    expect((await bootstrap("guess-proxy-0123456789abcdef")).error?.code).toBe(16);
    // The rightmost address the trusted proxy did not add is the client: a spoofed one before it changes nothing.
    expect((await bootstrap("guess-spoof-0123456789abcdef", `192.0.2.99, ${from}`)).error?.code).toBe(8);
    // The same client over the HTTP gateway is the same count.
    expect((await apiClient(a.baseUrl, guess()).get(PATH, { headers: { "x-forwarded-for": from } })).status).toBe(429);
  });
});
