// Request ids: every HTTP and RPC call has one. A caller's `x-request-id` is kept when it is
// well-formed and could be no secret (it is echoed, logged and stored on runs, so nothing else is
// let through: a token or the operator's secret sent there by mistake would be shown to others);
// otherwise the server makes one.
import { randomUUID } from "node:crypto";
import { type Config, configuredSecrets } from "../config.js";
import { holdsSecret } from "../lib/logging.js";

export const REQUEST_ID_HEADER = "x-request-id";
const WELL_FORMED = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** The request id of a call that sent `given`, for a process configured with `config`'s secrets. */
export function requestIdRule(config: Pick<Config, "bootstrapSecret" | "signingKeys">): (given: unknown) => string {
  const secrets = configuredSecrets(config).filter((s) => s !== "");
  return (given) =>
    typeof given === "string" && WELL_FORMED.test(given) && !holdsSecret(given) && !secrets.some((s) => given.includes(s)) ? given : randomUUID();
}
