// Standalone proof that the standard gRPC health and reflection services work
// on the native HTTP/2 server (connectNodeAdapter over http2.createServer),
// for @grpc/grpc-js clients and for `buf curl` (reflection, no schema).

import { execFile } from "node:child_process";
import { once } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { TriggerService } from "../gen/runhook/v1/trigger_pb.js";
import { createHealthStatus, registerHealth } from "../src/rpc/health.js";
import type { HealthStatus } from "../src/rpc/health.js";
import { registerReflection } from "../src/rpc/reflection.js";

const execFileAsync = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bufBin = path.join(root, "node_modules", ".bin", "buf");
const STUB_RUN_ID = "00000000-0000-4000-8000-000000000001";

// ---- grpc-js clients built from the vendored protos -----------------------

const loaderOptions: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [path.join(root, "proto")],
};
const grpcPackage = grpc.loadPackageDefinition(
  protoLoader.loadSync(["grpc/health/v1/health.proto", "grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"], loaderOptions),
) as unknown as {
  grpc: {
    health: { v1: { Health: grpc.ServiceClientConstructor } };
    reflection: {
      v1: { ServerReflection: grpc.ServiceClientConstructor };
      v1alpha: { ServerReflection: grpc.ServiceClientConstructor };
    };
  };
};

interface HealthClient extends grpc.Client {
  Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res?: { status: string }) => void): grpc.ClientUnaryCall;
  Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
}

type ReflectionResponse = {
  message_response: string;
  list_services_response?: { service: Array<{ name: string }> };
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  error_response?: { error_code: number; error_message: string };
};

interface ReflectionClient extends grpc.Client {
  ServerReflectionInfo(): grpc.ClientDuplexStream<Record<string, unknown>, ReflectionResponse>;
}

/** Sends requests on one reflection stream and collects one answer per request. */
async function reflect(client: ReflectionClient, requests: Array<Record<string, unknown>>) {
  const call = client.ServerReflectionInfo();
  const answers: ReflectionResponse[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on("data", (r: ReflectionResponse) => answers.push(r));
    call.on("error", reject);
    call.on("end", () => resolve());
  });
  for (const r of requests) call.write(r);
  call.end();
  await done;
  return answers;
}

function fileNames(r: ReflectionResponse | undefined): string[] {
  return (r?.file_descriptor_response?.file_descriptor_proto ?? []).map((b) => fromBinary(FileDescriptorProtoSchema, new Uint8Array(b)).name);
}

// ---- server ----------------------------------------------------------------

let server: http2.Http2Server;
let port = 0;
let health: HealthStatus;
const clients: grpc.Client[] = [];

function client<T extends grpc.Client>(ctor: grpc.ServiceClientConstructor): T {
  const c = new ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as T;
  clients.push(c);
  return c;
}

async function bufCurl(...args: string[]) {
  const { stdout } = await execFileAsync(bufBin, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args], { timeout: 60_000 });
  return stdout;
}

beforeAll(async () => {
  health = createHealthStatus({ services: [TriggerService, RunService] });
  const handler = connectNodeAdapter({
    routes(router) {
      registerHealth(router, health);
      registerReflection(router, [TriggerService, Health]);
      // Trivial stub, only so that reflection has a runhook service to list.
      router.service(TriggerService, {
        triggerRun: (req) => ({ runId: req.recordId === "" ? "" : STUB_RUN_ID }),
      });
    },
  });
  server = http2.createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const c of clients) c.close();
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    // Do not wait for idle keep-alive sessions of finished clients.
    setTimeout(resolve, 2000).unref();
  });
});

// ---- health ------------------------------------------------------------------

describe("grpc.health.v1.Health", () => {
  const check = (c: HealthClient, service: string) =>
    new Promise<{ status: string }>((resolve, reject) => c.Check({ service }, (err, res) => (err ? reject(err) : resolve(res!))));

  it("answers SERVING for the server and every runhook service (grpc-js)", async () => {
    const c = client<HealthClient>(grpcPackage.grpc.health.v1.Health);
    expect((await check(c, "")).status).toBe("SERVING");
    expect((await check(c, "runhook.v1.TriggerService")).status).toBe("SERVING");
    expect((await check(c, "runhook.v1.RunService")).status).toBe("SERVING");
  });

  it("answers NOT_FOUND for an unknown service", async () => {
    const c = client<HealthClient>(grpcPackage.grpc.health.v1.Health);
    await expect(check(c, "nope.v1.Nope")).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
  });

  it("is callable through buf curl with reflection", async () => {
    const out = await bufCurl("-d", '{"service":""}', `http://127.0.0.1:${port}/grpc.health.v1.Health/Check`);
    expect(JSON.parse(out)).toEqual({ status: "SERVING" });
  });
});

// ---- reflection --------------------------------------------------------------

describe("grpc.reflection ServerReflection", () => {
  it("lists services with buf curl (reflection, no schema)", async () => {
    const out = await bufCurl("--list-services", `http://127.0.0.1:${port}`);
    const services = out.trim().split("\n");
    expect(services).toContain("runhook.v1.TriggerService");
    expect(services).toContain("grpc.health.v1.Health");
  });

  it("lists methods with buf curl (reflection, no schema)", async () => {
    const out = await bufCurl("--list-methods", `http://127.0.0.1:${port}`);
    expect(out.trim().split("\n")).toContain("runhook.v1.TriggerService/TriggerRun");
  });

  for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
    it(`lists methods with buf curl --reflect-protocol ${protocol}`, async () => {
      const out = await bufCurl("--reflect-protocol", protocol, "--list-methods", `http://127.0.0.1:${port}`);
      expect(out.trim().split("\n")).toContain("runhook.v1.TriggerService/TriggerRun");
    });
  }

  it("resolves request and response types for a real call with buf curl", async () => {
    const out = await bufCurl("-d", '{"webhookUrl":"k","recordId":"r1"}', `http://127.0.0.1:${port}/runhook.v1.TriggerService/TriggerRun`);
    expect(JSON.parse(out)).toEqual({ runId: STUB_RUN_ID });
  });

  for (const version of ["v1", "v1alpha"] as const) {
    it(`${version}: list_services, file_by_filename, file_containing_symbol with deps (grpc-js)`, async () => {
      const c = client<ReflectionClient>(grpcPackage.grpc.reflection[version].ServerReflection);
      const [list, byName, bySymbol, byMethod, byNested, missing] = await reflect(c, [
        { list_services: "*" },
        { file_by_filename: "runhook/v1/run.proto" },
        { file_containing_symbol: "runhook.v1.TriggerService" },
        { file_containing_symbol: "grpc.health.v1.Health.Watch" },
        { file_containing_symbol: "grpc.health.v1.HealthCheckResponse.ServingStatus" },
        { file_containing_symbol: "nope.Nope" },
      ]);

      expect(list?.list_services_response?.service.map((s) => s.name)).toEqual([
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "runhook.v1.TriggerService",
      ]);
      // run.proto is not reachable from the listed services' files...
      expect(byName?.error_response?.error_code).toBe(grpc.status.NOT_FOUND);
      expect(fileNames(bySymbol)).toEqual(["runhook/v1/trigger.proto"]);
      expect(fileNames(byMethod)).toEqual(["grpc/health/v1/health.proto"]);
      expect(fileNames(byNested)).toEqual(["grpc/health/v1/health.proto"]);
      expect(missing?.error_response?.error_code).toBe(grpc.status.NOT_FOUND);
    });
  }

  it("serves transitive dependencies including well-known types", async () => {
    // A second server whose reflection covers RunService (imports common.proto, log.proto — its
    // list options —, google/protobuf/struct.proto and google/protobuf/timestamp.proto).
    const h = connectNodeAdapter({ routes: (router) => void registerReflection(router, [RunService]) });
    const s2 = http2.createServer(h).listen(0, "127.0.0.1");
    await once(s2, "listening");
    try {
      const c = new grpcPackage.grpc.reflection.v1.ServerReflection(
        `127.0.0.1:${(s2.address() as AddressInfo).port}`,
        grpc.credentials.createInsecure(),
      ) as unknown as ReflectionClient;
      const [byName, bySymbol] = await reflect(c, [{ file_by_filename: "runhook/v1/run.proto" }, { file_containing_symbol: "runhook.v1.Run" }]);
      for (const r of [byName, bySymbol]) {
        const names = fileNames(r);
        expect(names[0]).toBe("runhook/v1/run.proto");
        expect(new Set(names)).toEqual(
          new Set([
            "runhook/v1/run.proto",
            "runhook/v1/common.proto",
            "runhook/v1/log.proto",
            "google/protobuf/struct.proto",
            "google/protobuf/timestamp.proto",
          ]),
        );
      }
      c.close();
      const methods = await bufCurl("--list-methods", `http://127.0.0.1:${(s2.address() as AddressInfo).port}`);
      expect(methods.trim().split("\n")).toContain("runhook.v1.RunService/WatchRun");
    } finally {
      await new Promise<void>((resolve) => {
        s2.close(() => resolve());
        setTimeout(resolve, 2000).unref();
      });
    }
  });
});

// ---- shutdown (last: it flips the shared status) ------------------------------

describe("health shutdown", () => {
  it("Watch streams the current status, then NOT_SERVING on shutdown(), then ends", async () => {
    const c = client<HealthClient>(grpcPackage.grpc.health.v1.Health);
    const call = c.Watch({ service: "runhook.v1.TriggerService" });
    const seen: string[] = [];
    const ended = new Promise<void>((resolve, reject) => {
      call.on("data", (r: { status: string }) => {
        seen.push(r.status);
        if (seen.length === 1) health.shutdown();
      });
      call.on("error", reject);
      call.on("end", () => resolve());
    });
    await ended;
    expect(seen).toEqual(["SERVING", "NOT_SERVING"]);

    const unknown = c.Watch({ service: "nope.v1.Nope" });
    const first = await new Promise<string>((resolve, reject) => {
      unknown.on("data", (r: { status: string }) => resolve(r.status));
      unknown.on("error", reject);
    });
    expect(first).toBe("SERVICE_UNKNOWN");

    const overall = await new Promise<{ status: string }>((resolve, reject) => c.Check({ service: "" }, (err, res) => (err ? reject(err) : resolve(res!))));
    expect(overall.status).toBe("NOT_SERVING");
  });
});
