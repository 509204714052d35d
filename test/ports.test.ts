// Every port runhook listens on, taken or forbidden, as users meet it (`runhook start` and
// `runhook worker` as child processes): the command names the variable and what to do, before
// anything else starts, and the same when the port is taken between that check and the real
// listen; a busy metrics port is only a warning; port 0 takes a free port and prints it.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import http2 from "node:http2";
import { createServer, connect, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { tryListen } from "../src/lib/ports.js";
import { pingServer } from "../src/store/index.js";
import { spawnCli } from "./helpers/cli.js";
import { freePort } from "./helpers/load.js";
import { ROOT, spawnServer, testDbName, testEnv, uriFor, type ChildServer } from "./helpers/server.js";

const children = new Set<ChildProcess>();
const held: Server[] = [];
const servers: ChildServer[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const s of held) s.close();
  await Promise.all(servers.map((s) => s.stop()));
});

/** A port held by a plain server on every address (so any bind to it fails), until the file ends. */
async function hold(port = 0): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve, reject) => {
    s.once("error", reject);
    s.listen(port, () => resolve());
  });
  held.push(s);
  return (s.address() as { port: number }).port;
}

/** `runhook <args>` with the tests' environment and `env`; killed after 60 s. */
function runhook(args: string[], env: Record<string, string>, user?: { uid: number; gid: number }) {
  return spawnCli(args, { env: { ...process.env, ...testEnv(testDbName()), ...env }, cwd: ROOT, timeoutMs: 60_000, children, user });
}

/**
 * A relay to the tests' database that counts the connections made through it and holds each
 * until open(): a server given it as MONGODB_URI waits there, after its port check and before
 * it listens, for as long as the test wants.
 */
function databaseGate() {
  const target = new URL(uriFor("x"));
  let connections = 0;
  let opened = false;
  const waiting: Array<() => void> = [];
  let reached!: () => void;
  const firstConnection = new Promise<void>((r) => (reached = r));
  const relay = createServer((client: Socket) => {
    connections++;
    reached();
    client.pause();
    const pass = () => {
      const upstream = connect(Number(target.port), target.hostname, () => {
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      upstream.on("error", end);
      client.on("error", end);
      client.on("close", end);
      upstream.on("close", end);
    };
    if (opened) pass();
    else waiting.push(pass);
  });
  held.push(relay);
  return {
    async uri(dbName: string): Promise<string> {
      await new Promise<void>((r) => relay.listen(0, "127.0.0.1", () => r()));
      return `mongodb://127.0.0.1:${(relay.address() as { port: number }).port}/${dbName}`;
    },
    connections: () => connections,
    firstConnection,
    open() {
      opened = true;
      for (const pass of waiting.splice(0)) pass();
    },
  };
}

/** The first log line of `server` that `pick` accepts, waited for up to 10 s. */
async function logLine(server: ChildServer, pick: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 10_000;
  let line = server.logs.lines().find(pick);
  while (!line && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    line = server.logs.lines().find(pick);
  }
  expect(line, server.logs.raw()).toBeDefined();
  return line!;
}

/** The port a message suggests for `variable`, checked free now and after `busy`. */
async function suggested(stderr: string, variable: string, busy: number): Promise<number> {
  const port = Number(new RegExp(`start with ${variable}=(\\d+)`).exec(stderr)?.[1]);
  expect(port).toBeGreaterThan(busy);
  expect(await tryListen("127.0.0.1", port)).toBeUndefined();
  return port;
}

describe("a busy PORT or GRPC_PORT", () => {
  it("stops `runhook start` before it reaches its database, with one line per port naming its variable", async () => {
    const [port, grpcPort] = [await hold(), await hold()];
    const gate = databaseGate();
    const r = await runhook(["start"], { PORT: String(port), GRPC_PORT: String(grpcPort), MONGODB_URI: await gate.uri(testDbName()) }).exited;
    expect(r.code, r.stderr).toBe(1);
    const http = await suggested(r.stderr, "PORT", port);
    const grpc = await suggested(r.stderr, "GRPC_PORT", grpcPort);
    expect(r.stderr).toBe(
      `runhook: port ${port} (PORT) is in use: stop what holds it, or start with PORT=${http}\n` +
        `runhook: port ${grpcPort} (GRPC_PORT) is in use: stop what holds it, or start with GRPC_PORT=${grpc}\n`,
    );
    expect(http).not.toBe(grpc);
    expect(gate.connections()).toBe(0);
  });

  for (const variable of ["PORT", "GRPC_PORT"]) {
    it(`${variable} taken after the check, before the real listen: the same message, and the server stops`, async () => {
      const port = await freePort();
      const gate = databaseGate();
      const env = { PORT: "0", GRPC_PORT: "0", [variable]: String(port), MONGODB_URI: await gate.uri(testDbName()) };
      const cli = runhook(["start"], env);
      await gate.firstConnection; // checked, and now opening its database
      await hold(port);
      gate.open();
      const r = await cli.exited;
      expect(r.code, r.stderr).toBe(1);
      const other = await suggested(r.stderr, variable, port);
      expect(r.stderr).toBe(`runhook: port ${port} (${variable}) is in use: stop what holds it, or start with ${variable}=${other}\n`);
    });
  }

  it("one port given to two variables is named as such", async () => {
    const port = String(await freePort());
    const gate = databaseGate();
    const r = await runhook(["start"], { PORT: port, GRPC_PORT: port, MONGODB_URI: await gate.uri(testDbName()) }).exited;
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`runhook: PORT and GRPC_PORT are both ${port}: give each its own port\n`);
    expect(gate.connections()).toBe(0);
  });

  it("stops the primary of RUNHOOK_PROCESSES=2 too, rather than processes that die and start again", async () => {
    const port = await hold();
    const r = await runhook(["start"], { PORT: String(port), RUNHOOK_PROCESSES: "2" }).exited;
    expect(r.code, r.stderr).toBe(1);
    const other = await suggested(r.stderr, "PORT", port);
    expect(r.stderr).toBe(`runhook: port ${port} (PORT) is in use: stop what holds it, or start with PORT=${other}\n`);
  });

  const unprivilegedFrom = (() => {
    try {
      return Number(readFileSync("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8"));
    } catch {
      return 1024;
    }
  })();
  // Root may bind any port: the command runs as nobody then.
  it.skipIf(unprivilegedFrom <= 80)("a privileged port (PORT=80) as an unprivileged user says so", async () => {
    const user = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : undefined;
    const r = await runhook(["start"], { PORT: "80" }, user).exited;
    expect(r.code, r.stderr).toBe(1);
    const other = Number(/start with PORT=(\d+)/.exec(r.stderr)?.[1]);
    expect(other).toBeGreaterThanOrEqual(8080);
    expect(r.stderr).toBe(
      `runhook: port 80 (PORT) needs privileges this process lacks (ports below 1024 need root or CAP_NET_BIND_SERVICE): start with PORT=${other}\n`,
    );
  });
});

describe("a busy METRICS_PORT is a warning", () => {
  const warning = (port: number, other: number) =>
    `port ${port} (METRICS_PORT) is in use: stop what holds it, or start with METRICS_PORT=${other}; runhook runs without GET /metrics`;
  const warned = async (server: ChildServer, port: number) => {
    const line = await logLine(server, (l) => l.level === 40 && String(l.msg).includes("METRICS_PORT"));
    const other = await suggested(String(line!.msg), "METRICS_PORT", port);
    expect(line!.msg).toBe(warning(port, other));
  };

  it("`runhook start` runs and answers without its metrics", async () => {
    const port = await hold();
    const server = await spawnServer(testDbName(), { env: { METRICS_PORT: String(port) } });
    servers.push(server);
    await warned(server, port);
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    expect(server.logs.lines().some((l) => l.msg === "metrics at /metrics")).toBe(false);
  });

  it("`runhook worker` runs its executors without its metrics", async () => {
    const port = await hold();
    const worker = await spawnServer(testDbName(), { mode: "worker", env: { METRICS_PORT: String(port) } });
    servers.push(worker);
    await warned(worker, port);
    expect(worker.child.exitCode).toBeNull();
  });
});

describe("the embedded database's port (RUNHOOK_EMBEDDED_PORT)", () => {
  const embedded = () => ({
    MONGODB_URI: "",
    RUNHOOK_EMBEDDED: "memory",
    RUNHOOK_EMBEDDED_HEAP_MB: "128",
    RUNHOOK_DATA_DIR: mkdtempSync(join(inject("serversDir"), "ports-")),
  });

  it("busy, it stops `runhook start` at once with its variable", async () => {
    const port = await hold();
    const started = Date.now();
    const r = await runhook(["start"], { ...embedded(), METRICS_PORT: "off", RUNHOOK_EMBEDDED_PORT: String(port) }).exited;
    expect(r.code, r.stderr).toBe(1);
    const other = await suggested(r.stderr, "RUNHOOK_EMBEDDED_PORT", port);
    expect(r.stderr).toBe(`runhook: port ${port} (RUNHOOK_EMBEDDED_PORT) is in use: stop what holds it, or start with RUNHOOK_EMBEDDED_PORT=${other}\n`);
    // Not after the launcher's 30 s start timeout: the database's own bind error ends it.
    expect(Date.now() - started).toBeLessThan(25_000);
  });

  it("port 0 everywhere: each server takes a free port, prints it and answers there", async () => {
    const server = await spawnServer("runhook", { env: { ...embedded(), METRICS_PORT: "0", RUNHOOK_EMBEDDED_PORT: "0" } });
    servers.push(server);
    const listening = (await logLine(server, (l) => l.msg === "runhook listening")) as { http: number; grpc: number };
    const metrics = (await logLine(server, (l) => l.msg === "metrics at /metrics")) as { metrics: number };
    const dbLine = await logLine(server, (l) => String(l.msg).startsWith("embedded database listening on "));
    const db = /^embedded database listening on 127\.0\.0\.1:(\d+)$/.exec(String(dbLine.msg));
    for (const p of [listening.http, listening.grpc, metrics.metrics, Number(db?.[1])]) expect(p).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${listening.http}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${metrics.metrics}/metrics`)).status).toBe(200);
    expect(await pingServer(`mongodb://127.0.0.1:${db![1]}/`, 5000)).toBe(true);
    const session = http2.connect(`http://127.0.0.1:${listening.grpc}`);
    await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
    session.close();
  });
});
