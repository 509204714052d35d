// Pinned Python tools for tests, installed from PyPI once into a venv under
// ${RUNHOOK_CACHE_DIR:-~/.cache/runhook} (like scripts/generate-clients.sh does for the
// interop clients). A lock directory keeps two processes (vitest workers, two checkouts)
// from building the same venv at once; the others wait for it. The venv is complete once
// its marker file names exactly the pinned requirements.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { sleep } from "../../src/lib/sleep.js";
import { pidAlive } from "../../src/embedded/index.js";

const exec = promisify(execFile);
const LOCK_STALE_MS = 10 * 60_000;

export function cacheDir(): string {
  return process.env.RUNHOOK_CACHE_DIR || join(homedir(), ".cache", "runhook");
}

/**
 * The venv `<cache>/venv-<name>` with exactly `requirements` (pip specifiers, pinned) installed;
 * returns its directory. Throws with pip's output when the install fails.
 */
export async function ensureVenv(name: string, requirements: string[], progress: (msg: string) => void = () => {}): Promise<string> {
  const dir = join(cacheDir(), `venv-${name}`);
  const marker = join(dir, ".runhook-installed");
  const wanted = requirements.join(" ");
  const ready = () => existsSync(marker) && readFileSync(marker, "utf8") === wanted;
  if (ready()) return dir;

  mkdirSync(cacheDir(), { recursive: true });
  const lock = `${dir}.lock`;
  for (let waited = 0; ; waited++) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch {
      if (ready()) return dir;
      let holder: number | undefined;
      try {
        holder = Number(readFileSync(join(lock, "pid"), "utf8")) || undefined;
      } catch {
        holder = undefined;
      }
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if ((holder !== undefined && !pidAlive(holder)) || (holder === undefined && age > 10_000) || age > LOCK_STALE_MS) {
        rmSync(lock, { recursive: true, force: true }); // its builder died
        continue;
      }
      if (waited % 20 === 0) progress(`waiting for another process to install ${name}…`);
      await sleep(500);
    }
  }
  try {
    if (ready()) return dir;
    progress(`installing ${wanted} into ${dir} (first run only)…`);
    rmSync(dir, { recursive: true, force: true });
    try {
      await exec("python3", ["-m", "venv", dir]);
      await exec(join(dir, "bin", "python"), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", ...requirements], {
        maxBuffer: 16 << 20,
        timeout: 600_000,
      });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`installing ${wanted} failed: ${`${e.stdout ?? ""}\n${e.stderr ?? ""}`.trim().slice(-2000) || e.message}`);
    }
    writeFileSync(marker, wanted);
    return dir;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Whether `python3` is on PATH (the tests that need it are skipped otherwise). */
export function hasPython(): boolean {
  return (process.env.PATH ?? "").split(":").some((p) => p !== "" && existsSync(join(p, "python3")));
}
