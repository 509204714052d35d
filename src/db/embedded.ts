// The embedded MongoDB-compatible server: FerretDB v1.24.2 on SQLite, built once
// from the Go module proxy into a cache directory and started on a free loopback port.
import { spawn, execFile } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { MongoClient } from "mongodb";

const exec = promisify(execFile);

export const FERRETDB_MODULE = "github.com/FerretDB/FerretDB";
export const FERRETDB_VERSION = "v1.24.2";

export interface EmbeddedDb {
  uri: string;
  stop(): Promise<void>;
}

type Progress = (message: string) => void;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function hasGo(): Promise<boolean> {
  try {
    await exec("go", ["version"]);
    return true;
  } catch {
    return false;
  }
}

/** Returns the path of the cached FerretDB binary, building it first if needed. */
export async function ensureFerretDbBinary(cacheDir: string, progress: Progress): Promise<string> {
  const dir = join(cacheDir, `ferretdb-${FERRETDB_VERSION}`);
  const bin = join(dir, "ferretdb");
  if (existsSync(bin)) return bin;
  if (!(await hasGo())) {
    throw new Error("No MongoDB to use: set MONGODB_URI to a MongoDB 6.0+ server, or install Go so runhook can build its embedded database (FerretDB).");
  }
  mkdirSync(dir, { recursive: true });
  // A directory lock: only one process builds; the others wait for the binary.
  const lock = join(dir, "build.lock");
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (existsSync(bin)) return bin;
      const age = Date.now() - statSync(lock, { throwIfNoEntry: false })!?.mtimeMs;
      if (age > 20 * 60_000) rmSync(lock, { recursive: true, force: true }); // a builder that died
      progress("waiting for another process to finish building FerretDB…");
      await sleep(3000);
    }
  }
  try {
    if (existsSync(bin)) return bin;
    progress(`building FerretDB ${FERRETDB_VERSION} with Go — first start only, this takes a few minutes…`);
    const started = Date.now();
    const ticker = setInterval(() => progress(`still building FerretDB (${Math.round((Date.now() - started) / 1000)} s)…`), 15_000);
    try {
      // `go install pkg@version` asks the proxy for the version list, which may be refused,
      // and the module zip lacks the generated build/version/version.txt that FerretDB
      // embeds. So: `go get` the pinned version into a throwaway module, copy its source,
      // write version.txt, and build through a `replace` directive.
      const mod = join(dir, "build");
      rmSync(mod, { recursive: true, force: true });
      mkdirSync(mod, { recursive: true });
      const env = { ...process.env, GOFLAGS: "-mod=mod", CGO_ENABLED: "0" };
      const run = (cmd: string, args: string[]) => exec(cmd, args, { cwd: mod, env, maxBuffer: 64 << 20 });
      writeFileSync(join(mod, "go.mod"), "module runhook-ferretdb-build\n\ngo 1.22\n");
      await run("go", ["get", `${FERRETDB_MODULE}/cmd/ferretdb@${FERRETDB_VERSION}`]);
      const { stdout } = await run("go", ["list", "-m", "-f", "{{.Dir}}", FERRETDB_MODULE]);
      await run("cp", ["-r", stdout.trim(), join(mod, "src")]);
      await run("chmod", ["-R", "u+w", join(mod, "src")]);
      writeFileSync(join(mod, "src/build/version/version.txt"), `${FERRETDB_VERSION}\n`);
      writeFileSync(join(mod, "go.mod"), `module runhook-ferretdb-build\n\ngo 1.22\n\nrequire ${FERRETDB_MODULE} ${FERRETDB_VERSION}\n\nreplace ${FERRETDB_MODULE} => ./src\n`);
      await run("go", ["build", "-o", `${bin}.tmp`, `${FERRETDB_MODULE}/cmd/ferretdb`]);
      renameSync(`${bin}.tmp`, bin);
      rmSync(mod, { recursive: true, force: true });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`building FerretDB failed: ${(e.stderr || e.message).slice(-2000)}`);
    } finally {
      clearInterval(ticker);
    }
    progress(`FerretDB built in ${Math.round((Date.now() - started) / 1000)} s (cached in ${dir})`);
    return bin;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function ping(uri: string, timeoutMs: number): Promise<boolean> {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: timeoutMs, connectTimeoutMS: timeoutMs });
  try {
    await client.db("admin").command({ ping: 1 });
    return true;
  } catch {
    return false;
  } finally {
    await client.close().catch(() => {});
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts FerretDB with its files under `dataDir`, or joins the one another local
 * runhook process (a `runhook worker`, say) already started there.
 */
export async function startEmbeddedDb(opts: { dataDir: string; cacheDir: string; progress: Progress }): Promise<EmbeddedDb> {
  const dir = join(opts.dataDir, "ferretdb");
  mkdirSync(dir, { recursive: true });
  const stateFile = join(dir, "running.json");
  if (existsSync(stateFile)) {
    try {
      const state = JSON.parse(readFileSync(stateFile, "utf8")) as { pid: number; port: number };
      const uri = `mongodb://127.0.0.1:${state.port}/`;
      if (pidAlive(state.pid) && (await ping(uri, 1000))) {
        opts.progress(`using the embedded database already running on port ${state.port}`);
        return { uri, stop: async () => {} };
      }
    } catch {
      // stale or unreadable: start our own
    }
  }
  const bin = await ensureFerretDbBinary(opts.cacheDir, opts.progress);
  const port = await freePort();
  const args = [
    "--handler=sqlite",
    `--sqlite-url=file:${dir}/`,
    `--state-dir=${dir}`,
    "--debug-addr=-",
    "--telemetry=disable",
    "--log-level=error",
    `--listen-addr=127.0.0.1:${port}`,
  ];
  // A shell wrapper kills FerretDB when our stdin closes, so it never outlives us,
  // even after kill -9 of this process.
  const child = spawn("sh", ["-c", '"$0" "$@" & c=$!; trap "kill $c 2>/dev/null" EXIT; read _; kill $c 2>/dev/null; wait $c', bin, ...args], {
    stdio: ["pipe", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const uri = `mongodb://127.0.0.1:${port}/`;
  const deadline = Date.now() + 30_000;
  while (!(await ping(uri, 500))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`the embedded database did not start: ${stderr.trim() || "no output"}`);
    }
    await sleep(100);
  }
  writeFileSync(stateFile, JSON.stringify({ pid: child.pid, port }));
  return {
    uri,
    async stop() {
      rmSync(stateFile, { force: true });
      child.stdin!.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
