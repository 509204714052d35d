// Interop: generated Go, Python, Java and TypeScript gRPC clients against a live runhook server.
//
// 1. scripts/generate-clients.sh generates the Go and Python client code
//    (pinned protoc-gen-go / protoc-gen-go-grpc / grpcio-tools, cached under
//    ${RUNHOOK_CACHE_DIR:-~/.cache/runhook}); the first run builds/installs them.
//    It builds the Java client (test/interop/java) with Maven once per version of
//    proto/runhook and the client, and keeps the jar in the same cache.
// 2. The real server is started and seeded (test/helpers/server.ts).
// 3. test/interop/go (built with `go build`) and test/interop/python/client.py
//    (run with the venv interpreter the script made) each trigger a run, check
//    the ALREADY_EXISTS answer with `runhook-ongoing-run-id`, follow the run to
//    SUCCEEDED (the demo workflow waits 5 s), list its activity logs with the
//    project API token, create a note and find the run again with
//    RunService.ListRuns (its workflow on the record, SUCCEEDED, with the
//    application token). Each prints one JSON line.
//    The Java client (java -jar) triggers a run, checks the error code and the
//    x-request-id trailer of two errors, follows the run with WatchRun, pages
//    its activity log one entry at a time, and pages ListRuns one run at a
//    time (project API token) until it finds the run.
//    The TypeScript client (test/interop/typescript, Connect over native gRPC
//    with the protobuf-es code of gen/) triggers a run, follows it with
//    WatchRun and finds it with ListRuns; it needs only node.
//
// Each language is skipped, with the reason in the test name, when its
// toolchain (`go`, `python3`, `java` and `mvn`) is not on PATH.
//
// ASSUMED HELPER API (owner to provide in test/helpers/server.ts):
//   startServer(): Promise<{ grpcAddr: string; baseUrl: string; stop(): Promise<void> }>
//   seed(server): Promise<Seed>   -- the `runhook seed --json` object for
//                                    the database of `server` (the argument may be ignored)
// The test fails with a clear message if `seed` is not exported.

import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import * as helpers from "../helpers/server.js";
import type { SeedOutput } from "../../src/cli/demo.js";

const execFileAsync = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The `runhook seed --json` object. */
type Seed = SeedOutput;

interface LiveServer {
  grpcAddr: string;
  baseUrl: string;
  stop(): Promise<void>;
}

interface AssumedHelpers {
  startServer(): Promise<LiveServer>;
  seed?(server: LiveServer): Promise<Seed>;
}

/** One JSON line printed by both clients on success. */
interface InteropResult {
  client: string;
  ok: boolean;
  runId: string;
  ongoingRunId: string;
  ongoingRunIdIn: string;
  finalState: string;
  watchedWith: string;
  runSeconds: number;
  activityLogs: number;
  triggeredLogId: string;
  noteId: string;
  listedRunId: string;
}

function onPath(cmd: string): boolean {
  try {
    execFileSync(cmd, ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    try {
      execFileSync(cmd, ["version"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  }
}

const hasGo = onPath("go");
const hasPython = onPath("python3");
const hasJava = onPath("java") && onPath("mvn");
const langs = [...(hasGo ? ["go"] : []), ...(hasPython ? ["python"] : []), ...(hasJava ? ["java"] : [])];

let server: LiveServer | undefined;
let seed: Seed;
let workDir: string;
let goBinary: string;
let python: string;
let javaJar: string;

function clientEnv(recordId: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    RUNHOOK_GRPC_ADDR: server!.grpcAddr,
    RUNHOOK_WEBHOOK_URL: seed.webhookUrl,
    RUNHOOK_USER_TOKEN: seed.userToken,
    RUNHOOK_API_TOKEN: seed.apiToken,
    RUNHOOK_PROJECT: seed.projectName,
    RUNHOOK_ENVIRONMENT: seed.environmentName,
    RUNHOOK_COLLECTION: seed.collection,
    RUNHOOK_RECORD_ID: recordId,
  };
}

/** Runs one client; on failure the error carries its stderr (the FAIL line). */
async function runClient<R = InteropResult>(file: string, args: string[], recordId: string): Promise<R> {
  try {
    const { stdout } = await execFileAsync(file, args, { env: clientEnv(recordId), timeout: 90_000 });
    const lines = stdout.trim().split("\n");
    return JSON.parse(lines[lines.length - 1] ?? "") as R;
  } catch (e) {
    const err = e as { stderr?: string; stdout?: string; code?: number; message: string };
    throw new Error(`${path.basename(file)} failed (exit ${err.code}): ${err.stderr || err.message}\n${err.stdout ?? ""}`);
  }
}

/** The Java client's JSON line (test/interop/java). */
interface JavaResult {
  client: string;
  ok: boolean;
  runId: string;
  ongoingRunId: string;
  ongoingRunIdIn: string;
  sentRequestId: string;
  alreadyExistsRequestId: string;
  unauthenticatedRequestId: string;
  finalState: string;
  watchedWith: string;
  watchedStates: string[];
  runSeconds: number;
  activityLogs: number;
  activityLogPages: number;
  activityLogActions: string[];
  triggeredLogId: string;
  listedRunId: string;
  listedRunPages: number;
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function expectSuccess(r: InteropResult, client: string) {
  expect(r).toMatchObject({ client, ok: true, finalState: "SUCCEEDED", ongoingRunIdIn: "trailer" });
  expect(r.runId).toMatch(UUID_V4);
  expect(r.ongoingRunId).toBe(r.runId);
  expect(r.activityLogs).toBeGreaterThanOrEqual(1);
  expect(r.triggeredLogId).not.toBe("");
  expect(r.noteId).not.toBe("");
  // The run is found again by the run search.
  expect(r.listedRunId).toBe(r.runId);
  // The demo workflow waits 5 s.
  expect(r.runSeconds).toBeGreaterThanOrEqual(4.5);
}

describe.skipIf(langs.length === 0)("interop: generated gRPC clients (Go, Python, Java, TypeScript)", () => {
  beforeAll(async () => {
    // 1. Generate the clients (first run builds plugins and a venv: minutes at most).
    await execFileAsync("bash", [path.join(ROOT, "scripts/generate-clients.sh"), ...langs], {
      cwd: ROOT,
      timeout: 540_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    workDir = mkdtempSync(path.join(tmpdir(), "runhook-interop-"));
    if (hasGo) {
      goBinary = path.join(workDir, "interop-go");
      await execFileAsync("go", ["build", "-o", goBinary, "."], {
        cwd: path.join(ROOT, "test/interop/go"),
        timeout: 300_000,
      });
    }
    if (hasPython) {
      python = readFileSync(path.join(ROOT, "test/interop/python/gen/PYTHON"), "utf8").trim();
    }
    if (hasJava) {
      javaJar = readFileSync(path.join(ROOT, "test/interop/java/target/JAR"), "utf8").trim();
    }

    // 2. Live server and seed data (ASSUMED helper API, see the header).
    const h = helpers as unknown as AssumedHelpers;
    if (typeof h.seed !== "function") {
      throw new Error(
        "test/helpers/server.ts must export seed(server) returning the `runhook seed --json` object " +
          "(baseUrl, projectName, environmentName, collection, recordIds, webhookUrl, userToken, apiToken, adminToken)",
      );
    }
    server = await h.startServer();
    seed = await h.seed(server);
    expect(seed.recordIds.length).toBeGreaterThanOrEqual(3);
  });

  afterAll(async () => {
    await server?.stop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it.skipIf(!hasGo)(`Go client${hasGo ? "" : " (skipped: `go` not found on PATH)"}`, { timeout: 120_000 }, async () => {
    expectSuccess(await runClient(goBinary, [], seed.recordIds[0]!), "go");
  });

  it.skipIf(!hasPython)(
    `Python client${hasPython ? "" : " (skipped: `python3` not found on PATH)"}`,
    { timeout: 120_000 },
    async () => {
      expectSuccess(
        await runClient(python, [path.join(ROOT, "test/interop/python/client.py")], seed.recordIds[1]!),
        "python",
      );
    },
  );

  it.skipIf(!hasJava)(
    `Java client${hasJava ? "" : " (skipped: `java` or `mvn` not found on PATH)"}`,
    { timeout: 120_000 },
    async () => {
      const r = await runClient<JavaResult>("java", ["-jar", javaJar], seed.recordIds[2]!);
      expect(r).toMatchObject({ client: "java", ok: true, finalState: "SUCCEEDED", watchedWith: "WatchRun", ongoingRunIdIn: "trailer" });
      expect(r.runId).toMatch(UUID_V4);
      expect(r.ongoingRunId).toBe(r.runId);
      // Errors carry their code (checked by the client) and the request id: the caller's, or one the server made.
      expect(r.alreadyExistsRequestId).toBe(r.sentRequestId);
      expect(r.unauthenticatedRequestId).toMatch(UUID_V4);
      expect(r.watchedStates.at(-1)).toBe("SUCCEEDED");
      expect(r.runSeconds).toBeGreaterThanOrEqual(4.5);
      // One entry a page, in order, from the trigger to the success.
      expect(r.activityLogPages).toBeGreaterThanOrEqual(r.activityLogs);
      expect(r.activityLogActions[0]).toBe("workflow.run.triggered");
      expect(r.activityLogActions).toContain("workflow.run.succeeded");
      expect(r.triggeredLogId).not.toBe("");
      expect(r.listedRunId).toBe(r.runId);
      expect(r.listedRunPages).toBeGreaterThanOrEqual(1);
    },
  );

  it("TypeScript client (Connect, native gRPC)", { timeout: 120_000 }, async () => {
    // After the Go client's run on this record has finished (the tests of a file run one by one).
    const r = await runClient<{ client: string; ok: boolean; runId: string; finalState: string; listedRunId: string; runSeconds: number }>(
      process.execPath,
      ["--import", "tsx", path.join(ROOT, "test/interop/typescript/client.ts")],
      seed.recordIds[0]!,
    );
    expect(r).toMatchObject({ client: "typescript", ok: true, finalState: "SUCCEEDED" });
    expect(r.runId).toMatch(UUID_V4);
    expect(r.listedRunId).toBe(r.runId);
    expect(r.runSeconds).toBeGreaterThanOrEqual(4.5);
  });
});

if (langs.length === 0) {
  describe("interop: generated gRPC clients", () => {
    it.skip("skipped: none of `go`, `python3`, `java` with `mvn` is on PATH", () => {});
  });
}
