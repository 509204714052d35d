// `runhook start` as RUNHOOK_PROCESSES processes: they share the ports, one runs executors,
// the primary sums their metrics, starts again one that dies, and stops them all.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../src/lib/sleep.js";
import { createWorld, type World } from "../fixtures/world.js";
import { freePort } from "./helpers/load.js";
import { openTestApp, spawnServer, testDbName, type ChildServer, type TestApp } from "./helpers/server.js";
import { adminClient, postHook } from "./helpers/webhook.js";

let app: TestApp;
let server: ChildServer;
let w: World;
let hook: string;
let metricsPort: number;

/** The pids of the primary's child processes (the runhook processes). */
function processesOf(primary: number): number[] {
  const out = execFileSync("ps", ["-o", "pid=", "--ppid", String(primary)], { encoding: "utf8" });
  return out
    .split("\n")
    .map((l) => Number(l.trim()))
    .filter((pid) => pid > 0);
}

/** POST a JSON body on a connection of its own; the answer's status. */
function postOnNewConnection(url: string, token: string, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: "POST", agent: false, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  for (const end = Date.now() + timeoutMs; !(await check()); await sleep(100)) if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
}

beforeAll(async () => {
  const dbName = testDbName();
  app = await openTestApp(dbName);
  w = await createWorld(app, { rateLimitPerMinute: 10_000 });
  metricsPort = await freePort();
  server = await spawnServer(dbName, { env: { RUNHOOK_PROCESSES: "2", METRICS_PORT: String(metricsPort), LOG_LEVEL: "info" } });
  const wf = await adminClient(server.baseUrl, w.ownerToken).getWorkflow({ workflowId: w.workflowId });
  hook = server.baseUrl + new URL(wf.workflow!.webhook!.url).pathname;
  // Both processes listen (until then the primary hands every connection to the one that does).
  const listening = () =>
    new Set(
      server.logs
        .lines()
        .filter((l) => l.msg === "runhook listening")
        .map((l) => l.process),
    ).size;
  await until("both processes listen", () => processesOf(server.child.pid!).length === 2 && listening() === 2, 60_000).catch((err: Error) => {
    throw new Error(`${err.message}: ${JSON.stringify(processesOf(server.child.pid!))}\n${server.logs.raw().slice(-3000)}`);
  });
}, 120_000);

afterAll(async () => {
  await server?.kill();
  app?.stop();
  await app?.deps.store.close();
});

describe("RUNHOOK_PROCESSES=2", () => {
  it("serves on one port from two processes; one runs executors; /metrics sums both", async () => {
    const answers = await Promise.all(Array.from({ length: 40 }, () => postHook(hook, w.userToken, { record_id: randomUUID() })));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    const served = new Set(
      server.logs
        .lines()
        .filter((l) => l.msg === "request" && l.status === 202)
        .map((l) => l.process),
    );
    expect(served.size).toBe(2);
    expect(server.logs.lines().filter((l) => l.msg === "executors started")).toHaveLength(1);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(Number(/^runhook_runs_created_total (\d+)/m.exec(text)?.[1])).toBe(40);
  });

  it("starts again a process that dies, and keeps answering meanwhile", async () => {
    const [victim] = processesOf(server.child.pid!);
    process.kill(victim!, "SIGKILL");
    // Once the primary has seen the death, the other process answers every new connection (a
    // kept-alive connection to the dead process is reset, and one handed to it in the instant
    // before the primary noticed is lost, as node:cluster does); the dead one is replaced within seconds.
    await until("the primary sees the death", () => server.logs.lines().some((l) => String(l.msg).startsWith("a runhook process died")));
    expect(await postOnNewConnection(hook, w.userToken, { record_id: randomUUID() })).toBe(202);
    await until("the dead process is replaced", () => {
      const now = processesOf(server.child.pid!);
      return now.length === 2 && !now.includes(victim!);
    });
  });

  it("stops every process, and itself, on SIGTERM", async () => {
    const children = processesOf(server.child.pid!);
    await server.stop();
    expect(server.child.exitCode).toBe(0);
    for (const pid of children) expect(() => process.kill(pid, 0)).toThrow();
  });
});
