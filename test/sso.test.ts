// SSO sessions and what they make: an SSO token made from an SSO token never outlives it (only a
// new SSO login, IssueSsoToken, starts a new lifetime). Real server, real database.
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createWorld } from "../fixtures/world.js";
import { BOOTSTRAP_SECRET, serverForFile } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });

const DAY_S = 86_400;
const seconds = (t: { seconds: bigint } | undefined) => Number(t!.seconds);

async function code(p: Promise<unknown>): Promise<Code | "ok"> {
  try {
    await p;
    return "ok";
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

describe("an SSO token made from an SSO token", () => {
  it("never expires after the token that makes it; a new SSO login starts a new lifetime", async () => {
    const w = await createWorld(server);
    const operator = adminClient(server.baseUrl, BOOTSTRAP_SECRET);
    // The SSO login: an hour.
    const login = await operator.issueSsoToken({ userId: w.user._id, name: "sso login", ttlSeconds: 3600 });
    const loginExpiry = seconds(login.token!.expiresAt);
    const session = adminClient(server.baseUrl, login.plaintext);

    // A year asked for: refused, saying why.
    const err = await session.createApplicationToken({ sso: true, ttlSeconds: 365 * DAY_S }).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    expect((err as ConnectError).rawMessage).toContain("may not outlive the SSO token that makes it");

    // The default lifetime (90 days) is cut to the session's.
    const byDefault = await session.createApplicationToken({ sso: true });
    expect(byDefault.token!.sso).toBe(true);
    expect(seconds(byDefault.token!.expiresAt)).toBeLessThanOrEqual(loginExpiry);

    // Shorter than the session: as asked.
    const short = await session.createApplicationToken({ sso: true, ttlSeconds: 600 });
    expect(seconds(short.token!.expiresAt) - seconds(short.token!.createdAt)).toBe(600);

    // Nor can a chain stretch it: a token made from the default one is bounded by the login too.
    const chained = adminClient(server.baseUrl, byDefault.plaintext);
    expect(await code(chained.createApplicationToken({ sso: true, ttlSeconds: 7200 }))).toBe(Code.FailedPrecondition);
    expect(seconds((await chained.createApplicationToken({ sso: true })).token!.expiresAt)).toBeLessThanOrEqual(loginExpiry);

    // A token that is not an SSO token keeps its own lifetime (it never passes for an SSO login).
    const plain = await session.createApplicationToken({ ttlSeconds: 365 * DAY_S });
    expect(plain.token!.sso).toBe(false);
    expect(seconds(plain.token!.expiresAt) - seconds(plain.token!.createdAt)).toBe(365 * DAY_S);

    // A new SSO login is not bounded by the earlier one.
    const again = await operator.issueSsoToken({ userId: w.user._id });
    expect(seconds(again.token!.expiresAt) - seconds(again.token!.createdAt)).toBe(90 * DAY_S);
  });
});
