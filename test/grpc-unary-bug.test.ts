// The native gRPC fast path when writing the answer itself throws (here: a response header
// HTTP/2 forbids): the throw is reported as a bug, with the procedure, and the stream is reset,
// so the caller gets an error at once instead of waiting — and no promise is left rejected.
// The fast path in a bare HTTP/2 server, called with @grpc/grpc-js.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary, fromBinary } from "@bufbuild/protobuf";
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, it } from "vitest";
import { GetRunRequestSchema, GetRunResponseSchema, RunService } from "../gen/runhook/v1/run_pb.js";
import { callsShutdown } from "../src/rpc/shutdown.js";
import { unaryFastPath } from "../src/rpc/grpc-unary.js";

const bugs: { procedure: string; message: string }[] = [];
let server: http2.Http2Server;
let port: number;

beforeAll(async () => {
  const impl = {
    getRun(_req: unknown, ctx: HandlerContext) {
      // A connection-specific header: Node's HTTP/2 refuses it when the headers are written.
      ctx.responseHeader.set("transfer-encoding", "chunked");
      return create(GetRunResponseSchema, {});
    },
  };
  const fast = unaryFastPath(
    [[RunService, impl]],
    [],
    1 << 20,
    (err, procedure) => bugs.push({ procedure, message: err instanceof Error ? err.message : String(err) }),
    callsShutdown(),
  );
  server = http2.createServer((req, res) => {
    if (!fast(req, res, createContextValues(), () => res.writeHead(500).end())) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

it("a throw while writing the answer is reported as a bug and resets the stream: the caller gets INTERNAL", async () => {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  try {
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        "/runhook.v1.RunService/GetRun",
        (m: unknown) => Buffer.from(toBinary(GetRunRequestSchema, create(GetRunRequestSchema, m as never))),
        (b: Buffer) => fromBinary(GetRunResponseSchema, b),
        { runId: "x" } as never,
        new grpc.Metadata(),
        { deadline: Date.now() + 10_000 },
        (e) => resolve(e),
      ),
    );
    expect(err?.code).toBe(grpc.status.INTERNAL);
    expect(bugs).toEqual([{ procedure: "runhook.v1.RunService/GetRun", message: expect.stringMatching(/transfer-encoding/) }]);
  } finally {
    client.close();
  }
});
