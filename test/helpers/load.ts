// Bounded request loops for the outage and crash tests: every call is timed and its answer
// kept, so that the test can say what callers saw, and when.
import net from "node:net";
import type { ChildProcess } from "node:child_process";

export interface Call {
  kind: string;
  /** Server the call went to (its base URL or gRPC address). */
  target: string;
  start: number;
  end: number;
  /** HTTP status; for gRPC the status code; "error" when no answer came (connection reset, refused); "hang" when the client gave up. */
  status: number | "error" | "hang";
  /** The `code` of an error body, or the gRPC status name. */
  code?: string;
  retryAfter?: string | null;
  runId?: string;
  detail?: string;
}

export const ms = (c: Call) => c.end - c.start;

/** A free loopback TCP port (free when this returns; nothing holds it). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** fetch with a client-side limit: a call that has no answer after `hangMs` is recorded as "hang". */
export async function timedFetch(kind: string, target: string, path: string, init: RequestInit & { hangMs?: number } = {}): Promise<Call> {
  const start = Date.now();
  const { hangMs = 30_000, ...rest } = init;
  try {
    const res = await fetch(target + path, { ...rest, signal: AbortSignal.timeout(hangMs) });
    const text = await res.text();
    let body: { code?: string; runId?: string; error?: string } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      /* not JSON */
    }
    return {
      kind,
      target,
      start,
      end: Date.now(),
      status: res.status,
      code: body.code,
      retryAfter: res.headers.get("retry-after"),
      runId: body.runId,
      detail: res.status >= 500 ? text.slice(0, 200) : undefined,
    };
  } catch (err) {
    const e = err as Error;
    return {
      kind,
      target,
      start,
      end: Date.now(),
      status: e.name === "TimeoutError" ? "hang" : "error",
      detail: `${e.name}: ${e.message} ${String((e as { cause?: unknown }).cause ?? "")}`,
    };
  }
}

/** The JSON log lines a child server writes, as they arrive. */
export interface Logs {
  lines: () => Array<Record<string, unknown>>;
  raw: () => string;
}

export function collectLogs(child: ChildProcess): Logs {
  let raw = "";
  child.stdout!.on("data", (d: Buffer) => (raw += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (raw += d.toString()));
  return {
    raw: () => raw,
    lines: () =>
      raw
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            return {};
          }
        }),
  };
}

/** Counts of each value, for printing: {"202": 31, "409": 12}. */
export function tally<T>(items: T[], key: (t: T) => string | number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) {
    const k = String(key(i));
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}
