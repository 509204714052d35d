// Limits of the RPC servers (Connect / gRPC-Web on the gateway, native gRPC):
// - the public API's per-token rate limit also covers LogService and NoteService over
//   Connect and native gRPC, in the same budget as /v1 REST;
// - request messages nested deeper than 64 levels (JSON or binary, compressed or not) are
//   refused with a clean INVALID_ARGUMENT before they are decoded, instead of a stack
//   overflow's "Maximum call stack size exceeded"; what is accepted can be read back.
import { gzipSync } from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService, PublishWorkflowRequestSchema } from "../gen/runhook/v1/admin_pb.js";
import { ListActivityLogsRequestSchema, ListActivityLogsResponseSchema, LogService } from "../gen/runhook/v1/log_pb.js";
import { ListNotesRequestSchema, ListNotesResponseSchema, NoteService } from "../gen/runhook/v1/note_pb.js";
import { binaryTooDeep, MAX_MESSAGE_DEPTH } from "../src/api/message-depth.js";
import { apiClient } from "./helpers/api.js";
import { startServer, type TestServer } from "./helpers/server.js";
import { adminClient, awaitFreshWindow, grpcUnary } from "./helpers/webhook.js";
import { addApiToken, createWorld, type World } from "./helpers/world.js";

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe("per-token rate limit shared by REST, Connect and native gRPC", () => {
  const LIMIT = 9;
  let server: TestServer;
  let w: World;
  beforeAll(async () => {
    server = await startServer({ env: { RUNHOOK_API_RATE_LIMIT: String(LIMIT), RUNHOOK_EXECUTOR: "false" } });
    w = await createWorld(server.deps.store.db);
  });
  afterAll(async () => server?.stop());

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
    const g2 = await grpcUnary(server.grpcAddr, "/runhook.v1.LogService/ListActivityLogs", ListActivityLogsRequestSchema, ListActivityLogsResponseSchema, logs, w.apiToken);
    expect(g2.error).toBeUndefined();
    const r3 = await rest.get(`/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`);
    expect(r3.status).toBe(200);
    expect(r3.headers.get("x-ratelimit-remaining")).toBe("0");
    // The RPCs' own answers carry the headers too (response headers / metadata).
    expect(remaining).toEqual([String(LIMIT - 2), String(LIMIT - 3), String(LIMIT - 5), String(LIMIT - 6)]);

    // The budget is spent: every protocol is refused, with retry-after.
    const r4 = await rest.get(`/v1/project/${w.projectName}/admin-logs`);
    expect(r4.status).toBe(429);
    expect(r4.body).toEqual({ error: expect.stringContaining("rate limit of 9 requests per minute exceeded"), code: "resource_exhausted" });
    for (const [name, call] of [
      ["Connect", () => createClient(LogService, connect).listAdminLogs({ projectName: w.projectName }, { headers })],
      ["gRPC-Web", () => createClient(NoteService, grpcWeb).getNote({ ...scope, noteId: "x" }, { headers })],
      ["gRPC stream", async () => {
        for await (const _ of createClient(LogService, native).exportActivityLogs(logs, { headers })) void _;
      }],
    ] as const) {
      const err = await call().then(() => undefined, (e: unknown) => ConnectError.from(e));
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
    const other = (await addApiToken(server.deps.store.db, w.admin._id, w.projectId)).plaintext;
    await expect(createClient(LogService, native).listAdminLogs({ projectName: w.projectName }, { headers: auth(other) })).resolves.toBeDefined();
    expect((await apiClient(server.baseUrl, other).get(`/v1/project/${w.projectName}/admin-logs`)).headers.get("x-ratelimit-remaining")).toBe(String(LIMIT - 2));
  });

  it("calls without a token have no bucket: all UNAUTHENTICATED, nothing written (their limit is per address, auth-throttle.test.ts)", async () => {
    await awaitFreshWindow(10_000);
    const native = createGrpcTransport({ baseUrl: `http://${server.grpcAddr}` });
    const before = await server.deps.store.db.rateLimits.countDocuments({});
    const codes: Code[] = [];
    for (let i = 0; i < LIMIT + 2; i++) {
      const err = await createClient(LogService, native).listAdminLogs({ projectName: w.projectName }).then(() => undefined, (e: unknown) => ConnectError.from(e));
      codes.push(err!.code);
    }
    expect(codes).toEqual(Array(LIMIT + 2).fill(Code.Unauthenticated));
    expect(await server.deps.store.db.rateLimits.countDocuments({})).toBe(before);
  });
});
