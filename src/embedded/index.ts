// The embedded MongoDB-wire server: mongo-java-server (de.bwaldvogel) with its memory or
// H2 (MVStore file) backend, packed by embedded/pom.xml into one jar that is built with
// Maven into a cache directory on first use and started on a loopback port.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { pingServer as ping } from "../store/connection.js";
import { sleep } from "../lib/sleep.js";

const exec = promisify(execFile);

export interface EmbeddedServer {
  uri: string;
  port: number;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** persistent: the data lives in `<dataDir>/mongo/`. */
  dataDir: string;
  /** where the jar is built and cached (`<cacheDir>/embedded-<hash>/`). */
  cacheDir: string;
  /** false: an in-memory server of our own, gone when it stops. */
  persistent: boolean;
  /** bind exactly this port (default: any free one). */
  port?: number;
  progress: (message: string) => void;
  /** extra JVM options, after runhook's own (the benchmarks use -Drunhook.h2=stock). */
  javaOptions?: string[];
  /**
   * In memory only. `publish`: join the in-memory server that another local runhook server
   * runs for this data dir, or start one that others can join (`runhook start`). `join`: only
   * join one, else fail with one line (`runhook worker` and `seed`: a database of their own
   * would be unseen by the server and gone with them). Unset: a private server (tests, benchmarks).
   */
  share?: "publish" | "join";
}

type Progress = (message: string) => void;

/** The project's Maven module that the jar is built from. */
export const EMBEDDED_SOURCE_DIR = join(import.meta.dirname, "..", "..", "embedded");
const JAR_NAME = "runhook-embedded-mongo.jar";
const JAVA_MIN = 17;
const BUILD_LOCK_STALE_MS = 20 * 60_000;
const START_TIMEOUT_MS = 30_000;
const STOP_KILL_MS = 5_000;

// A test-and-dev database: a heap that starts small and may grow to 1 GB (the memory backend keeps
// every document on it; H2 only its 32 MB page cache), small thread stacks, the serial GC (no GC
// threads). ~52 MB RSS idle: bench/results/2026-11-23-embedded-backends.md.
const JVM_FLAGS = ["-Xss512k", "-Xms16m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:MaxMetaspaceSize=128m", "-XX:ReservedCodeCacheSize=64m", "-XX:-UsePerfData"];

function noDatabaseError(detail: string, needMaven: boolean): Error {
  const what = needMaven ? "Java 17+ and Maven" : "Java 17+";
  return new Error(
    `No MongoDB to use: set MONGODB_URI to a MongoDB 6.0+ server, or install ${what} so runhook can ${needMaven ? "build and " : ""}run its embedded database (mongo-java-server) — ${detail}.`,
  );
}

/** The major version of `java` on PATH, or undefined without one. */
async function javaMajor(): Promise<number | undefined> {
  try {
    const { stdout, stderr } = await exec("java", ["-version"]);
    const m = /version "(\d+)(?:\.(\d+))?/.exec(stderr + stdout);
    if (!m) return undefined;
    const major = Number(m[1]);
    return major === 1 ? Number(m[2]) : major; // "1.8.0_392" is Java 8
  } catch {
    return undefined;
  }
}

async function requireJava(needMaven: boolean): Promise<void> {
  const major = await javaMajor();
  if (major === undefined) throw noDatabaseError("no java on PATH", needMaven);
  if (major < JAVA_MIN) throw noDatabaseError(`java on PATH is Java ${major}`, needMaven);
}

async function requireMaven(): Promise<void> {
  try {
    await exec("mvn", ["-v"]);
  } catch {
    throw noDatabaseError("no mvn on PATH", true);
  }
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listFiles(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** First 12 hex of a sha256 over embedded/pom.xml and embedded/src (names and contents). */
function sourceHash(): string {
  const files = [join(EMBEDDED_SOURCE_DIR, "pom.xml"), ...listFiles(join(EMBEDDED_SOURCE_DIR, "src"))];
  const h = createHash("sha256");
  for (const f of files.map((f) => relative(EMBEDDED_SOURCE_DIR, f).split("\\").join("/")).sort()) {
    h.update(`${f}\0`);
    h.update(readFileSync(join(EMBEDDED_SOURCE_DIR, f)));
    h.update("\0");
  }
  return h.digest("hex").slice(0, 12);
}

/** Returns the path of the cached server jar, building it with Maven first if needed. */
export async function ensureEmbeddedJar(cacheDir: string, progress: Progress): Promise<string> {
  const dir = join(cacheDir, `embedded-${sourceHash()}`);
  const jar = join(dir, JAR_NAME);
  if (existsSync(jar)) return jar;
  await requireJava(true);
  await requireMaven();
  mkdirSync(dir, { recursive: true });
  // A directory lock: one process builds (test workers, `runhook start` and `runhook worker`
  // may all start at once); the others wait for the jar.
  let waitingSince = 0;
  let lastTick = 0;
  const waiting = async () => {
    if (existsSync(jar)) return jar;
    if (!waitingSince) {
      waitingSince = lastTick = Date.now();
      progress("waiting for another process to finish building the embedded database (mongo-java-server)…");
    } else if (Date.now() - lastTick >= 10_000) {
      lastTick = Date.now();
      progress(`still waiting for the embedded database build (${Math.round((Date.now() - waitingSince) / 1000)} s)…`);
    }
    return undefined;
  };
  return withDirLock(join(dir, "build.lock"), BUILD_LOCK_STALE_MS, 1000, waiting, async () => {
    if (existsSync(jar)) return jar;
    progress("building the embedded database (mongo-java-server) with Maven — first start only…");
    const started = Date.now();
    const ticker = setInterval(() => progress(`still building the embedded database (${Math.round((Date.now() - started) / 1000)} s)…`), 10_000);
    const build = join(dir, "build");
    try {
      rmSync(build, { recursive: true, force: true });
      mkdirSync(build, { recursive: true });
      cpSync(join(EMBEDDED_SOURCE_DIR, "pom.xml"), join(build, "pom.xml"));
      cpSync(join(EMBEDDED_SOURCE_DIR, "src"), join(build, "src"), { recursive: true });
      await exec("mvn", ["-B", "-q", "-Dstyle.color=never", "-DskipTests", "package"], { cwd: build, maxBuffer: 64 << 20 });
      renameSync(join(build, "target", JAR_NAME), jar); // atomic: waiters see all of it or nothing
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      // biome-ignore lint/suspicious/noControlCharactersInRegex: Maven's colour codes start with ESC
      const out = `${e.stdout ?? ""}\n${e.stderr ?? ""}`.replace(/\x1b\[[0-9;]*m/g, "").trim() || e.message;
      throw new Error(`building the embedded database (mongo-java-server) failed: ${out.slice(-2000)}`);
    } finally {
      clearInterval(ticker);
      rmSync(build, { recursive: true, force: true });
    }
    progress(`embedded database built in ${Math.round((Date.now() - started) / 1000)} s (cached in ${dir})`);
    return jar;
  });
}

/** Whether process `pid` exists (EPERM: it does, owned by another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

interface RunningState {
  pid: number;
  port: number;
}

function readState(file: string): RunningState | undefined {
  try {
    const s = JSON.parse(readFileSync(file, "utf8")) as Partial<RunningState>;
    return typeof s.pid === "number" && typeof s.port === "number" ? { pid: s.pid, port: s.port } : undefined;
  } catch {
    return undefined;
  }
}

/** The server another local runhook process runs for this data dir, if it answers. */
async function joinRunning(stateFile: string, progress: Progress): Promise<EmbeddedServer | undefined> {
  const state = readState(stateFile);
  if (!state || !pidAlive(state.pid)) return undefined;
  const uri = `mongodb://127.0.0.1:${state.port}/`;
  if (!(await ping(uri, 1000))) return undefined;
  progress(`using the embedded database already running on port ${state.port}`);
  return { uri, port: state.port, stop: async () => {} };
}

/** Spawns the jar and waits for its "listening PORT" line. */
async function spawnServer(
  jar: string,
  port: number,
  file: string | undefined,
  javaOptions: string[] = [],
): Promise<{ child: ChildProcess; port: number; exited: Promise<void> }> {
  const args = [...JVM_FLAGS, ...javaOptions, "-jar", jar, "--port", String(port), ...(file ? ["--file", file] : [])];
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

function ownServer(child: ChildProcess, port: number, exited: Promise<void>, onStopped: () => void): EmbeddedServer {
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

/**
 * Runs `fn` holding the directory lock `lock` (mkdir; the holder's host and pid inside).
 * While another process holds it, `poll` runs every `pollMs` and its result, if any, is
 * returned instead. A lock is broken when its holder (on this host) is gone, or after `staleMs`.
 */
async function withDirLock<T>(lock: string, staleMs: number, pollMs: number, poll: () => Promise<T | undefined>, fn: () => Promise<T>): Promise<T> {
  const me = `${hostname()} ${process.pid}`;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "holder"), me);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const found = await poll();
    if (found !== undefined) return found;
    const mtime = statSync(lock, { throwIfNoEntry: false })?.mtimeMs;
    if (mtime === undefined) continue; // just released
    let holder = "";
    try {
      holder = readFileSync(join(lock, "holder"), "utf8");
    } catch {
      // being created, or removed
    }
    const [host, pid] = holder.split(" ");
    const dead = host === hostname() && pid !== undefined && !pidAlive(Number(pid));
    const age = Date.now() - mtime;
    if (dead || (!holder && age > 10_000) || age > staleMs) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    await sleep(pollMs);
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Why a `runhook worker` or `seed` on the memory backend cannot run alone. */
export function noMemoryServerError(dataDir: string): Error {
  return new Error(
    `RUNHOOK_EMBEDDED=memory keeps the database inside the runhook server that started it, and none is running for the data dir ${dataDir}: start \`runhook start\` there first, or use RUNHOOK_EMBEDDED=file or MONGODB_URI`,
  );
}

/**
 * Starts mongo-java-server: in memory (its own server), or persistent with its file under
 * `<dataDir>/mongo/`, joining the one another local runhook process (a `runhook worker`,
 * say) already runs for that data dir (then `port` is that server's, whatever `o.port` asked,
 * and stop() does nothing). A shared in-memory server (`o.share`) is found the same way.
 */
export async function startEmbeddedServer(o: EmbeddedOptions): Promise<EmbeddedServer> {
  if (!o.persistent && !o.share) {
    const jar = await ensureEmbeddedJar(o.cacheDir, o.progress);
    await requireJava(false);
    const s = await spawnServer(jar, o.port ?? 0, undefined, o.javaOptions);
    return ownServer(s.child, s.port, s.exited, () => {});
  }
  const dir = join(o.dataDir, "mongo");
  mkdirSync(dir, { recursive: true });
  const backend = o.persistent ? "running" : "memory";
  const stateFile = join(dir, `${backend}.json`);
  const joined = await joinRunning(stateFile, o.progress);
  if (joined) return joined;
  if (!o.persistent && o.share === "join") throw noMemoryServerError(o.dataDir);
  const jar = await ensureEmbeddedJar(o.cacheDir, o.progress);
  await requireJava(false);
  // One process starts the server for a data dir (H2 locks the file); the others join it.
  return withDirLock(
    join(dir, o.persistent ? "start.lock" : "memory.start.lock"),
    2 * START_TIMEOUT_MS,
    200,
    () => joinRunning(stateFile, o.progress),
    async () => {
      const again = await joinRunning(stateFile, o.progress);
      if (again) return again;
      const s = await spawnServer(jar, o.port ?? 0, o.persistent ? join(dir, "runhook.mv") : undefined, o.javaOptions);
      const state: RunningState = { pid: s.child.pid!, port: s.port };
      writeFileSync(`${stateFile}.${process.pid}.tmp`, JSON.stringify(state));
      renameSync(`${stateFile}.${process.pid}.tmp`, stateFile);
      return ownServer(s.child, s.port, s.exited, () => {
        const now = readState(stateFile);
        if (now && now.pid === state.pid && now.port === state.port) rmSync(stateFile, { force: true });
      });
    },
  );
}
