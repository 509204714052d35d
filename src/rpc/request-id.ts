// Request ids: every HTTP and RPC call has one. A caller's `x-request-id` is kept when it is
// well-formed and could be no secret (it is echoed, logged and stored, so nothing else is let
// through: a token sent there by mistake would be in the log); otherwise the server makes one.
import { randomUUID } from "node:crypto";
import { holdsSecret } from "../lib/logging.js";

export const REQUEST_ID_HEADER = "x-request-id";
const WELL_FORMED = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export function requestIdOf(given: unknown): string {
  return typeof given === "string" && WELL_FORMED.test(given) && !holdsSecret(given) ? given : randomUUID();
}
