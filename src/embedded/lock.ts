// One process at a time: a directory lock (mkdir is atomic) that names its holder, broken when
// the holder is gone or the lock is stale.
import { mkdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { sleep } from "../lib/sleep.js";

/** Whether process `pid` exists (EPERM: it does, owned by another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Runs `fn` holding the directory lock `lock` (mkdir; the holder's host and pid inside).
 * While another process holds it, `poll` runs every `pollMs` and its result, if any, is
 * returned instead. A lock is broken when its holder (on this host) is gone, or when it has not
 * been touched for `staleMs`: its holder touches it while `fn` runs, however long that takes (an
 * index rebuild at the embedded database's first start, a jar's build).
 */
export async function withDirLock<T>(lock: string, staleMs: number, pollMs: number, poll: () => Promise<T | undefined>, fn: () => Promise<T>): Promise<T> {
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
    const holder = holderOf(lock);
    const [host, pid] = holder.split(" ");
    const dead = host === hostname() && pid !== undefined && !pidAlive(Number(pid));
    const age = Date.now() - mtime;
    if (dead || (!holder && age > 10_000) || age > staleMs) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    await sleep(pollMs);
  }
  const beat = setInterval(
    () => {
      try {
        const now = new Date();
        utimesSync(lock, now, now);
      } catch {
        // broken by another process meanwhile: nothing to keep alive
      }
    },
    Math.max(50, Math.floor(staleMs / 4)),
  );
  beat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(beat);
    // Only our own: had this process stalled past the staleness, another may hold it now.
    if (holderOf(lock) === me) rmSync(lock, { recursive: true, force: true });
  }
}

/** Who holds `lock` ("host pid"), or "" while it is being created or removed. */
function holderOf(lock: string): string {
  try {
    return readFileSync(join(lock, "holder"), "utf8");
  } catch {
    return "";
  }
}
