// The longest deadline a call gets. gRPC's `grpc-timeout` allows up to 99,999,999 hours and
// Connect's `connect-timeout-ms` ten digits, but a Node timer waits at most 2^31 − 1 ms (~24.8
// days) and fires at once past that (with a warning per call): `99999999H` would end a call
// after 1 ms. A longer deadline is clamped to this one, before any handler reads it (both
// protocols let a server end a call at a deadline of its own; it ends with DEADLINE_EXCEEDED).
import type { IncomingHttpHeaders } from "node:http";
import { MAX_TIMER_MS } from "../lib/sleep.js";

export const MAX_DEADLINE_MS = MAX_TIMER_MS;

const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

/** Rewrites an over-long `grpc-timeout` or `connect-timeout-ms` header to MAX_DEADLINE_MS; leaves any other value (valid or not) to the protocol. */
export function clampDeadlineHeaders(headers: IncomingHttpHeaders): void {
  const grpc = headers["grpc-timeout"];
  const g = typeof grpc === "string" ? /^(\d{1,8})([HMSmun])$/.exec(grpc) : null;
  if (g && Number(g[1]) * UNIT_MS[g[2]!]! > MAX_DEADLINE_MS) headers["grpc-timeout"] = `${MAX_DEADLINE_MS / 1000}S`;
  const connect = headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect) && Number(connect) > MAX_DEADLINE_MS) headers["connect-timeout-ms"] = String(MAX_DEADLINE_MS);
}
