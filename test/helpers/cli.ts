// `node bin/runhook.js …` as a child process, as users run it: its output so far, and its exit.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "./server.js";

export interface Cli {
  child: ChildProcess;
  /** stdout so far */
  out(): string;
  err(): string;
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

export interface CliOptions {
  /** The whole environment of the command. */
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Killed after this long. */
  timeoutMs: number;
  nodeArgs?: string[];
  /** Holds the command until it exits (the test file kills what is left at its end). */
  children?: Set<ChildProcess>;
  /** Run as this user (a test running as root that needs an unprivileged command). */
  user?: { uid: number; gid: number };
}

export function spawnCli(args: string[], o: CliOptions): Cli {
  const child = spawn(process.execPath, [...(o.nodeArgs ?? []), join(ROOT, "bin/runhook.js"), ...args], {
    cwd: o.cwd,
    env: o.env,
    stdio: ["ignore", "pipe", "pipe"],
    ...o.user,
  });
  o.children?.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs);
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once("close", (code) => {
      clearTimeout(timer);
      o.children?.delete(child);
      resolve({ code, stdout, stderr });
    }),
  );
  return { child, out: () => stdout, err: () => stderr, exited };
}

/**
 * `runhook args…` run to its end, in the repository, with `env` over this process's environment
 * less its RUNHOOK_ variables (a developer's own never reach the command); killed after 60 s.
 */
export function runCli(args: string[], env: Record<string, string>): Cli["exited"] {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNHOOK_")));
  return spawnCli(args, { env: { ...base, ...env }, cwd: ROOT, timeoutMs: 60_000 }).exited;
}
