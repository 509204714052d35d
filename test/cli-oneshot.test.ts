// One-shot commands run beside a server, in its environment, as users run them (child processes):
// - `seed`, `admin`, `trigger`, `runs watch` and `logs tail` open no listener, so they work
//   whatever PORT, GRPC_PORT and METRICS_PORT say, even when those ports are taken;
// - beside `runhook start` on RUNHOOK_EMBEDDED=memory, `seed` and `worker` join the server's
//   in-memory database (its tokens work, its runs are executed by the worker); without such a
//   server they refuse with one line instead of starting a database of their own.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SeedOutput } from "../src/cli/demo.js";
import { spawnCli, type Cli } from "./helpers/cli.js";
import { spawnServer, startServer, testEnv, type ChildServer, type TestServer } from "./helpers/server.js";
import { postHook } from "./helpers/webhook.js";
import { createWorld } from "../fixtures/world.js";

const tmp = mkdtempSync(join(tmpdir(), "runhook-oneshot-"));
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});

/** The environment without runhook's settings (but where the embedded database's jar is cached). */
const CLEAN = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => k === "RUNHOOK_CACHE_DIR" || !(k.startsWith("RUNHOOK_") || ["MONGODB_URI", "PORT", "GRPC_PORT", "METRICS_PORT"].includes(k)),
  ),
);

/** `node bin/runhook.js …args` with `env` over a clean environment; killed after 60 s. */
const runhook = (args: string[], env: Record<string, string>): Cli => spawnCli(args, { env: { ...CLEAN, ...env }, cwd: tmp, timeoutMs: 60_000, children });

/** The webhook URL that `seed` printed for its PUBLIC_BASE_URL, on the server actually listening at `baseUrl`. */
const onServer = (webhookUrl: string, baseUrl: string) => {
  const u = new URL(webhookUrl);
  return `${baseUrl}${u.pathname}${u.search}`;
};

describe("one-shot commands with PORT, GRPC_PORT and METRICS_PORT taken", () => {
  let server: TestServer;
  const taken: Server[] = [];
  let ports: Record<string, string>;
  beforeAll(async () => {
    server = await startServer();
    for (let i = 0; i < 3; i++) {
      const s = createServer();
      await new Promise<void>((r) => s.listen(0, () => r())); // every address: any bind to it fails
      taken.push(s);
    }
    const [port, grpcPort, metricsPort] = taken.map((s) => String((s.address() as { port: number }).port));
    ports = { PORT: port!, GRPC_PORT: grpcPort!, METRICS_PORT: metricsPort! };
  });
  afterAll(async () => {
    for (const s of taken) s.close();
    await server?.stop();
  });

  it("seed, admin, trigger, runs watch and logs tail all work", { timeout: 120_000 }, async () => {
    const env = { ...testEnv(server.dbName), ...ports, LOG_LEVEL: "warn" };
    const seeded = await runhook(["seed", "--json"], env).exited;
    expect(seeded.stderr).not.toContain("EADDRINUSE");
    expect(seeded.code, seeded.stderr).toBe(0);
    const demo = JSON.parse(seeded.stdout) as SeedOutput;

    const cli = { ...env, RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: demo.userToken };
    const triggered = await runhook(["trigger", onServer(demo.webhookUrl, server.baseUrl), demo.recordIds[0]!], cli).exited;
    expect(triggered.code, triggered.stderr).toBe(0);
    const runId = triggered.stdout.trim();
    const watched = await runhook(["runs", "watch", runId], cli).exited;
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toContain("SUCCEEDED");

    const tail = runhook(["logs", "tail", "--project", demo.projectName, "--environment", demo.environmentName], { ...cli, RUNHOOK_TOKEN: demo.apiToken });
    const deadline = Date.now() + 30_000;
    while (!tail.out().includes(runId) && Date.now() < deadline && tail.child.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    tail.child.kill("SIGINT");
    const tailed = await tail.exited;
    expect(tailed.stdout, tailed.stderr).toContain(runId);

    const w = await createWorld(server);
    const admin = await runhook(["admin", "workflows", "get", "--workflow", w.workflowId], { ...cli, RUNHOOK_TOKEN: w.adminToken }).exited;
    expect(admin.code, admin.stderr).toBe(0);
    expect(JSON.parse(admin.stdout)).toMatchObject({ workflow: { id: w.workflowId } });
  });
});

describe("RUNHOOK_EMBEDDED=memory: seed and worker join the server's database, or refuse", () => {
  let server: ChildServer;
  let env: Record<string, string>;
  beforeAll(async () => {
    const dataDir = mkdtempSync(join(tmp, "data-"));
    // The server runs no executors: only the worker can finish a run.
    env = { ...testEnv("runhook"), MONGODB_URI: "", RUNHOOK_EMBEDDED: "memory", RUNHOOK_DATA_DIR: dataDir, METRICS_PORT: "off", LOG_LEVEL: "info" };
    server = await spawnServer("runhook", { env: { ...env, RUNHOOK_EXECUTOR: "false" } });
  });
  afterAll(async () => server?.stop());

  it("seed prints tokens the server knows; a worker executes the server's runs", { timeout: 120_000 }, async () => {
    const seeded = await runhook(["seed", "--json"], env).exited;
    expect(seeded.code, seeded.stderr).toBe(0);
    const demo = JSON.parse(seeded.stdout) as SeedOutput;
    const hook = await postHook(onServer(demo.webhookUrl, server.baseUrl), demo.userToken, { record_id: demo.recordIds[0] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(202);
    const runId = (hook.body as { runId: string }).runId;

    const worker = await spawnServer("runhook", { mode: "worker", env });
    try {
      const watched = await runhook(["runs", "watch", runId], { ...env, RUNHOOK_URL: server.baseUrl, RUNHOOK_TOKEN: demo.userToken }).exited;
      expect(watched.code, watched.stderr).toBe(0);
      expect(watched.stdout).toContain("SUCCEEDED");
    } finally {
      await worker.stop();
    }
  });

  it("without a server on that data dir, seed and worker refuse with one line", { timeout: 60_000 }, async () => {
    const alone = { ...env, RUNHOOK_DATA_DIR: mkdtempSync(join(tmp, "alone-")) };
    for (const args of [["seed"], ["worker"]]) {
      const r = await runhook(args, alone).exited;
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr.trim().split("\n"), args[0]).toEqual([
        `runhook: RUNHOOK_EMBEDDED=memory keeps the database inside the runhook server that started it, and none is running for the data dir ${alone.RUNHOOK_DATA_DIR}: start \`runhook start\` there first, or use RUNHOOK_EMBEDDED=file or MONGODB_URI`,
      ]);
    }
  });
});
