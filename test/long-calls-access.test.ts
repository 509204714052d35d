// A long call lasts only as long as its caller's access: a console sign-out (made through another
// process), a console session's expiry and a token's expiry end a log export, a WatchRun and a
// long poll within about a second, over Connect, native gRPC and /v1, as a revoke does. Two
// server processes on one database; expiries come from the fixtures, never from a wait of a minute.
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { sleep } from "../src/lib/sleep.js";
import { storeFixtures } from "../src/store/index.js";
import { addApiToken, addAppToken, createWorld, fillActivityLog, type World } from "../fixtures/world.js";
import { openTestApp, spawnServer, testDbName, type ChildServer, type TestApp } from "./helpers/server.js";
import { queueRun } from "./helpers/runs.js";

/** The bound each end is held to: the mechanism aims at one second, a loaded 2-core machine gets slack. */
const BOUND_MS = 3000;
/** How far ahead an expiry is set: time enough to open the call before it. */
const LEAD_MS = 4000;
/** Entries of the exported log: far more than the sockets between server and client hold (a /v1 line is about 400 bytes). */
const ENTRIES = 40_000;

let app: TestApp;
let a: ChildServer;
let b: ChildServer;
let w: World;

beforeAll(async () => {
  const dbName = testDbName();
  app = await openTestApp(dbName);
  w = await createWorld(app);
  await fillActivityLog(app, w, ENTRIES, 600);
  const env = { RUNHOOK_EXECUTOR: "false" };
  [a, b] = await Promise.all([spawnServer(dbName, { env }), spawnServer(dbName, { env })]);
  // A filtered read walks the log up to its counter once, so that the exports below start at once.
  const warm = await fetch(`${a.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs?recordId=r1`, {
    headers: { authorization: `Bearer ${w.apiToken}` },
  });
  expect(warm.status).toBe(200);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled([a?.stop(), b?.stop()]);
  app?.stop();
  await app?.deps.store.close();
});

const originOf = (server: ChildServer) => new URL(server.baseUrl).origin;

/** A console session of the token's user, signed in on `server`: the cookie's value and the session's id. */
async function signIn(server: ChildServer, token: string): Promise<{ cookie: string; id: string }> {
  const res = await fetch(`${server.baseUrl}/console/session`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: originOf(server) },
    body: JSON.stringify({ token }),
  });
  expect(res.status).toBe(201);
  const cookie = /rh_console=([^;]*)/.exec(res.headers.get("set-cookie")!)![1]!;
  const hex = /^rh_ses_([0-9a-f]{32})_/.exec(cookie)![1]!;
  return { cookie, id: [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-") };
}

/** Signs the session out on `server`; when it did. */
async function signOut(server: ChildServer, cookie: string): Promise<number> {
  const res = await fetch(`${server.baseUrl}/console/session`, { method: "DELETE", headers: { origin: originOf(server), cookie: `rh_console=${cookie}` } });
  expect(res.status).toBe(204);
  return Date.now();
}

/** Clients of `server` as the console calls them: Connect, with the session cookie, from the server's own origin. */
function asConsole(server: ChildServer, cookie: string) {
  const transport = createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" });
  const options = { headers: { cookie: `rh_console=${cookie}`, origin: originOf(server) } };
  return { runs: createClient(RunService, transport), logs: createClient(LogService, transport), options };
}

/** How a stream ended, and when: its Connect code (undefined: it ended cleanly). */
interface Ending {
  code: Code | undefined;
  at: number;
}

/** A WatchRun whose first message (the run as it is) has come: how it ends, read to its end. */
async function watching(stream: AsyncIterable<{ run?: { id: string } }>, runId: string): Promise<{ ended: Promise<Ending> }> {
  const it = stream[Symbol.asyncIterator]();
  expect((await it.next()).value?.run?.id).toBe(runId);
  const ended = (async (): Promise<Ending> => {
    try {
      while (!(await it.next()).done);
      return { code: undefined, at: Date.now() };
    } catch (err) {
      return { code: ConnectError.from(err).code, at: Date.now() };
    }
  })();
  return { ended };
}

/** A run of the world that stays queued (no executor here), so that a watch of it stays open. */
const queued = async () => (await queueRun(app.deps.store, w, randomUUID()))._id;

describe("a console sign-out on one process ends the session's streams on the other", () => {
  it("WatchRun over Connect: UNAUTHENTICATED within the bound; another session of the same user goes on", async () => {
    const runId = await queued();
    const [gone, kept] = [await signIn(a, w.adminToken), await signIn(a, w.adminToken)];
    const watch = (cookie: string) => {
      const c = asConsole(b, cookie);
      return watching(c.runs.watchRun({ runId }, c.options), runId);
    };
    const ended = (await watch(gone.cookie)).ended;
    const other = (await watch(kept.cookie)).ended;
    await sleep(300); // both are waiting
    const signedOutAt = await signOut(a, gone.cookie);
    const end = await ended;
    expect(end.code).toBe(Code.Unauthenticated);
    expect(end.at - signedOutAt).toBeLessThan(BOUND_MS);
    // The other session's watch was checked again (its organization's directory changed) and stays open.
    const still = await Promise.race([other, sleep(1000).then(() => "open" as const)]);
    expect(still).toBe("open");
    await signOut(a, kept.cookie);
    expect((await other).code).toBe(Code.Unauthenticated);
  });

  it("an export over Connect: no entry after the sign-out but what the sockets already held, then UNAUTHENTICATED", async () => {
    const session = await signIn(a, w.adminToken);
    const c = asConsole(b, session.cookie);
    const it = c.logs.exportActivityLogs({ projectName: w.projectName, environmentName: w.environmentName }, c.options)[Symbol.asyncIterator]();
    expect((await it.next()).value?.entry?.id).toBe("1");
    // The client reads nothing more for a while: the server is held at what the sockets take.
    await signOut(a, session.cookie);
    await sleep(1500);
    let received = 1;
    let code: Code | undefined;
    try {
      while (!(await it.next()).done) received++;
    } catch (err) {
      code = ConnectError.from(err).code;
    }
    expect(code).toBe(Code.Unauthenticated);
    expect(received).toBeLessThan(ENTRIES / 2);
  });
});

describe("a console session's expiry ends its streams", () => {
  it("WatchRun over Connect: UNAUTHENTICATED within the bound of the expiry", async () => {
    const runId = await queued();
    const session = await signIn(a, w.adminToken);
    const expiresAt = Date.now() + LEAD_MS;
    await storeFixtures(app.deps.store).setConsoleSessionExpiry(session.id, new Date(expiresAt));
    const c = asConsole(b, session.cookie);
    const end = await (await watching(c.runs.watchRun({ runId }, c.options), runId)).ended;
    expect(end.code).toBe(Code.Unauthenticated);
    expect(end.at).toBeGreaterThanOrEqual(expiresAt - 50);
    expect(end.at - expiresAt).toBeLessThan(BOUND_MS);
  });
});

describe("a token's expiry ends its streams", () => {
  it("WatchRun over native gRPC: UNAUTHENTICATED within the bound of the expiry", async () => {
    const runId = await queued();
    const expiresAt = Date.now() + LEAD_MS;
    const token = await addAppToken(app, w.admin._id, { expiresAt: new Date(expiresAt) });
    const runs = createClient(RunService, createGrpcTransport({ baseUrl: `http://${b.grpcAddr}` }));
    const end = await (await watching(runs.watchRun({ runId }, { headers: { authorization: `Bearer ${token.plaintext}` } }), runId)).ended;
    expect(end.code).toBe(Code.Unauthenticated);
    expect(end.at).toBeGreaterThanOrEqual(expiresAt - 50);
    expect(end.at - expiresAt).toBeLessThan(BOUND_MS);
  });

  it("a long poll on /v1 (?wait): 401 within the bound of the expiry, not at the end of its wait", async () => {
    const runId = await queued();
    const expiresAt = Date.now() + LEAD_MS;
    const token = await addAppToken(app, w.admin._id, { expiresAt: new Date(expiresAt) });
    const res = await fetch(`${b.baseUrl}/v1/runs/${runId}?wait=60s`, { headers: { authorization: `Bearer ${token.plaintext}` } });
    const at = Date.now();
    expect([res.status, ((await res.json()) as { code?: string }).code]).toEqual([401, "unauthenticated"]);
    expect(at).toBeGreaterThanOrEqual(expiresAt - 50);
    expect(at - expiresAt).toBeLessThan(BOUND_MS);
  });

  it("an NDJSON export on /v1: cut short once the project API token expires", async () => {
    const expiresAt = Date.now() + LEAD_MS;
    const token = await addApiToken(app, w.admin._id, w.projectId, { expiresAt: new Date(expiresAt) });
    const res = await fetch(`${b.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`, {
      headers: { authorization: `Bearer ${token.plaintext}`, accept: "application/x-ndjson" },
    });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    // One entry a line: the whole export would be ENTRIES lines.
    const lines = (chunk: Uint8Array) => chunk.reduce((n, byte) => n + (byte === 0x0a ? 1 : 0), 0);
    let received = lines((await reader.read()).value!);
    // Held at what the sockets take until the token has expired (and a moment more), then read at full speed.
    await sleep(expiresAt - Date.now() + 1500);
    let ended: "error" | "done" = "done";
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) received += lines(r.value);
    } catch {
      ended = "error";
    }
    expect(ended).toBe("error");
    expect(received).toBeGreaterThan(0);
    expect(received).toBeLessThan(ENTRIES / 2);
  });
});
