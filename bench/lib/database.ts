// The database server of a benchmark run: MONGODB_URI when set, otherwise runhook's embedded
// mongo-java-server started for this run — its memory backend (persistent: false), or the file
// backend `npm start` uses (--vs temporal) — whose Java process is found as our child (ps
// --ppid) so that its RSS and CPU can be reported apart.
import { execFileSync } from "node:child_process";
import { homedir } from "node:os";
import { join } from "node:path";
import { startEmbeddedServer } from "../../src/embedded/index.js";

export interface BenchDatabase {
  uri: string;
  /** For the report: which server, without credentials. */
  description: string;
  /** The embedded server's Java process (absent with MONGODB_URI). */
  javaPid?: number;
  stop(): Promise<void>;
}

/** pids of our child processes running `java`. */
function javaChildren(): Set<number> {
  try {
    const out = execFileSync("ps", ["--ppid", String(process.pid), "-o", "pid=,comm="], { encoding: "utf8" });
    return new Set(
      out
        .split("\n")
        .map((l) => l.trim().split(/\s+/))
        .filter(([, comm]) => comm === "java")
        .map(([pid]) => Number(pid)),
    );
  } catch {
    return new Set();
  }
}

/**
 * RUNHOOK_BENCH_JAVA_OPTIONS, for trying JVM settings: flags passed after the embedded server's
 * own (the last of a flag wins), to every start of the bench's database.
 */
export function benchJavaOptions(): string[] {
  return (process.env.RUNHOOK_BENCH_JAVA_OPTIONS ?? "").split(/\s+/).filter(Boolean);
}

export async function openBenchDatabase(dataDir: string, log: (m: string) => void, opts: { persistent?: boolean } = {}): Promise<BenchDatabase> {
  const external = process.env.MONGODB_URI;
  if (external) {
    return { uri: external, description: `MONGODB_URI (${external.replace(/\/\/[^@/]*@/, "//***@").replace(/\/[^/?]*(\?|$)/, "/$1")})`, stop: async () => {} };
  }
  const cacheDir = process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
  const before = javaChildren();
  const persistent = opts.persistent ?? false;
  const javaOptions = benchJavaOptions();
  const server = await startEmbeddedServer({ noTableScan: true, dataDir, cacheDir, persistent, progress: log, javaOptions });
  const javaPid = [...javaChildren()].find((p) => !before.has(p));
  const backend = persistent ? "file backend (a write answered once on disk)" : "memory backend";
  const options = javaOptions.length ? `, Java options ${javaOptions.join(" ")}` : "";
  return { uri: server.uri, description: `embedded mongo-java-server, ${backend}, in a temp dir${options}`, javaPid, stop: () => server.stop() };
}
