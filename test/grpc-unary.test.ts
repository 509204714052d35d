// Native gRPC unary calls take a short path when they are one uncompressed message, and go
// through Connect's own pipeline otherwise (a compressed message, a bad deadline, a body that
// is not one message). A client must not be able to tell which: the same call answers with the
// same headers, message and trailers either way, and every refusal is Connect's.
import http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { beforeAll, describe, expect, it } from "vitest";
import { GetWorkflowRequestSchema, GetWorkflowResponseSchema } from "../gen/runhook/v1/admin_pb.js";
import { GetRunRequestSchema } from "../gen/runhook/v1/run_pb.js";
import { TriggerRunRequestSchema, TriggerRunResponseSchema } from "../gen/runhook/v1/trigger_pb.js";
import { createWorld, type World } from "../fixtures/world.js";
import { serverForFile, uuid } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";

const server = serverForFile({ env: { RUNHOOK_EXECUTOR: "false" } });
let w: World;
let webhookUrl: string;

beforeAll(async () => {
  w = await createWorld(server);
  webhookUrl = (await adminClient(server.baseUrl, w.ownerToken).getWorkflow({ workflowId: w.workflowId })).workflow!.webhook!.url;
});

const envelope = (payload: Uint8Array, flags = 0) => {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
};

interface Answer {
  status: number;
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: Buffer;
}

/** One call over node:http2, as a generated client in any language would make it. */
async function call(path: string, body: Buffer, headers: Record<string, string>): Promise<Answer> {
  const session = http2.connect(`http://${server.grpcAddr}`);
  try {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    const answer: Answer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      answer.status = Number(h[":status"]);
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && k !== "date") answer.headers[k] = v;
    });
    stream.on("trailers", (t) => Object.assign(answer.trailers, t));
    stream.on("data", (d: Buffer) => chunks.push(d));
    stream.end(body);
    await new Promise((r) => stream.on("close", r));
    // The message itself: Connect answers a compressed request compressed, as gRPC allows.
    const received = Buffer.concat(chunks);
    answer.body = received[0] === 1 ? envelope(gunzipSync(received.subarray(5))) : received;
    delete answer.headers["grpc-encoding"];
    // A trailers-only answer carries the status in its headers.
    for (const k of ["grpc-status", "grpc-message", "grpc-status-details-bin"]) {
      if (answer.headers[k] !== undefined) {
        answer.trailers[k] = answer.headers[k];
        delete answer.headers[k];
      }
    }
    return answer;
  } finally {
    session.close();
  }
}

/** The same message sent plain (the short path) and gzip-compressed (Connect's pipeline), with one request id. */
async function bothWays(path: string, message: Uint8Array, headers: Record<string, string>): Promise<[Answer, Answer]> {
  const requestId = uuid();
  const plain = await call(path, envelope(message), { ...headers, "x-request-id": requestId });
  const compressed = await call(path, envelope(gzipSync(message), 1), { ...headers, "x-request-id": requestId, "grpc-encoding": "gzip" });
  // Both carry the rate limit's headers; their counts differ by the one call between them.
  for (const a of [plain, compressed]) {
    for (const k of Object.keys(a.headers).filter((k) => /ratelimit-(remaining|reset)$|^ratelimit$/.test(k))) delete a.headers[k];
  }
  return [plain, compressed];
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const TRIGGER = "/runhook.v1.TriggerService/TriggerRun";

/** A run triggered over native gRPC, and its version (no executor runs here: it stays queued). */
async function queuedRun(): Promise<{ runId: string; version: number }> {
  const first = await call(
    TRIGGER,
    envelope(toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, { webhookUrl, recordId: uuid() }))),
    auth(w.userToken),
  );
  const runId = fromBinary(TriggerRunResponseSchema, first.body.subarray(5)).runId;
  return { runId, version: (await server.deps.store.runs.get(runId))!.version };
}

describe("native gRPC unary calls", () => {
  it("answer a success the same with and without a compressed request", async () => {
    const req = toBinary(GetWorkflowRequestSchema, create(GetWorkflowRequestSchema, { workflowId: w.workflowId }));
    const [plain, compressed] = await bothWays("/runhook.v1.AdminService/GetWorkflow", req, auth(w.ownerToken));
    expect(plain.status).toBe(200);
    expect(plain.trailers).toMatchObject({ "grpc-status": "0" });
    expect(plain.headers["content-type"]).toBe("application/grpc+proto");
    expect(compressed).toEqual(plain);
    expect(plain.body[0]).toBe(0);
    expect(fromBinary(GetWorkflowResponseSchema, plain.body.subarray(5)).workflow?.id).toBe(w.workflowId);
  });

  it("answer an error with details (the ongoing run) the same with and without a compressed request", async () => {
    const recordId = uuid();
    const req = toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, { webhookUrl, recordId }));
    const first = await call(TRIGGER, envelope(req), auth(w.userToken));
    expect(first.trailers["grpc-status"]).toBe("0");
    const runId = fromBinary(TriggerRunResponseSchema, first.body.subarray(5)).runId;
    const [plain, compressed] = await bothWays(TRIGGER, req, auth(w.userToken));
    expect(plain.trailers["grpc-status"]).toBe("6"); // ALREADY_EXISTS
    expect(Buffer.from(String(plain.trailers["grpc-status-details-bin"]), "base64").toString("latin1")).toContain(runId);
    expect(compressed).toEqual(plain);
    // Unauthenticated, the same way too.
    const [noToken, noTokenCompressed] = await bothWays(TRIGGER, req, {});
    expect(noToken.trailers["grpc-status"]).toBe("16");
    expect(noTokenCompressed).toEqual(noToken);
  });

  it("keep the caller's deadline: a long-poll ends when it is due, the same either way", async () => {
    const { runId, version } = await queuedRun();
    // No executor runs here: the run does not change, so only the deadline ends the wait.
    const req = toBinary(GetRunRequestSchema, create(GetRunRequestSchema, { runId, waitSeconds: 30, knownVersion: BigInt(version) }));
    const started = Date.now();
    const [plain, compressed] = await bothWays("/runhook.v1.RunService/GetRun", req, { ...auth(w.userToken), "grpc-timeout": "300m" });
    expect(Date.now() - started).toBeLessThan(10_000); // two calls of 300 ms, not 30 s
    // The run as it is when the deadline ends the wait (the client has stopped waiting by then).
    expect(plain.trailers["grpc-status"]).toBe("0");
    expect(compressed).toEqual(plain);
  });

  it("treat a deadline past what a timer can wait (99999999H) as the longest one, the same either way", async () => {
    const { runId, version } = await queuedRun();
    // A wait of 1 s for a change that does not come: answered after the wait, not cut by a deadline.
    const req = toBinary(GetRunRequestSchema, create(GetRunRequestSchema, { runId, waitSeconds: 1, knownVersion: BigInt(version) }));
    for (const timeout of ["99999999H", "35791395M", "2147484S"]) {
      const [plain, compressed] = await bothWays("/runhook.v1.RunService/GetRun", req, { ...auth(w.userToken), "grpc-timeout": timeout });
      expect(plain.trailers["grpc-status"], timeout).toBe("0");
      expect(compressed).toEqual(plain);
    }
    // Connect's own protocol over HTTP/1.1: connect-timeout-ms of ten digits.
    const res = await fetch(`${server.baseUrl}/runhook.v1.RunService/GetRun`, {
      method: "POST",
      headers: { ...auth(w.userToken), "content-type": "application/json", "connect-protocol-version": "1", "connect-timeout-ms": "9999999999" },
      body: JSON.stringify({ runId, waitSeconds: 1, knownVersion: String(version) }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { run: { id: string } }).run.id).toBe(runId);
  });

  it("leave every other request to Connect, which refuses it as it always did", async () => {
    const req = toBinary(TriggerRunRequestSchema, create(TriggerRunRequestSchema, { webhookUrl, recordId: uuid() }));
    const status = async (body: Buffer, headers: Record<string, string> = {}) => {
      const a = await call(TRIGGER, body, { ...auth(w.userToken), ...headers });
      return { status: a.trailers["grpc-status"], message: decodeURIComponent(String(a.trailers["grpc-message"])) };
    };
    expect(await status(Buffer.concat([envelope(req), envelope(req)]))).toEqual({
      status: "12",
      message: "protocol error: received extra input message for unary method",
    });
    expect(await status(Buffer.alloc(0))).toEqual({ status: "12", message: "protocol error: missing input message for unary method" });
    expect(await status(envelope(req).subarray(0, 9))).toEqual({ status: "3", message: "protocol error: incomplete envelope" });
    expect(await status(envelope(req), { "grpc-timeout": "soon" })).toEqual({
      status: "3",
      message: "protocol error: invalid grpc timeout value: soon",
    });
    expect(await status(envelope(req), { "grpc-encoding": "zstd" })).toMatchObject({ status: "12" });
    // None of them started a run: the record is still free.
    expect((await status(envelope(req))).status).toBe("0");
  });
});
