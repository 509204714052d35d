// The embedded MongoDB-wire server: mongo-java-server (de.bwaldvogel) with its memory or
// H2 (MVStore file) backend, packed by embedded/pom.xml into one jar that is built with
// Maven into a cache directory on first use (build.ts) and started on a loopback port
// (process.ts), one starter per data dir (lock.ts).
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureEmbeddedJar, requireJava } from "./build.js";
import { withDirLock } from "./lock.js";
import { joinRunning, ownServer, readState, spawnServer, START_TIMEOUT_MS, type EmbeddedServer, type RunningState } from "./process.js";

export { EMBEDDED_SOURCE_DIR, ensureEmbeddedJar } from "./build.js";
export { pidAlive } from "./lock.js";
export { EMBEDDED_HOST } from "./process.js";
export type { EmbeddedServer } from "./process.js";

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
  /** Refuse queries no index serves (MongoDB's notablescan): the tests and benchmarks. */
  noTableScan?: boolean;
  /** The Java heap, MB (default: process.ts, by backend). */
  heapMb?: number;
  /**
   * In memory only. `publish`: join the in-memory server that another local runhook server
   * runs for this data dir, or start one that others can join (`runhook start`). `join`: only
   * join one, else fail with one line (`runhook worker` and `seed`: a database of their own
   * would be unseen by the server and gone with them). Unset: a private server (tests, benchmarks).
   */
  share?: "publish" | "join";
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
    const s = await spawnServer(jar, o.port ?? 0, undefined, o.progress, o.javaOptions, o.noTableScan, o.heapMb);
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
      const s = await spawnServer(jar, o.port ?? 0, o.persistent ? join(dir, "runhook.mv") : undefined, o.progress, o.javaOptions, o.noTableScan, o.heapMb);
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
