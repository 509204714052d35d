// Every id runhook makes is a UUID (crypto.randomUUID, lower case; or derived from a name, for an
// effect that must happen once whatever retries it); one check for all of them.
import { createHash } from "node:crypto";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `id` is spelled as a UUID (either case). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

/**
 * The UUID of `name` (version 8, RFC 9562: its bits a SHA-256 of the name): the same name gives
 * the same id, so an effect keyed by it is found again instead of made twice.
 */
export function derivedUuid(name: string): string {
  const b = createHash("sha256").update(name).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
