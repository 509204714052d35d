// Limits of the RPC servers (Connect / gRPC-Web on the gateway, native gRPC):
// - the public API's per-token rate limit also covers LogService and NoteService over
//   Connect and native gRPC, in the same budget as /v1 REST, each of its windows (a minute, an
//   hour, a day) refusing on its own with RESOURCE_EXHAUSTED and that window's retry-after;
// - request messages nested deeper than 64 messages (JSON or binary, compressed or not, unary
//   or a stream kept open) are refused with a clean INVALID_ARGUMENT, instead of a stack
//   overflow or Connect's INTERNAL "parse binary: …"; what is accepted can be read back.
import { gzipSync } from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../gen/runhook/v1/admin_pb.js";
import { ListActivityLogsRequestSchema, ListActivityLogsResponseSchema, LogService } from "../gen/runhook/v1/log_pb.js";
import { ListNotesRequestSchema, ListNotesResponseSchema, NoteService } from "../gen/runhook/v1/note_pb.js";
import { MAX_MESSAGE_NESTING } from "../src/rpc/message-nesting.js";
import { apiClient } from "./helpers/api.js";
import { liveTokenBuckets } from "./helpers/rate-limits.js";
import { serverForFile, startServer, type TestServer } from "./helpers/server.js";
import { adminClient, awaitFreshWindow, grpcUnary } from "./helpers/webhook.js";
import { addApiToken, createWorld, type World } from "../fixtures/world.js";
import { errorBody } from "../src/rpc/errors.js";

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe("per-token rate limit shared by REST, Connect and native gRPC", () => {
  const LIMIT = 9;
  const server = serverForFile({ env: { RUNHOOK_API_RATE_LIMIT: String(LIMIT), RUNHOOK_EXECUTOR: "false" } });
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
  });

  it("counts LogService and NoteService calls of every protocol in the token's one budget", async () => {
    await awaitFreshWindow(20_000); // the whole budget is spent inside one window
    const rest = apiClient(server.baseUrl, w.apiToken);
    const connect = createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" });
    const grpcWeb = createGrpcWebTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" });
    const native = createGrpcTransport({ baseUrl: `http://${server.grpcAddr}` });
    const logs = { projectName: w.projectName, environmentName: w.environmentName };
    const scope = { scope: { projectName: w.projectName, environmentName: w.environmentName } };
    const headers = auth(w.apiToken);
    const remaining: string[] = [];
    const onHeader = (h: Headers) => void remaining.push(h.get("x-ratelimit-remaining") ?? "none");

    // 9 calls, three per protocol, mixed services and kinds (unary, server stream).
    const r1 = await rest.get(`/v1/project/${w.projectName}/admin-logs`);
    expect(r1.status).toBe(200);
    expect(r1.headers.get("x-ratelimit-remaining")).toBe(String(LIMIT - 1));
    await createClient(LogService, connect).listActivityLogs(logs, { headers, onHeader });
    await createClient(NoteService, connect).createNote({ ...scope, collection: w.collection, recordId: "r1", content: "<p>x</p>" }, { headers, onHeader });
    const g1 = await grpcUnary(server.grpcAddr, "/runhook.v1.NoteService/ListNotes", ListNotesRequestSchema, ListNotesResponseSchema, scope, w.apiToken);
    expect(g1.error).toBeUndefined();
    const exported = [];
    for await (const e of createClient(LogService, native).exportAdminLogs({ projectName: w.projectName }, { headers, onHeader })) exported.push(e);
    await createClient(NoteService, grpcWeb).listNotes(scope, { headers, onHeader });
    const r2 = await rest.get(`/v1/project/${w.projectName}/environment/${w.environmentName}/notes`);
    expect(r2.status).toBe(200);
    expect(r2.headers.get("x-ratelimit-remaining")).toBe(String(LIMIT - 7)); // six RPCs counted in between
    const g2 = await grpcUnary(
      server.grpcAddr,
      "/runhook.v1.LogService/ListActivityLogs",
      ListActivityLogsRequestSchema,
      ListActivityLogsResponseSchema,
      logs,
      w.apiToken,
    );
    expect(g2.error).toBeUndefined();
    const r3 = await rest.get(`/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`);
    expect(r3.status).toBe(200);
    expect(r3.headers.get("x-ratelimit-remaining")).toBe("0");
    // The RPCs' own answers carry the headers too (response headers / metadata).
    expect(remaining).toEqual([String(LIMIT - 2), String(LIMIT - 3), String(LIMIT - 5), String(LIMIT - 6)]);

    // The budget is spent: every protocol is refused, with retry-after.
    const r4 = await rest.get(`/v1/project/${w.projectName}/admin-logs`);
    expect(r4.status).toBe(429);
    expect(r4.body).toEqual(errorBody("resource_exhausted", expect.stringMatching(/^rate limit of 9 requests per minute exceeded; retry after \d+ s$/)));
    for (const [name, call] of [
      ["Connect", () => createClient(LogService, connect).listAdminLogs({ projectName: w.projectName }, { headers })],
      ["gRPC-Web", () => createClient(NoteService, grpcWeb).getNote({ ...scope, noteId: "x" }, { headers })],
      [
        "gRPC stream",
        async () => {
          for await (const _ of createClient(LogService, native).exportActivityLogs(logs, { headers })) void _;
        },
      ],
    ] as const) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code, name).toBe(Code.ResourceExhausted);
      expect(err?.rawMessage, name).toMatch(/rate limit of 9 requests per minute exceeded; retry after \d+ s/);
      const retryAfter = Number(err?.metadata.get("retry-after"));
      expect(retryAfter, name).toBeGreaterThanOrEqual(1);
      expect(retryAfter, name).toBeLessThanOrEqual(60);
      expect(err?.metadata.get("x-ratelimit-remaining"), name).toBe("0");
    }
    // @grpc/grpc-js sees RESOURCE_EXHAUSTED with retry-after in the trailers.
    const g3 = await grpcUnary(server.grpcAddr, "/runhook.v1.NoteService/ListNotes", ListNotesRequestSchema, ListNotesResponseSchema, scope, w.apiToken);
    expect(g3.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(Number(g3.error?.metadata.get("retry-after")[0])).toBeGreaterThanOrEqual(1);

    // Another token of the same project has its own budget, on every protocol.
    const other = (await addApiToken(server, w.admin._id, w.projectId)).plaintext;
    await expect(createClient(LogService, native).listAdminLogs({ projectName: w.projectName }, { headers: auth(other) })).resolves.toBeDefined();
    expect((await apiClient(server.baseUrl, other).get(`/v1/project/${w.projectName}/admin-logs`)).headers.get("x-ratelimit-remaining")).toBe(
      String(LIMIT - 2),
    );
  });

  it("calls without a token have no bucket: all UNAUTHENTICATED, no token bucket written (their limit is per address, auth-throttle.test.ts)", async () => {
    await awaitFreshWindow(10_000);
    const native = createGrpcTransport({ baseUrl: `http://${server.grpcAddr}` });
    const before = await liveTokenBuckets(server.deps.store);
    const codes: Code[] = [];
    for (let i = 0; i < LIMIT + 2; i++) {
      const err = await createClient(LogService, native)
        .listAdminLogs({ projectName: w.projectName })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      codes.push(err!.code);
    }
    expect(codes).toEqual(Array(LIMIT + 2).fill(Code.Unauthenticated));
    expect(await liveTokenBuckets(server.deps.store)).toBe(before);
  });
});

describe("each window of the per-token limit over Connect and native gRPC", () => {
  // Project tokens: 3 calls an hour; organization API tokens: 2 a day.
  const server = serverForFile({
    env: {
      RUNHOOK_API_RATE_LIMIT: "1000",
      RUNHOOK_API_RATE_LIMIT_HOURLY: "3",
      RUNHOOK_API_RATE_LIMIT_DAILY: "1000",
      RUNHOOK_ORG_API_RATE_LIMIT_HOURLY: "1000",
      RUNHOOK_ORG_API_RATE_LIMIT_DAILY: "2",
      RUNHOOK_EXECUTOR: "false",
    },
  });
  // The same database with 4 calls a minute and 4 a day per project token.
  let other: TestServer;
  let w: World;
  beforeAll(async () => {
    w = await createWorld(server);
    other = await startServer({
      dbName: server.dbName,
      env: { RUNHOOK_API_RATE_LIMIT: "4", RUNHOOK_API_RATE_LIMIT_HOURLY: "1000", RUNHOOK_API_RATE_LIMIT_DAILY: "4", RUNHOOK_EXECUTOR: "false" },
    });
  });
  afterAll(async () => other?.stop());

  /** A call's refusal (or undefined), with the clock read before and after it. */
  const refusalOf = async (call: () => Promise<unknown>) => {
    const before = Date.now();
    const err = await call().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    return { err, before: Math.floor(before / 1000), after: Math.floor(Date.now() / 1000) };
  };
  /** A RESOURCE_EXHAUSTED naming `limit` a `per`, whose retry-after (in its message too) ends the window its X-RateLimit-Reset names. */
  const expectRefusedBy = (r: Awaited<ReturnType<typeof refusalOf>>, limit: number, per: string, windowSeconds: number, name: string) => {
    expect(r.err?.code, name).toBe(Code.ResourceExhausted);
    const retryAfter = Number(r.err?.metadata.get("retry-after"));
    expect(r.err?.rawMessage, name).toBe(`rate limit of ${limit} requests per ${per} exceeded; retry after ${retryAfter} s`);
    expect([r.err?.metadata.get("x-ratelimit-limit"), r.err?.metadata.get("x-ratelimit-remaining")], name).toEqual([String(limit), "0"]);
    const reset = Number(r.err?.metadata.get("x-ratelimit-reset"));
    expect(reset % windowSeconds, name).toBe(0);
    expect(reset - r.before, name).toBeGreaterThan(0);
    expect(reset - r.before, name).toBeLessThanOrEqual(windowSeconds);
    expect(reset - retryAfter, name).toBeGreaterThanOrEqual(r.before);
    expect(reset - retryAfter, name).toBeLessThanOrEqual(r.after);
  };

  it("the hour refuses past its limit on every protocol, with the hour's retry-after; refused calls spend no other window", async () => {
    await awaitFreshWindow(20_000); // every window (each ends on a minute) stays the same
    const token = (await addApiToken(server, w.admin._id, w.projectId)).plaintext;
    const headers = auth(token);
    const connect = createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" });
    const native = createGrpcTransport({ baseUrl: `http://${server.grpcAddr}` });
    const logs = { projectName: w.projectName, environmentName: w.environmentName };
    const shown: string[] = [];
    const onHeader = (h: Headers) => void shown.push(`${h.get("x-ratelimit-limit")}/${h.get("x-ratelimit-remaining")}/${h.get("ratelimit-policy")}`);
    await createClient(LogService, connect).listActivityLogs(logs, { headers, onHeader });
    await createClient(LogService, native).listAdminLogs({ projectName: w.projectName }, { headers, onHeader });
    await createClient(NoteService, native).listNotes({ scope: logs }, { headers, onHeader });
    const policy = "1000;w=60, 3;w=3600, 1000;w=86400";
    expect(shown).toEqual([`3/2/${policy}`, `3/1/${policy}`, `3/0/${policy}`]);

    for (const [name, call] of [
      ["Connect", () => createClient(LogService, connect).listAdminLogs({ projectName: w.projectName }, { headers })],
      [
        "gRPC stream",
        async () => {
          for await (const _ of createClient(LogService, native).exportActivityLogs(logs, { headers })) void _;
        },
      ],
    ] as const) {
      expectRefusedBy(await refusalOf(call), 3, "hour", 3600, name);
    }
    // @grpc/grpc-js sees the same, with the hour's retry-after in the trailers.
    const g = await grpcUnary(server.grpcAddr, "/runhook.v1.NoteService/ListNotes", ListNotesRequestSchema, ListNotesResponseSchema, { scope: logs }, token);
    expect(g.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(decodeURIComponent(g.error?.details ?? "")).toMatch(/^rate limit of 3 requests per hour exceeded; retry after \d+ s$/); // grpc-js leaves %3B as sent
    expect(Number(g.error?.metadata.get("retry-after")[0])).toBeGreaterThanOrEqual(1);

    // The other server counts the same token in the same windows: had the three refused calls
    // been counted, its minute (4) and its day (4) would refuse this fourth call.
    const last: string[] = [];
    await createClient(LogService, createGrpcTransport({ baseUrl: `http://${other.grpcAddr}` })).listAdminLogs(
      { projectName: w.projectName },
      { headers, onHeader: (h) => void last.push(`${h.get("x-ratelimit-limit")}/${h.get("x-ratelimit-remaining")}`) },
    );
    expect(last).toEqual(["4/0"]);
  });

  it("an organization API token's day (RUNHOOK_ORG_API_RATE_LIMIT_DAILY) refuses past its limit, with the day's retry-after", async () => {
    await awaitFreshWindow(20_000);
    const orgToken = (await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "daily" })).plaintext;
    const native = createGrpcTransport({ baseUrl: `http://${server.grpcAddr}` });
    const shown: string[] = [];
    const onHeader = (h: Headers) => void shown.push(`${h.get("x-ratelimit-limit")}/${h.get("x-ratelimit-remaining")}/${h.get("ratelimit-policy")}`);
    for (let i = 0; i < 2; i++) await createClient(LogService, native).listOrganizationAdminLogs({}, { headers: auth(orgToken), onHeader });
    const policy = "1000;w=60, 1000;w=3600, 2;w=86400";
    expect(shown).toEqual([`2/1/${policy}`, `2/0/${policy}`]);
    const connect = createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" });
    expectRefusedBy(
      await refusalOf(() => createClient(LogService, connect).listOrganizationAdminLogs({}, { headers: auth(orgToken) })),
      2,
      "day",
      86_400,
      "Connect",
    );
  });
});

// ---------------------------------------------------------------- nesting

const varint = (n: number) => {
  const out: number[] = [];
  for (; n > 127; n = Math.floor(n / 128)) out.push((n % 128) | 128);
  out.push(n);
  return Buffer.from(out);
};
const field = (no: number, payload: Buffer) => Buffer.concat([varint((no << 3) | 2), varint(payload.length), payload]);

/** google.protobuf.Value holding lists nested `n` deep (Value.list_value = 6, ListValue.values = 1). */
function nestedListValue(n: number): Buffer {
  let v = Buffer.from([0x20, 0x01]); // bool_value = true
  for (let i = 0; i < n; i++) v = field(6, field(1, v));
  return v;
}

/** PublishWorkflowRequest{workflow_id, steps: [Step{update_record: {set: Struct{"a": value}}}]} in binary. */
function publishBinary(workflowId: string, value: Buffer): Buffer {
  const struct = field(1, Buffer.concat([field(1, Buffer.from("a")), field(2, value)]));
  return Buffer.concat([field(1, Buffer.from(workflowId)), field(2, field(2, field(1, struct)))]);
}

/** The same in JSON, with the struct's values nested `n` objects deep. */
function publishJson(workflowId: string, n: number): string {
  return `{"workflowId":"${workflowId}","steps":[{"updateRecord":{"set":${'{"a":'.repeat(n)}1${"}".repeat(n)}}}]}`;
}

const envelope = (payload: Buffer, flags = 0) => {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
};

/** grpc-status and grpc-message of a gRPC-Web answer: in its headers, or in its trailer frame (flag 0x80). */
async function grpcWebStatus(res: Response): Promise<{ status: string | null; message: string | null }> {
  let fields = new Headers(res.headers);
  const body = Buffer.from(await res.arrayBuffer());
  for (let pos = 0; pos + 5 <= body.length; pos += 5 + body.readUInt32BE(pos + 1)) {
    if (body[pos]! & 0x80) {
      fields = new Headers(
        body
          .subarray(pos + 5, pos + 5 + body.readUInt32BE(pos + 1))
          .toString("utf8")
          .split("\r\n")
          .filter(Boolean)
          .map((l) => [l.slice(0, l.indexOf(":")).trim(), l.slice(l.indexOf(":") + 1).trim()] as [string, string]),
      );
    }
  }
  const message = fields.get("grpc-message");
  return { status: fields.get("grpc-status"), message: message === null ? null : decodeURIComponent(message) };
}

/** Native gRPC with a hand-made request body: status and message from the trailers. */
async function rawGrpc(addr: string, path: string, token: string, body: Buffer): Promise<{ status: number; message: string }> {
  const client = new grpc.Client(addr, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  try {
    return await new Promise((resolve) =>
      client.makeUnaryRequest(
        path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        body,
        md,
        (err) => resolve({ status: err?.code ?? 0, message: err?.details ?? "" }),
      ),
    );
  } finally {
    client.close();
  }
}

describe("deeply nested request messages", () => {
  const REFUSED = `the request message is nested deeper than ${MAX_MESSAGE_NESTING} levels`;
  const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });
  let w: World;
  let path: string;
  beforeAll(async () => {
    w = await createWorld(server);
    path = "/runhook.v1.AdminService/PublishWorkflow";
  });

  const connectPost = (contentType: string, body: Buffer | string, extra: Record<string, string> = {}) =>
    fetch(`${server.baseUrl}${path}`, {
      method: "POST",
      headers: { ...auth(w.adminToken), "content-type": contentType, ...extra },
      body: typeof body === "string" ? body : new Uint8Array(body),
    });

  it("Connect JSON: 10,000 levels of Struct is a clean invalid_argument, not a stack overflow", async () => {
    for (const n of [200, 10_000, 40_000]) {
      const res = await connectPost("application/json", publishJson(w.workflowId, n));
      expect(res.status, `depth ${n}`).toBe(400);
      expect(await res.json()).toEqual({ code: "invalid_argument", message: REFUSED });
    }
    // Compressed, and in other JSON protocols (Connect streaming envelope).
    const gz = await connectPost("application/json", gzipSync(publishJson(w.workflowId, 10_000)), { "content-encoding": "gzip" });
    expect(await gz.json()).toEqual({ code: "invalid_argument", message: REFUSED });
  });

  it("binary over Connect, gRPC-Web and native gRPC (plain, compressed, unknown groups) is refused the same way", async () => {
    const deep = publishBinary(w.workflowId, nestedListValue(20_000));
    expect(deep.length).toBeLessThan(server.deps.config.bodyLimitBytes);
    const proto = await connectPost("application/proto", deep);
    expect(proto.status).toBe(400);
    expect(await proto.json()).toEqual({ code: "invalid_argument", message: REFUSED });

    const web = await connectPost("application/grpc-web+proto", envelope(deep));
    expect(await grpcWebStatus(web)).toEqual({ status: "3", message: REFUSED });

    expect(await rawGrpc(server.grpcAddr, path, w.adminToken, deep)).toEqual({ status: grpc.status.INVALID_ARGUMENT, message: REFUSED });
    // Unknown groups nested 100,000 deep (one byte each): protobuf-es skips them recursively.
    const groups = Buffer.concat([field(1, Buffer.from(w.workflowId)), Buffer.alloc(100_000, (15 << 3) | 3)]);
    expect(await rawGrpc(server.grpcAddr, path, w.adminToken, groups)).toEqual({ status: grpc.status.INVALID_ARGUMENT, message: REFUSED });

    // A gzip-compressed message in a gRPC envelope (flag 1) is measured after decompression.
    const session = await import("node:http2").then((h) => h.connect(`http://${server.grpcAddr}`));
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-encoding": "gzip",
      ...auth(w.adminToken),
    });
    const trailers: Record<string, unknown> = {};
    stream.on("response", (h) => Object.assign(trailers, h));
    stream.on("trailers", (t) => Object.assign(trailers, t));
    stream.resume();
    stream.end(envelope(gzipSync(deep), 1));
    await new Promise((r) => stream.on("close", r));
    session.close();
    expect({ status: trailers["grpc-status"], message: decodeURIComponent(String(trailers["grpc-message"])) }).toEqual({ status: "3", message: REFUSED });
  });

  // Levels as protobuf counts them: the request, its step, the step's updateRecord, the Struct
  // `set`, then a Value and a Struct (or ListValue) for each level of the JSON inside.
  const structLevels = (n: number) => 3 + 2 * n;
  const listLevels = (n: number) => 5 + 2 * n; // {"a": [[…]]}: Struct, Value, then ListValue and Value per list

  it("up to the limit is accepted, stored, and read back over JSON and binary", async () => {
    const fits = (MAX_MESSAGE_NESTING - 3) >> 1;
    expect([structLevels(fits), structLevels(fits + 1)]).toEqual([MAX_MESSAGE_NESTING - 1, MAX_MESSAGE_NESTING + 1]);
    const res = await connectPost("application/json", publishJson(w.workflowId, fits));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await (await connectPost("application/json", publishJson(w.workflowId, fits + 1))).json()).toEqual({ code: "invalid_argument", message: REFUSED });
    const lists = (MAX_MESSAGE_NESTING - 5) >> 1;
    expect(listLevels(lists)).toBeLessThanOrEqual(MAX_MESSAGE_NESTING);
    expect(await rawGrpc(server.grpcAddr, path, w.adminToken, publishBinary(w.workflowId, nestedListValue(lists)))).toEqual({ status: 0, message: "" });
    expect(await rawGrpc(server.grpcAddr, path, w.adminToken, publishBinary(w.workflowId, nestedListValue(lists + 1)))).toEqual({
      status: grpc.status.INVALID_ARGUMENT,
      message: REFUSED,
    });
    // Read back by protobuf-es clients, whose own limit is 100 levels: the answer wraps the steps deeper.
    const binary = createClient(AdminService, createGrpcTransport({ baseUrl: `http://${server.grpcAddr}` }));
    const got = await binary.getWorkflow({ workflowId: w.workflowId }, { headers: auth(w.adminToken) });
    expect(got.workflow?.versions.length).toBe(3);
    expect(await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId })).toBeDefined();
  });

  it("a stream is checked message by message: reflection answers while the client keeps its side open, a deep message ends it", async () => {
    const http2 = await import("node:http2");
    const session = http2.connect(`http://${server.grpcAddr}`);
    try {
      const stream = session.request({
        ":method": "POST",
        ":path": "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "content-type": "application/grpc",
        te: "trailers",
        "x-request-id": "deep-stream-1",
      });
      const trailers = new Promise<Record<string, unknown>>((r) => stream.on("trailers", r));
      const frames: Buffer[] = [];
      const answered = new Promise<void>((resolve) =>
        stream.on("data", (d: Buffer) => {
          frames.push(d);
          resolve();
        }),
      );
      // ServerReflectionRequest{list_services = 7: ""}, and the stream stays open.
      stream.write(envelope(field(7, Buffer.alloc(0))));
      await answered;
      expect(Buffer.concat(frames).toString("latin1")).toContain("runhook.v1.TriggerService");
      // Then a message of unknown groups nested 1,000 deep, still without closing our side, in
      // small pieces (its header split too): it is checked once its last byte arrives.
      const deep = envelope(Buffer.alloc(1000, (15 << 3) | 3));
      for (let at = 0; at < deep.length; at += 3) stream.write(deep.subarray(at, at + 3));
      const t = await trailers;
      expect({ status: t["grpc-status"], message: decodeURIComponent(String(t["grpc-message"])) }).toEqual({ status: "3", message: REFUSED });
      expect(t["x-request-id"]).toBe("deep-stream-1");
    } finally {
      session.close();
    }
  });

  it("a Connect body over the size limit is refused, and the server keeps serving", async () => {
    const big = JSON.stringify({ workflowId: w.workflowId, steps: [], triggerRoles: ["x".repeat(server.deps.config.bodyLimitBytes)] });
    const res = await connectPost("application/json", big);
    expect(await res.json()).toMatchObject({ code: "resource_exhausted" });
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    const ok = await createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" })).listAdminLogs(
      { projectName: w.projectName },
      { headers: auth(w.apiToken) },
    );
    expect(ok.hasMore).toBe(false);
  });
});
