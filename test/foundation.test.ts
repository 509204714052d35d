// The skeleton works end to end: the real server on the real database answers over
// plain HTTP, Connect and native gRPC (@grpc/grpc-js).
import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { AdminService, BootstrapRequestSchema, BootstrapResponseSchema } from "../gen/runhook/v1/admin_pb.js";
import { BOOTSTRAP_SECRET, serverForFile } from "./helpers/server.js";

const server = serverForFile();

describe("foundation", () => {
  it("answers /healthz and /readyz over HTTP", async () => {
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${server.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready" });
  });

  it("answers unknown routes with the error body", async () => {
    const res = await fetch(`${server.baseUrl}/nope`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: "not_found", error: expect.any(String) });
  });

  it("serves AdminService.Bootstrap over Connect", async () => {
    const client = createClient(AdminService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const res = await client.bootstrap(
      { organizationName: "acme-connect", adminEmail: "root-connect@example.test", adminName: "Root" },
      { headers: { authorization: `Bearer ${BOOTSTRAP_SECRET}` } },
    );
    expect(res.organization?.name).toBe("acme-connect");
    expect(res.adminToken).toMatch(/^rh_app_/);
  });

  it("serves AdminService.Bootstrap over native gRPC to a grpc-js client", async () => {
    const client = new grpc.Client(server.grpcAddr, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${BOOTSTRAP_SECRET}`);
    const res = await new Promise<ReturnType<typeof fromBinary<typeof BootstrapResponseSchema>>>((resolve, reject) =>
      client.makeUnaryRequest(
        "/runhook.v1.AdminService/Bootstrap",
        (m: Uint8Array) => Buffer.from(toBinary(BootstrapRequestSchema, create(BootstrapRequestSchema, m as never))),
        (b: Buffer) => fromBinary(BootstrapResponseSchema, b),
        { organizationName: "acme-grpc", adminEmail: "root-grpc@example.test", adminName: "Root" } as never,
        md,
        (err, value) => (err ? reject(err) : resolve(value!)),
      ),
    );
    client.close();
    expect(res.organization?.name).toBe("acme-grpc");
  });

  it("rejects Bootstrap without the operator secret", async () => {
    const res = await fetch(`${server.baseUrl}/runhook.v1.AdminService/Bootstrap`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer wrong-secret-wrong-secret" },
      body: JSON.stringify({ organizationName: "x", adminEmail: "x@example.test" }),
    });
    expect(res.status).toBe(401);
  });
});
