// Strangers' tools against the real server's native gRPC port, knowing nothing of runhook's
// protos: everything comes from server reflection.
// - `buf curl` (grpc, HTTP/2 prior knowledge) lists the services and methods, calls
//   TriggerService/TriggerRun and follows RunService/WatchRun, and calls Health Check and Watch;
// - a Go client (test/interop/go/reflect) keeps ONE reflection stream open the way grpcurl
//   does (it never half-closes between questions), describes the two methods, calls them with
//   dynamic messages, asks again on the same stream, and calls Health Check and Watch.
// The Go part is skipped, saying so, when `go` is not on PATH.
import { execFile, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SeedOutput } from "../src/cli/demo.js";
import { ROOT, seed, startServer, type TestServer } from "./helpers/server.js";

const run = promisify(execFile);
const BUF = join(ROOT, "node_modules/.bin/buf");
const FINISHED = ["SUCCEEDED", "FAILED", "CANCELLED"];

function hasGo(): boolean {
  try {
    execFileSync("go", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

let server: TestServer;
let demo: SeedOutput;
beforeAll(async () => {
  server = await startServer();
  demo = await seed(server);
});
afterAll(async () => server?.stop());

describe("buf curl, through reflection alone", () => {
  const bufCurl = async (...args: string[]) => (await run(BUF, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args], { timeout: 90_000 })).stdout;
  const url = (method = "") => `http://${server.grpcAddr}${method}`;
  const auth = () => ["-H", `authorization: Bearer ${demo.userToken}`];

  it("lists the services and their methods", async () => {
    const services = (await bufCurl("--list-services", url())).trim().split("\n");
    expect(services).toEqual(
      expect.arrayContaining([
        "runhook.v1.TriggerService",
        "runhook.v1.RunService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
      ]),
    );
    for (const protocol of ["grpc-v1", "grpc-v1alpha"]) {
      const methods = (await bufCurl("--reflect-protocol", protocol, "--list-methods", url())).trim().split("\n");
      expect(methods, protocol).toEqual(
        expect.arrayContaining(["runhook.v1.TriggerService/TriggerRun", "runhook.v1.RunService/WatchRun", "grpc.health.v1.Health/Watch"]),
      );
    }
  });

  it("calls TriggerRun, then follows the run with WatchRun until it is finished", { timeout: 120_000 }, async () => {
    const body = JSON.stringify({ webhookUrl: demo.webhookUrl, recordId: demo.recordIds[0] });
    const { runId } = JSON.parse(await bufCurl(...auth(), "-d", body, url("/runhook.v1.TriggerService/TriggerRun"))) as { runId: string };
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);
    // buf curl prints each streamed message as a JSON document.
    const out = await bufCurl(...auth(), "-d", JSON.stringify({ runId }), url("/runhook.v1.RunService/WatchRun"));
    const states = out.split(/\n(?=\{)/).map((doc) => (JSON.parse(doc) as { run: { id: string; state: string } }).run);
    expect(states.every((r) => r.id === runId)).toBe(true);
    expect(states.at(-1)?.state).toBe("SUCCEEDED");
  });

  it("calls Health Check and Watch", async () => {
    expect(JSON.parse(await bufCurl("-d", "{}", url("/grpc.health.v1.Health/Check")))).toEqual({ status: "SERVING" });
    // Watch never ends by itself: read its first message, then stop buf curl.
    const child = spawn(BUF, [
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "-d",
      '{"service":"runhook.v1.RunService"}',
      url("/grpc.health.v1.Health/Watch"),
    ]);
    let out = "";
    const first = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes("}")) resolve(out);
      });
      child.once("exit", (code) => reject(new Error(`buf curl exited with ${code} before an answer: ${out}`)));
    });
    child.kill();
    expect(JSON.parse(first)).toEqual({ status: "SERVING" });
  });
});

describe.skipIf(!hasGo())(`a Go client that keeps its reflection stream open${hasGo() ? "" : " (skipped: `go` not found on PATH)"}`, () => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "runhook-reflect-"));
    // Same module and module cache as the Go interop client; nothing generated is needed.
    await run("go", ["build", "-o", join(dir, "reflect"), "./reflect"], { cwd: join(ROOT, "test/interop/go"), timeout: 300_000 });
  });
  afterAll(() => dir && rmSync(dir, { recursive: true, force: true }));

  it("lists, describes, calls TriggerRun and WatchRun, asks again on the same stream, and checks health", { timeout: 120_000 }, async () => {
    const env = {
      ...process.env,
      RUNHOOK_GRPC_ADDR: server.grpcAddr,
      RUNHOOK_WEBHOOK_URL: demo.webhookUrl,
      RUNHOOK_USER_TOKEN: demo.userToken,
      RUNHOOK_RECORD_ID: demo.recordIds[1]!,
    };
    const { stdout } = await run(join(dir, "reflect"), [], { env, timeout: 100_000 }).catch((e: { stderr?: string; message: string }) => {
      throw new Error(`Go reflection client failed: ${e.stderr || e.message}`);
    });
    const r = JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, unknown> & { states: string[] };
    expect(r).toMatchObject({
      client: "go-reflect",
      services: expect.arrayContaining(["runhook.v1.TriggerService", "runhook.v1.RunService", "grpc.health.v1.Health"]),
      alphaServices: expect.arrayContaining(["runhook.v1.TriggerService", "grpc.reflection.v1alpha.ServerReflection"]),
      methods: [
        {
          name: "runhook.v1.TriggerService.TriggerRun",
          input: "runhook.v1.TriggerRunRequest",
          output: "runhook.v1.TriggerRunResponse",
          serverStream: false,
          clientStream: false,
          inputFields: ["string webhook_url = 1", "string record_id = 2", "string idempotency_key = 3"],
        },
        {
          name: "runhook.v1.RunService.WatchRun",
          input: "runhook.v1.WatchRunRequest",
          output: "runhook.v1.WatchRunResponse",
          serverStream: true,
          clientStream: false,
          inputFields: ["string run_id = 1"],
        },
      ],
      runId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      reflectionStillOpen: true,
      health: "SERVING",
      healthWatch: "SERVING",
    });
    expect(r.states.at(-1)).toBe("SUCCEEDED");
    expect(r.states.slice(0, -1).every((s) => !FINISHED.includes(s))).toBe(true);
  });
});
