// HTTP edges (issue #12): bodies and headers as real clients send them, following a run
// until it is finished, and timeouts / HTTP/2 limits against slow clients. Real servers on
// the real database, called over fetch, raw sockets, native gRPC and HTTP/2.
import http2 from "node:http2";
import { storeFixtures } from "../src/store/index.js";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../src/lib/json-depth.js";
import { apiClient } from "./helpers/api.js";
import { rawHttp, rawRequest } from "./helpers/raw.js";
import { grpcGetRun, queueRun, waitForRun } from "./helpers/runs.js";
import { serverForFile, startServer, type TestServer } from "./helpers/server.js";
import { adminClient, awaitFreshWindow, local, postHook, sleep } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";
import { errorBody } from "../src/rpc/errors.js";

const server = serverForFile();
const db = () => storeFixtures(server.deps.store);
const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const notesPath = (w: World) => `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;

async function webhookUrl(s: TestServer, w: World): Promise<string> {
  const got = await adminClient(s.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
  return local(got.workflow!.webhook!.url, s.deps.config.publicBaseUrl, s.baseUrl);
}

/** The server still answers: /healthz, and a normal /v1 call. */
async function stillServing(s: TestServer, w: World) {
  expect((await fetch(`${s.baseUrl}/healthz`)).status).toBe(200);
  expect((await apiClient(s.baseUrl, w.apiToken).get(`${notesPath(w)}?limit=1`)).status).toBe(200);
}

const MEDIA_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "text/plain",
  "application/x-www-form-urlencoded",
  "application/octet-stream",
  null,
] as const;

/** The HTTP/2 headers of a raw gRPC RunService.GetRun call, as a hand-written client sends them. */
const getRunHeaders = (token: string) => ({
  ":method": "POST",
  ":path": "/runhook.v1.RunService/GetRun",
  "content-type": "application/grpc",
  te: "trailers",
  authorization: `Bearer ${token}`,
});

describe("bodies: routes without a body", () => {
  it("GET, DELETE and POST …/cancel accept an empty body whatever its Content-Type", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 30 }] });
    const api = apiClient(server.baseUrl, w.apiToken);
    for (const ct of MEDIA_TYPES) {
      const headers: Record<string, string> = { ...auth(w.apiToken), ...(ct ? { "content-type": ct } : {}) };
      const note = await api.post(notesPath(w), { collection: w.collection, recordId: "r1", content: "x" });
      expect(note.status).toBe(201);
      const got = await fetch(`${server.baseUrl}${notesPath(w)}/${note.body.id}`, { headers });
      expect(got.status, `GET with ${ct}`).toBe(200);
      const list = await fetch(`${server.baseUrl}/v1/project/${w.projectName}/admin-logs`, { headers });
      expect(list.status, `GET list with ${ct}`).toBe(200);
      const del = await fetch(`${server.baseUrl}${notesPath(w)}/${note.body.id}`, { method: "DELETE", headers });
      expect(del.status, `DELETE with ${ct}: ${await del.clone().text()}`).toBe(204);

      const run = await queueRun(server.deps.store, w, "r1");
      const cancel = await fetch(`${server.baseUrl}/v1/runs/${run._id}/cancel`, { method: "POST", headers: { ...headers, ...auth(w.userToken) } });
      expect(cancel.status, `cancel with ${ct}: ${await cancel.clone().text()}`).toBe(200);
      expect(await cancel.json()).toMatchObject({ id: run._id, state: "CANCELLED" });
      const follow = await fetch(`${server.baseUrl}/v1/runs/${run._id}`, { headers: { ...headers, ...auth(w.userToken) } });
      expect(follow.status).toBe(200);
    }
    // Exactly as curl sends it: `curl -X DELETE -H 'Content-Type: application/json'` (no Content-Length).
    const note = await api.post(notesPath(w), { collection: w.collection, recordId: "r1", content: "x" });
    const raw = await rawHttp(
      server.baseUrl,
      rawRequest("DELETE", `${notesPath(w)}/${note.body.id}`, { ...auth(w.apiToken), "Content-Type": "application/json" }),
    );
    expect(raw.status).toBe(204);
  });
});

describe("bodies: JSON media types", () => {
  it("/v1 bodies: application/json with parameters (any case) or no Content-Type; anything else is 400", async () => {
    const w = await createWorld(server);
    const url = `${server.baseUrl}${notesPath(w)}`;
    const body = JSON.stringify({ collection: w.collection, recordId: "r1", content: "<p>x</p>" });
    for (const ct of ["application/json", "Application/JSON; Charset=UTF-8", "application/json;charset=utf-8"]) {
      const res = await fetch(url, { method: "POST", headers: { ...auth(w.apiToken), "content-type": ct }, body });
      expect(res.status, ct).toBe(201);
    }
    // A byte body, so that fetch adds no Content-Type of its own.
    const bare = await fetch(url, { method: "POST", headers: auth(w.apiToken), body: Buffer.from(body) });
    expect(bare.status).toBe(201);

    for (const ct of ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", "text/json"]) {
      const res = await fetch(url, { method: "POST", headers: { ...auth(w.apiToken), "content-type": ct }, body });
      expect(res.status, ct).toBe(400);
      expect(await res.json()).toEqual(errorBody("invalid_argument", `Content-Type must be application/json, got "${ct}"`));
    }
    const note = (await (await fetch(url, { method: "POST", headers: { ...auth(w.apiToken), "content-type": "application/json" }, body })).json()) as {
      id: string;
    };
    const patch = await fetch(`${url}/${note.id}`, { method: "PATCH", headers: { ...auth(w.apiToken), "content-type": "text/plain" }, body: '{"title":"t"}' });
    expect(patch.status).toBe(400);
    expect(await patch.json()).toMatchObject({ code: "invalid_argument", error: expect.stringMatching(/Content-Type must be application\/json/) });
    // A route that needs a body: an empty one is a 400 with the error body.
    const empty = await fetch(url, { method: "POST", headers: { ...auth(w.apiToken), "content-type": "application/json" } });
    expect(empty.status).toBe(400);
    expect(await empty.json()).toEqual(errorBody("invalid_argument", "request body must be a JSON object"));
  });

  it("webhook: application/json with parameters or none is accepted; other media types are 400 at the body's place in the check order", async () => {
    await awaitFreshWindow(15_000); // the calls below land in one rate-limit minute
    const w = await createWorld(server);
    const url = await webhookUrl(server, w);
    const body = (r: string) => JSON.stringify({ record_id: r });
    expect((await postHook(url, w.userToken, body("r1"), { raw: true, contentType: "application/json; charset=utf-8" })).status).toBe(202);
    expect((await postHook(url, w.userToken, body("r2"), { raw: true, contentType: "APPLICATION/JSON" })).status).toBe(202);
    const bare = await fetch(url, { method: "POST", headers: auth(w.userToken), body: Buffer.from(body("r3")) });
    expect(bare.status).toBe(202);

    // What `curl -d` sends without -H 'Content-Type: application/json'.
    const form = await postHook(url, w.userToken, body("r4"), { raw: true, contentType: "application/x-www-form-urlencoded" });
    expect(form.status).toBe(400);
    expect(form.body).toEqual(errorBody("invalid_argument", 'Content-Type must be application/json, got "application/x-www-form-urlencoded"'));
    expect(await db().runs.countDocuments({ workflowId: w.workflowId, recordId: "r4" })).toBe(0);

    // Earlier checks answer first: the token (step 2) and the rate limit (step 5).
    expect((await postHook(url, "rh_app_nope", body("r4"), { raw: true, contentType: "text/plain" })).status).toBe(401);
    await adminClient(server.baseUrl, w.adminToken).setWebhookRateLimit({ workflowId: w.workflowId, rateLimitPerMinute: 1 });
    const limited = await postHook(url, w.userToken, body("r6"), { raw: true, contentType: "text/plain" });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
  });
});

describe("bodies: too large and too deep", () => {
  const deepArray = "[".repeat(100_000);
  const deepInside = (prefix: string) => `${prefix}"x":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;

  it("answers 413 {error, code} over the body limit (declared or chunked), and keeps serving", async () => {
    const w = await createWorld(server);
    const url = await webhookUrl(server, w);
    const limit = server.deps.config.bodyLimitBytes;
    const big = JSON.stringify({ record_id: "r1", collection: w.collection, recordId: "r1", content: "x", pad: "x".repeat(limit) });
    for (const target of [new URL(url).pathname, notesPath(w)]) {
      const declared = await fetch(`${server.baseUrl}${target}`, {
        method: "POST",
        headers: { ...auth(target.startsWith("/v1") ? w.apiToken : w.userToken), "content-type": "application/json" },
        body: big,
      });
      expect(declared.status, target).toBe(413);
      expect(await declared.json()).toEqual(errorBody("resource_exhausted", `request body larger than ${limit} bytes`));
      // Chunked: no Content-Length, the limit applies to what arrives.
      const chunked = await rawHttp(
        server.baseUrl,
        [
          `POST ${target} HTTP/1.1`,
          "Host: runhook.test",
          `Authorization: Bearer ${target.startsWith("/v1") ? w.apiToken : w.userToken}`,
          "Content-Type: application/json",
          "Transfer-Encoding: chunked",
          "",
          `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`,
        ].join("\r\n"),
      );
      expect(chunked.status, target).toBe(413);
      expect(JSON.parse(chunked.body)).toMatchObject({ code: "resource_exhausted" });
    }
    await stillServing(server, w);
    expect((await postHook(url, w.userToken, { record_id: "r1" })).status).toBe(202);
  });

  it("answers 400 for JSON nested too deeply, on the webhook and on /v1 bodies, and keeps serving", async () => {
    const w = await createWorld(server);
    const url = await webhookUrl(server, w);
    const hook = (raw: string) => postHook(url, w.userToken, raw, { raw: true });
    for (const raw of [deepArray, deepInside('{"record_id":"r1",')]) {
      const res = await hook(raw);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(errorBody("invalid_argument", `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`));
    }
    expect(await db().runs.countDocuments({ workflowId: w.workflowId })).toBe(0);

    const api = apiClient(server.baseUrl, w.apiToken);
    const note = await api.post(notesPath(w), { collection: w.collection, recordId: "r1", content: "x" });
    for (const [method, path, prefix] of [
      ["POST", notesPath(w), `{"collection":"${w.collection}","recordId":"r1","content":"x",`],
      ["PATCH", `${notesPath(w)}/${note.body.id}`, '{"title":"t",'],
      ["POST", `${notesPath(w)}/${note.body.id}/messages`, '{"content":"x",'],
    ] as const) {
      for (const raw of [deepArray, deepInside(prefix)]) {
        const res = await api.call(method, path, { rawBody: raw });
        expect(res.status, `${method} ${path}`).toBe(400);
        expect(res.body).toEqual(errorBody("invalid_argument", `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`));
      }
    }
    expect((await api.get(`${notesPath(w)}/${note.body.id}`)).body).toMatchObject({ title: "", messages: [expect.anything()] });

    // Up to the limit is fine, and brackets inside strings do not count.
    const nested = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    expect((await hook(`{"record_id":"r1","x":${nested(MAX_JSON_DEPTH - 1)}}`)).status).toBe(202);
    expect((await hook(`{"record_id":"r2","x":"${"[".repeat(10_000)}"}`)).status).toBe(202);
    expect((await hook(`{"record_id":"r3","x":${nested(MAX_JSON_DEPTH)}}`)).status).toBe(400);
    await stillServing(server, w);
  });
});

describe("following a run", () => {
  it("GET /v1/runs/{id}?wait without version answers once the run is finished", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 1 }, { type: "load_record" }] });
    const q = await queueRun(server.deps.store, w, "r1");
    expect((await db().runs.findOne({ _id: q._id }))!.state).not.toMatch(/SUCCEEDED|FAILED|CANCELLED/);
    const res = await fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=30s`, { headers: auth(w.userToken) });
    expect(res.status).toBe(200);
    const run = (await res.json()) as { state: string; version: string; steps: { state: string }[] };
    expect(run.state).toBe("SUCCEEDED");
    expect(run.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED"]);
    // version=0 means the same.
    const again = await fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=30s&version=0`, { headers: auth(w.apiToken) });
    expect(((await again.json()) as { state: string }).state).toBe("SUCCEEDED");
  });

  it("with version it answers as soon as the version differs; a finished run at once; otherwise when the time is up", async () => {
    const w = await createWorld(server, {
      steps: [
        { type: "wait", seconds: 1 },
        { type: "wait", seconds: 30 },
      ],
    });
    const q = await queueRun(server.deps.store, w, "r1");
    const running = await waitForRun(server.deps.store, q._id, (r) => r.steps[0]!.state === "RUNNING");
    const changed = await fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=30s&version=${running.version}`, { headers: auth(w.userToken) });
    const body = (await changed.json()) as { state: string; version: string };
    expect(Number(body.version)).toBeGreaterThan(running.version);
    expect(body.state).toBe("RUNNING"); // the second wait is still ahead: not "until finished"

    // The time is up before the run finishes: the run as it is, still ongoing.
    const timeUp = await fetch(`${server.baseUrl}/v1/runs/${q._id}?wait=1s`, { headers: auth(w.userToken) });
    expect(timeUp.status).toBe(200);
    expect(((await timeUp.json()) as { state: string }).state).toBe("RUNNING");

    // Finished: answered at once even with the longest wait (no 60 s hang; the signal bounds it).
    await fetch(`${server.baseUrl}/v1/runs/${q._id}/cancel`, { method: "POST", headers: auth(w.userToken) });
    for (const query of ["?wait=60s", `?wait=60s&version=${body.version}`]) {
      const res = await fetch(`${server.baseUrl}/v1/runs/${q._id}${query}`, { headers: auth(w.userToken), signal: AbortSignal.timeout(20_000) });
      expect(((await res.json()) as { state: string }).state).toBe("CANCELLED");
    }
  });

  it("gRPC GetRun with wait_seconds and known_version 0 waits until the run is finished", async () => {
    const w = await createWorld(server, { steps: [{ type: "wait", seconds: 1 }, { type: "load_record" }] });
    const q = await queueRun(server.deps.store, w, "r1");
    const res = await grpcGetRun(server.grpcAddr, w.userToken, { runId: q._id, waitSeconds: 30, knownVersion: 0n });
    expect(res.run?.state).toBe("SUCCEEDED");
    // With a known version: the next change only.
    const w2 = await createWorld(server, {
      steps: [
        { type: "wait", seconds: 1 },
        { type: "wait", seconds: 30 },
      ],
    });
    const q2 = await queueRun(server.deps.store, w2, "r1");
    const res2 = await grpcGetRun(server.grpcAddr, w2.userToken, { runId: q2._id, waitSeconds: 30, knownVersion: 1n });
    expect(Number(res2.run!.version)).toBeGreaterThan(1);
    expect(res2.run?.state).not.toBe("SUCCEEDED");
    await fetch(`${server.baseUrl}/v1/runs/${q2._id}/cancel`, { method: "POST", headers: auth(w2.userToken) });
  });
});

describe("timeouts and limits against slow clients", () => {
  const TIGHT = {
    RUNHOOK_HTTP_HEADERS_TIMEOUT_MS: "1000",
    RUNHOOK_HTTP_REQUEST_TIMEOUT_MS: "2000",
    RUNHOOK_HTTP_KEEP_ALIVE_TIMEOUT_MS: "1000",
    RUNHOOK_GRPC_IDLE_TIMEOUT_MS: "1000",
    RUNHOOK_GRPC_REQUEST_TIMEOUT_MS: "1000",
    RUNHOOK_GRPC_MAX_CONCURRENT_STREAMS: "5",
    RUNHOOK_GRPC_MAX_HEADER_LIST_SIZE: "4096",
  };
  // Generous bounds: "cut off" means long before the trickle would have ended (minutes).
  const SLACK_MS = 4000;
  let tight: TestServer;
  let w: World;
  beforeAll(async () => {
    tight = await startServer({ env: TIGHT });
    w = await createWorld(tight, { steps: [{ type: "wait", seconds: 30 }] });
  });
  afterAll(async () => {
    await tight?.stop();
  });

  it("HTTP: trickled headers, a trickled body and an idle connection are cut off in time; others are served meanwhile", async () => {
    const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;
    const headersSlow = rawHttp(tight.baseUrl, "", { trickle: rawRequest("GET", path, auth(w.apiToken)), intervalMs: 1000 });
    const body = JSON.stringify({ collection: w.collection, recordId: "r1", content: "x".repeat(200) });
    const head = rawRequest("POST", path, { ...auth(w.apiToken), "Content-Type": "application/json", "Content-Length": String(body.length) });
    const bodySlow = rawHttp(tight.baseUrl, head, { trickle: body, intervalMs: 1000 });
    const idle = rawHttp(tight.baseUrl, "");
    await sleep(300);
    await stillServing(tight, w);

    for (const [name, ex, limit] of [
      ["headers", await headersSlow, 1000],
      ["body", await bodySlow, 2000],
      ["idle", await idle, 1000],
    ] as const) {
      expect(ex.closedByServer, name).toBe(true);
      expect(ex.ms, name).toBeLessThan(limit + SLACK_MS);
      expect(ex.status, name).toBe(408);
      expect(JSON.parse(ex.body), name).toEqual(errorBody("deadline_exceeded", "the request was not received in time"));
    }
    await stillServing(tight, w);
  });

  it("HTTP: oversized request headers and malformed HTTP get the {error, code} body and the connection is closed", async () => {
    const big = await rawHttp(tight.baseUrl, rawRequest("GET", "/healthz", { "X-Pad": "a".repeat(20_000) }));
    expect(big.status).toBe(431);
    expect(JSON.parse(big.body)).toEqual(errorBody("resource_exhausted", "the request headers are too large"));
    const junk = await rawHttp(tight.baseUrl, "NOT HTTP AT ALL\r\n\r\n");
    expect(junk.status).toBe(400);
    expect(JSON.parse(junk.body)).toEqual(errorBody("invalid_argument", "malformed HTTP request"));
    expect(big.closedByServer && junk.closedByServer).toBe(true);
    await stillServing(tight, w);
  });

  it("HTTP: an idle keep-alive connection is closed after the keep-alive timeout", async () => {
    const head = `GET /healthz HTTP/1.1\r\nHost: runhook.test\r\n\r\n`;
    const ex = await rawHttp(tight.baseUrl, head);
    expect(ex.status).toBe(200);
    expect(ex.closedByServer).toBe(true);
    expect(ex.ms).toBeLessThan(1000 + SLACK_MS);
  });

  it("HTTP: an answer may take longer than the request timeout (long-poll)", async () => {
    const q = await queueRun(tight.deps.store, w, "r2");
    const running = await waitForRun(tight.deps.store, q._id, (r) => !!r.waitUntil); // parked: no change for 30 s
    const res = await fetch(`${tight.baseUrl}/v1/runs/${q._id}?wait=3s&version=${running.version}`, { headers: auth(w.userToken) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { version: string }).version).toBe(String(running.version));
  });

  it("gRPC: SETTINGS announce the stream and header limits; oversized metadata is refused; the server keeps serving", async () => {
    const session = http2.connect(`http://${tight.grpcAddr}`);
    session.on("error", () => {});
    const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve));
    expect(settings.maxConcurrentStreams).toBe(5);
    expect(settings.maxHeaderListSize).toBe(4096);
    // Metadata over the limit (sent anyway by a raw HTTP/2 client): the server resets the stream.
    const q = await queueRun(tight.deps.store, w, "r3");
    const big = session.request({ ...getRunHeaders(w.userToken), "x-pad": "a".repeat(8000) });
    big.on("error", () => {});
    big.resume();
    big.end(Buffer.concat([Buffer.from([0, 0, 0, 0, 0])]));
    const rstCode = await new Promise<number | undefined>((resolve) => big.on("close", () => resolve(big.rstCode)));
    session.close();
    expect(rstCode).toBe(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    const ok = await grpcGetRun(tight.grpcAddr, w.userToken, { runId: q._id });
    expect(ok.run?.id).toBe(q._id);
  });

  it("gRPC: a trickled connection preface and a trickled request are cut off; a long-poll longer than both timeouts is not", async () => {
    const [host, port] = tight.grpcAddr.split(":");
    // Bytes of the connection preface, one a second: no complete frame ever arrives.
    const preface = new Promise<{ closed: boolean; ms: number }>((resolve) => {
      const t0 = Date.now();
      const s = net.connect(Number(port), host);
      const bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
      let i = 0;
      const timer = setInterval(() => i < bytes.length && s.writable && s.write(bytes[i++]!), 1000);
      const end = (closed: boolean) => {
        clearInterval(timer);
        s.destroy();
        resolve({ closed, ms: Date.now() - t0 });
      };
      s.on("close", () => end(true));
      s.on("error", () => end(true));
      setTimeout(() => end(false), 15_000);
    });
    // A stream whose message arrives one byte a second.
    const trickledStream = new Promise<{ rstCode: number | undefined; ms: number }>((resolve) => {
      const t0 = Date.now();
      const session = http2.connect(`http://${tight.grpcAddr}`);
      session.on("error", () => {});
      const req = session.request(getRunHeaders(w.userToken));
      req.on("error", () => {});
      req.on("response", () => {});
      req.resume();
      req.write(Buffer.from([0, 0, 0, 0, 100]));
      const timer = setInterval(() => !req.destroyed && req.write(Buffer.from([0x0a])), 1000);
      req.on("close", () => {
        clearInterval(timer);
        resolve({ rstCode: req.rstCode, ms: Date.now() - t0 });
        session.close();
      });
    });
    // Meanwhile a long-poll of 3 s on the same kind of connection completes.
    const q = await queueRun(tight.deps.store, w, "r4");
    // Parked on its wait: nothing changes for the 3 s.
    const running = await waitForRun(tight.deps.store, q._id, (r) => !!r.waitUntil);
    const polled = await grpcGetRun(tight.grpcAddr, w.userToken, { runId: q._id, waitSeconds: 3, knownVersion: BigInt(running.version) });
    expect(Number(polled.run!.version)).toBe(running.version);

    const p = await preface;
    expect(p.closed).toBe(true);
    expect(p.ms).toBeLessThan(1000 + SLACK_MS);
    const t = await trickledStream;
    expect(t.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
    expect(t.ms).toBeLessThan(1000 + SLACK_MS);
    expect((await grpcGetRun(tight.grpcAddr, w.userToken, { runId: q._id })).run?.id).toBe(q._id);
  });
});
