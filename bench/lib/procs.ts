// Server and worker processes for the benchmark: `node bin/runhook.js start|worker`, spawned
// the way users run them (ports 0, loopback; see context.ts serverEnv). Every child runs
// under a small shell wrapper that SIGTERMs it when our stdin pipe closes, so no server
// outlives the benchmark, even when the benchmark itself is killed.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");

export interface Proc {
  mode: "start" | "worker";
  /** pid of the node process itself (not the wrapper): for RSS. */
  pid: number;
  baseUrl?: string;
  grpcAddr?: string;
  /** Last lines of its output (for error reports). */
  output(): string;
  alive(): boolean;
  /** Graceful stop (SIGTERM through the wrapper); waits for exit (SIGKILL after 15 s). */
  stop(): Promise<void>;
}

const live = new Set<Proc>();

/** Every process still running (for cleanup on error / Ctrl-C). */
export function liveProcs(): Proc[] {
  return [...live];
}

export interface SpawnOptions {
  mode: "start" | "worker";
  env: Record<string, string>;
  /** Write a V8 CPU profile into this directory when the process exits. */
  cpuProfDir?: string;
  startTimeoutMs?: number;
}

const WRAPPER = '"$0" "$@" & c=$!; echo "BENCH_CHILD_PID $c" >&2; trap "kill $c 2>/dev/null" EXIT; read _; kill $c 2>/dev/null; wait $c';

export async function spawnRunhook(opts: SpawnOptions): Promise<Proc> {
  const nodeArgs = opts.cpuProfDir ? ["--cpu-prof", "--cpu-prof-dir", opts.cpuProfDir] : [];
  const child: ChildProcess = spawn("sh", ["-c", WRAPPER, process.execPath, ...nodeArgs, join(ROOT, "bin/runhook.js"), opts.mode], {
    cwd: ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let pid = 0;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const keep = (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  };
  const ready = new Promise<{ http?: number; grpc?: number }>((resolveReady, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`runhook ${opts.mode} did not start within ${opts.startTimeoutMs ?? 60_000} ms:\n${out.slice(-3000)}`)),
      opts.startTimeoutMs ?? 60_000,
    );
    let buf = "";
    child.stdout!.on("data", (d: Buffer) => {
      keep(d);
      buf += d.toString();
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const line of lines) {
        if (line.includes('"runhook listening"') || (opts.mode === "worker" && line.includes('"executors started"'))) {
          clearTimeout(timer);
          try {
            resolveReady(JSON.parse(line) as { http?: number; grpc?: number });
          } catch {
            resolveReady({});
          }
        }
      }
    });
    child.stderr!.on("data", (d: Buffer) => {
      const m = /BENCH_CHILD_PID (\d+)/.exec(d.toString());
      if (m) pid = Number(m[1]);
      keep(d);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`runhook ${opts.mode} exited with ${code}:\n${out.slice(-3000)}`));
    });
  });
  let stopped = false;
  const proc: Proc = {
    mode: opts.mode,
    get pid() {
      return pid;
    },
    output: () => out,
    alive: () => child.exitCode === null && pid > 0 && pidAlive(pid),
    async stop() {
      if (stopped) return exited;
      stopped = true;
      live.delete(proc);
      child.stdin!.end();
      const timer = setTimeout(() => {
        if (pid)
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            /* gone */
          }
        child.kill("SIGKILL");
      }, 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  live.add(proc);
  try {
    const ports = await ready;
    if (ports.http) proc.baseUrl = `http://127.0.0.1:${ports.http}`;
    if (ports.grpc) proc.grpcAddr = `127.0.0.1:${ports.grpc}`;
    return proc;
  } catch (err) {
    await proc.stop();
    throw err;
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

/** Resident set size of a process in MB (/proc/<pid>/status VmRSS), or null when unreadable. */
export function rssMb(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Math.round((Number(m[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

/** Samples the peak RSS of `pid` every `everyMs` until stopped. */
export function rssSampler(pid: number, everyMs = 200): { stop(): number | null } {
  let peak: number | null = rssMb(pid);
  const t = setInterval(() => {
    const v = rssMb(pid);
    if (v !== null && (peak === null || v > peak)) peak = v;
  }, everyMs);
  return {
    stop() {
      clearInterval(t);
      const v = rssMb(pid);
      if (v !== null && (peak === null || v > peak)) peak = v;
      return peak;
    },
  };
}

const CLK_TCK = 100;

/** CPU time (user + system) a process has used so far, in ms (/proc/<pid>/stat; 10 ms resolution), or null; with its ended children's too when `children`. */
export function cpuMs(pid: number | "self", children = false): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0);
    return (ticks * 1000) / CLK_TCK;
  } catch {
    return null;
  }
}

/** CPU time this process has used so far, in ms. */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** CPU time used during a phase by the load generator (this process) and by other processes, in ms. */
export function cpuMeter(pids: Record<string, number | undefined>): { stop(): Record<string, number | null> } {
  const self0 = selfCpuMs();
  const start = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? cpuMs(pid) : null]));
  return {
    stop() {
      const out: Record<string, number | null> = { loadGenerator: Math.round(selfCpuMs() - self0) };
      for (const [k, pid] of Object.entries(pids)) {
        const a = start[k];
        const b = pid ? cpuMs(pid) : null;
        out[k] = a == null || b == null ? null : Math.round(b - a);
      }
      return out;
    },
  };
}
