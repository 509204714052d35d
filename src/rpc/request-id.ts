// Request ids: every HTTP and RPC call has one. A caller's `x-request-id` is kept when it is
// well-formed (it is echoed, logged and stored, so nothing else is let through); otherwise
// the server makes one.
import { randomUUID } from "node:crypto";

export const REQUEST_ID_HEADER = "x-request-id";
const WELL_FORMED = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export function requestIdOf(given: unknown): string {
  return typeof given === "string" && WELL_FORMED.test(given) ? given : randomUUID();
}
