// Building the embedded database: the project's Maven module (embedded/pom.xml) packed into one
// jar, built on first use into a cache directory named by the sources' hash, one build at a
// time (a directory lock), with progress printed; and the checks for Java and Maven.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { withDirLock } from "./lock.js";

const exec = promisify(execFile);

export type Progress = (message: string) => void;

/** The project's Maven module that the jar is built from. */
export const EMBEDDED_SOURCE_DIR = join(import.meta.dirname, "..", "..", "embedded");
const JAR_NAME = "runhook-embedded-mongo.jar";
const JAVA_MIN = 17;
const BUILD_LOCK_STALE_MS = 20 * 60_000;

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

export async function requireJava(needMaven: boolean): Promise<void> {
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
      await exec("mvn", ["-B", "-q", "-Dstyle.color=never", "-Dmaven.test.skip=true", "package"], { cwd: build, maxBuffer: 64 << 20 });
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
