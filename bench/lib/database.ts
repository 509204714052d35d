// The database server of a benchmark run: MONGODB_URI when set, otherwise runhook's embedded
// mongo-java-server with its memory backend (persistent: false) started for this run, whose
// Java process is found as our child (ps --ppid) so that its RSS can be reported apart.
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

export async function openBenchDatabase(dataDir: string, log: (m: string) => void): Promise<BenchDatabase> {
  const external = process.env.MONGODB_URI;
  if (external) {
    return { uri: external, description: `MONGODB_URI (${external.replace(/\/\/[^@/]*@/, "//***@").replace(/\/[^/?]*(\?|$)/, "/$1")})`, stop: async () => {} };
  }
  const cacheDir = process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
  const before = javaChildren();
  const server = await startEmbeddedServer({ dataDir, cacheDir, persistent: false, progress: log });
  const javaPid = [...javaChildren()].find((p) => !before.has(p));
  return { uri: server.uri, description: "embedded mongo-java-server, memory backend, in a temp dir", javaPid, stop: () => server.stop() };
}
