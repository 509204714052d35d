// The embedded database's process: spawned from the jar on a loopback port, joined when another
// local runhook process already runs it for the same data dir (its state file names its pid and
// port), and stopped (SIGTERM, then SIGKILL) with its owner.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { pingServer as ping } from "../store/index.js";
import type { Progress } from "./build.js";
import { pidAlive } from "./lock.js";

export interface EmbeddedServer {
  uri: string;
  port: number;
  stop(): Promise<void>;
}

export const START_TIMEOUT_MS = 30_000;
const STOP_KILL_MS = 5_000;

// A test-and-dev database: a 1 GB heap (the memory backend keeps every document on it; H2 only
// its 32 MB page cache), small thread stacks, the serial GC (no GC threads). The heap is sized
// once, with a small young generation. Grown from 16 MB, each growth of the old generation was
// a full collection of all the documents: pauses of up to 1.3 s under load. A young generation
// of 16 MB keeps each collection short, as nearly every new document survives it: in
// `bench --quick --only=webhook`, no full collection and 1 pause over 40 ms (with 48 MB: 52;
// before, 24 and up to 433 ms besides the full ones). Memory not yet used is only reserved:
// ~56 MB RSS idle, as before.
const JVM_FLAGS = [
  "-Xss512k",
  "-Xms1g",
  "-Xmx1g",
  "-Xmn16m",
  "-XX:+UseSerialGC",
  "-XX:MaxMetaspaceSize=128m",
  "-XX:ReservedCodeCacheSize=64m",
  "-XX:-UsePerfData",
];

export interface RunningState {
  pid: number;
  port: number;
}

export function readState(file: string): RunningState | undefined {
  try {
    const s = JSON.parse(readFileSync(file, "utf8")) as Partial<RunningState>;
    return typeof s.pid === "number" && typeof s.port === "number" ? { pid: s.pid, port: s.port } : undefined;
  } catch {
    return undefined;
  }
}

/** The server another local runhook process runs for this data dir, if it answers. */
export async function joinRunning(stateFile: string, progress: Progress): Promise<EmbeddedServer | undefined> {
  const state = readState(stateFile);
  if (!state || !pidAlive(state.pid)) return undefined;
  const uri = `mongodb://127.0.0.1:${state.port}/`;
  if (!(await ping(uri, 1000))) return undefined;
  progress(`using the embedded database already running on port ${state.port}`);
  return { uri, port: state.port, stop: async () => {} };
}

/** Spawns the jar and waits for its "listening PORT" line. */
export async function spawnServer(
  jar: string,
  port: number,
  file: string | undefined,
  javaOptions: string[] = [],
  noTableScan = false,
): Promise<{ child: ChildProcess; port: number; exited: Promise<void> }> {
  const args = [
    ...JVM_FLAGS,
    ...javaOptions,
    "-jar",
    jar,
    "--port",
    String(port),
    ...(file ? ["--file", file] : []),
    ...(noTableScan ? ["--notablescan"] : []),
  ];
  // stdin is a pipe we never write to: the server exits when it reads EOF, i.e. when this
  // process is gone, even after kill -9 of it.
  const child = spawn("java", args, { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  child.stdin!.on("error", () => {}); // EPIPE once it has exited
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const bound = await new Promise<number>((resolve, reject) => {
    let out = "";
    const fail = (why: string) => {
      cleanup();
      child.kill("SIGKILL");
      reject(new Error(`the embedded database (mongo-java-server) did not start: ${why}${stderr.trim() ? `: ${stderr.trim().slice(-2000)}` : ""}`));
    };
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /^listening (\d+)$/m.exec(out);
      if (m) {
        cleanup();
        resolve(Number(m[1]));
      }
    };
    const onExit = (code: number | null, signal: string | null) => setImmediate(() => fail(`it exited (${signal ?? `code ${code}`})`));
    const onError = (e: Error) => fail(e.message);
    const timer = setTimeout(() => fail(`no "listening" line within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      child.off("exit", onExit);
      child.off("error", onError);
    };
    child.stdout!.on("data", onData);
    child.once("exit", onExit);
    child.once("error", onError);
  });
  child.stdout!.resume(); // keep draining
  return { child, port: bound, exited };
}

export function ownServer(child: ChildProcess, port: number, exited: Promise<void>, onStopped: () => void): EmbeddedServer {
  // Do not keep this process alive for the server's sake: if it exits without stop(), the
  // pipe closes and the server shuts down cleanly on its own.
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void }).unref?.();
  let stopping: Promise<void> | undefined;
  return {
    uri: `mongodb://127.0.0.1:${port}/`,
    port,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.ref();
          child.stdin!.end(); // EOF: the server closes its store (committing it) and exits
          const timer = setTimeout(() => child.kill("SIGKILL"), STOP_KILL_MS);
          await exited;
          clearTimeout(timer);
        }
        onStopped();
      })();
      return stopping;
    },
  };
}
