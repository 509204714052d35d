// A port that cannot be listened on names the variable that sets it and says what to do,
// instead of Node's bare "listen EADDRINUSE: address already in use 0.0.0.0:9464".
import { createServer } from "node:net";

/** A port a process listens on, and the environment variable that sets it. */
export interface PortUse {
  variable: string;
  port: number;
  host: string;
}

/** A port that cannot be listened on, with what to do about it (one line per port). */
export class PortError extends Error {
  override name = "PortError";
}

/** The error a listen on host:port meets now (a server opened and closed at once), or undefined when it would succeed. */
export function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err) => resolve(err));
    // exclusive: in a cluster's process, this socket is its own, not one shared through the primary.
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/** How many ports after the one refused are tried for a suggestion. */
const SUGGESTION_TRIES = 20;

/**
 * A port to suggest instead of `use.port`: the first free one after it (after port + 8000 for a
 * privileged port: 80 → 8080), none of `avoid`; 0 (any free port) when none of them is free.
 */
async function portToSuggest(use: PortUse, avoid: ReadonlySet<number>): Promise<number> {
  const from = use.port < 1024 ? use.port + 8000 : use.port + 1;
  for (let p = from; p < from + SUGGESTION_TRIES && p <= 65535; p++) {
    if (!avoid.has(p) && !(await tryListen(use.host, p))) return p;
  }
  return 0;
}

/**
 * What to tell the operator about `err` met listening on `use`, or undefined for an error that
 * no other port would cure. The port it suggests joins `avoid`, so that no other is told the same.
 */
async function portProblem(use: PortUse, err: unknown, avoid: Set<number>): Promise<string | undefined> {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== "EADDRINUSE" && code !== "EACCES") return undefined;
  const other = await portToSuggest(use, avoid);
  avoid.add(other);
  const instead = `start with ${use.variable}=${other}${other === 0 ? " (any free port)" : ""}`;
  return code === "EADDRINUSE"
    ? `port ${use.port} (${use.variable}) is in use: stop what holds it, or ${instead}`
    : `port ${use.port} (${use.variable}) needs privileges this process lacks (ports below 1024 need root or CAP_NET_BIND_SERVICE): ${instead}`;
}

/** Runs a real listen on `use`; a busy or forbidden port fails it with a PortError that says what to do. */
export async function listening<T>(use: PortUse, avoid: Iterable<number>, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const problem = await portProblem(use, err, new Set(avoid));
    throw problem ? new PortError(problem, { cause: err }) : err;
  }
}

/**
 * Checks ports before anything listens: one port given twice among `uses`, and each of `tried`
 * that is busy or forbidden now, in one PortError (one line each); another listen error is
 * thrown as it is. Port 0 (any free port) always passes.
 */
export async function checkPorts(uses: PortUse[], tried: PortUse[]): Promise<void> {
  const fixed = uses.filter((u) => u.port !== 0);
  const problems: string[] = [];
  for (const [i, u] of fixed.entries()) {
    const first = fixed.findIndex((v) => v.port === u.port);
    if (first < i) problems.push(`${fixed[first]!.variable} and ${u.variable} are both ${u.port}: give each its own port`);
  }
  if (problems.length > 0) throw new PortError(problems.join("\n"));
  const avoid = new Set(fixed.map((u) => u.port));
  for (const u of tried.filter((t) => t.port !== 0)) {
    const err = await tryListen(u.host, u.port);
    if (!err) continue;
    const problem = await portProblem(u, err, avoid);
    if (!problem) throw err;
    problems.push(problem);
  }
  if (problems.length > 0) throw new PortError(problems.join("\n"));
}
