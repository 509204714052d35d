// The embedded database's process: spawned from the jar on a loopback port, joined when another
// local runhook process already runs it for the same data dir (its state file names its pid and
// port), and stopped (SIGTERM, then SIGKILL) with its owner.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { totalmem } from "node:os";
import { pingServer as ping } from "../store/index.js";
import type { Progress } from "./build.js";
import { pidAlive } from "./lock.js";

/** The address the embedded server listens on (its launcher binds it): loopback only. */
export const EMBEDDED_HOST = "127.0.0.1";

/** What a BindException of the launcher says, as the errno a listen in Node would have. */
const BIND_ERRORS: Record<string, string> = { "Address already in use": "EADDRINUSE", "Permission denied": "EACCES" };

export interface EmbeddedServer {
  uri: string;
  port: number;
  stop(): Promise<void>;
}

/** How long the server may start without a word: a rebuild of its indexes says how it goes every few seconds. */
export const START_TIMEOUT_MS = 30_000;
const STOP_KILL_MS = 5_000;

// Small thread stacks (the collector is chosen by backend, heapFlags). Native memory the JVM
// freed goes back to the system every 10 s (RSS otherwise keeps what the JIT's arenas once
// used); an older Java 17 without that option ignores it.
const JVM_FLAGS = [
  "-Xss512k",
  "-XX:MaxMetaspaceSize=128m",
  "-XX:ReservedCodeCacheSize=64m",
  "-XX:-UsePerfData",
  "-XX:+IgnoreUnrecognizedVMOptions",
  "-XX:TrimNativeHeapInterval=10000",
];

/**
 * The file backend's heap: its 32 MB page cache, the index pages a query walks, the pages a
 * commit writes (every page the writes of one group changed, and the buffer they are
 * serialized into), and the store's bookkeeping of its chunks, which grows with the file; some
 * 80-100 MB live at a million stored runs. It starts at 64 MB and grows with the work up to
 * 512 MB: 192 MB ran out in a commit at 100,000 stored runs (bench --grow), which fails the
 * store until a restart. G1 grows a heap that is under half its maximum more eagerly (its
 * pause-time threshold scales with that share): in `bench --grow --quick`, with 1 GB the Java
 * process's RSS averaged 234-288 MB and peaked at 336-375 MB; with 512 MB, 204-223 and 262-300,
 * for ~7 % fewer accepts.
 */
export const FILE_HEAP_MB = 512;

/**
 * The memory backend keeps every document and index entry on its heap: a quarter of the
 * machine's memory (at least 1 GB, at most 16 GB) unless RUNHOOK_EMBEDDED_HEAP_MB says. It
 * starts at 1 GB and grows (each growth is one full collection); it refuses writes, with a clear
 * error and a line on its standard error, once it is 85 % full after a collection, rather than
 * pause for seconds and drop connections.
 */
export function memoryHeapMb(): number {
  return Math.min(16_384, Math.max(1024, Math.floor(totalmem() / 2 ** 20 / 4)));
}

function heapFlags(persistent: boolean, heapMb: number | undefined): string[] {
  const max = heapMb ?? (persistent ? FILE_HEAP_MB : memoryHeapMb());
  if (persistent) {
    // The file backend: G1, which frees the pages its page cache lets go (old objects, dead once
    // evicted) while it runs. With the serial collector the heap sat at 64 MB and a full collection of
    // 40-110 ms came every second or two under load (231 in a 20,000-run sweep): the longest write
    // waited 265-400 ms; with G1, 54-69 ms. Its marking starts at a quarter of the heap (not its
    // adaptive ~45 %). Its young generation is 32 MB, never less: left to meet its 10 ms pause goal,
    // G1 shrank it to 7 MB in its mixed collections (most of them, as it marks almost all the time)
    // and collected every 45 ms, copying the pages that wait for a checkpoint again and again
    // (bench:snapshot measure: the collector's CPU per call halved at both sizes; bench/results/2026-11-29-embedded-tuning-notes.md). A
    // periodic collection every 10 s while idle gives back what it no longer needs. Its global mark
    // stack is 512K entries (4 MB) instead of 4M (32 MB, committed at start and 16-44 MB of it
    // resident once marking had used it); G1 doubles it if a marking overflows it. The heap grows
    // only when collections take over half the time (GCTimeRatio=1; it was 4, a fifth): after a
    // load, while the space reuse moves the live pages of the chunks it left, collections took
    // 25-34 % and G1 grew the heap from ~150 to 357-373 MB (of garbage: a full collection left
    // ~90 MB), which it held for a minute; with the young generation fixed, a larger heap does not
    // make those collections rarer. bench:snapshot measure at a million, the heap at most
    // 221-227 MB instead of 357-373, the Java RSS through the measure p90 323 MB instead of 455;
    // bench --grow, two runs with the 48 MB page cache of then: 275.3 and 301 MB at a million, accepts there 0.922x and 0.993x empty
    // (272-326 MB and 0.828-0.92x before).
    return [
      "-XX:+UseG1GC",
      "-XX:MarkStackSize=524288",
      "-XX:MaxGCPauseMillis=10",
      "-XX:NewSize=32m",
      "-XX:MaxNewSize=32m",
      "-XX:GCTimeRatio=1",
      "-XX:-G1UseAdaptiveIHOP",
      "-XX:InitiatingHeapOccupancyPercent=25",
      "-XX:G1PeriodicGCInterval=10000",
      "-Xms64m",
      `-Xmx${max}m`,
      "-XX:MinHeapFreeRatio=10",
      "-XX:MaxHeapFreeRatio=30",
    ];
  }
  // In memory every document survives its first collection, so the serial collector (no GC
  // threads) with a young generation of 16 MB keeps each collection short (in `bench --quick
  // --only=webhook`, 1 pause over 40 ms; with 48 MB: 52).
  return ["-Xmn16m", "-XX:+UseSerialGC", `-Xms${Math.min(max, 1024)}m`, `-Xmx${max}m`];
}

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
  const uri = `mongodb://${EMBEDDED_HOST}:${state.port}/`;
  if (!(await ping(uri, 1000))) return undefined;
  progress(`using the embedded database already running on port ${state.port}`);
  return { uri, port: state.port, stop: async () => {} };
}

/** Spawns the jar and waits for its "listening PORT" line, passing on the lines before it (a rebuild's progress). */
export async function spawnServer(
  jar: string,
  port: number,
  file: string | undefined,
  progress: Progress,
  javaOptions: string[] = [],
  noTableScan = false,
  heapMb?: number,
): Promise<{ child: ChildProcess; port: number; exited: Promise<void> }> {
  const args = [
    ...JVM_FLAGS,
    ...heapFlags(file !== undefined, heapMb),
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
  const child = spawn("java", args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, MALLOC_ARENA_MAX: "2" } });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  child.stdin!.on("error", () => {}); // EPIPE once it has exited
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const bound = await new Promise<number>((resolve, reject) => {
    let out = "";
    const fail = (why: string, code?: string) => {
      cleanup();
      child.kill("SIGKILL");
      const err: NodeJS.ErrnoException = new Error(
        `the embedded database (mongo-java-server) did not start: ${why}${stderr.trim() ? `: ${stderr.trim().slice(-2000)}` : ""}`,
      );
      if (code) err.code = code;
      reject(err);
    };
    // A port it cannot bind ends the launcher's main thread, but its network threads keep the JVM alive: fail now.
    const onStderr = () => {
      const bind = /java\.net\.BindException: ([^\n]*)\n/.exec(stderr);
      if (bind) fail(`it cannot listen on port ${port}`, BIND_ERRORS[bind[1]!.trim()]);
    };
    const onData = (d: Buffer) => {
      out += d.toString();
      const lines = out.split("\n");
      out = lines.pop()!;
      for (const line of lines) {
        const m = /^listening (\d+)$/.exec(line);
        if (m) {
          cleanup();
          resolve(Number(m[1]));
          return;
        }
        if (line.trim()) progress(`embedded database: ${line.trim()}`);
        timer.refresh();
      }
    };
    const onExit = (code: number | null, signal: string | null) => setImmediate(() => fail(`it exited (${signal ?? `code ${code}`})`));
    const onError = (e: Error) => fail(e.message);
    const timer = setTimeout(() => fail(`no line within ${START_TIMEOUT_MS / 1000} s and no "listening" line`), START_TIMEOUT_MS);
    const cleanup = () => {
      clearTimeout(timer);
      child.stderr!.off("data", onStderr);
      child.stdout!.off("data", onData);
      child.off("exit", onExit);
      child.off("error", onError);
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onStderr);
    child.once("exit", onExit);
    child.once("error", onError);
  });
  progress(`embedded database listening on ${EMBEDDED_HOST}:${bound}`);
  child.stdout!.resume(); // keep draining
  // What the server says once it runs (its memory full, say) goes to our standard error.
  child.stderr!.on("data", (d: Buffer) => process.stderr.write(d));
  return { child, port: bound, exited };
}

export function ownServer(child: ChildProcess, port: number, exited: Promise<void>, onStopped: () => void): EmbeddedServer {
  // Do not keep this process alive for the server's sake: if it exits without stop(), the
  // pipe closes and the server shuts down cleanly on its own.
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void }).unref?.();
  let stopping: Promise<void> | undefined;
  return {
    uri: `mongodb://${EMBEDDED_HOST}:${port}/`,
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
