// Signed webhook keys: the last path segment of `{PUBLIC_BASE_URL}/hooks/{key}`.
//
// key = base64url (no padding) of
//   [format 1][generation u32 BE][workflow id 16][rendering id 16][kid length 1][kid][mac 16]
// where mac = HMAC-SHA256(signingKeys[kid], every byte before it), truncated to 128 bits.
// A key verifies only in its canonical spelling: it is decoded, re-encoded and compared with
// the string given, so no other spelling of the same bytes (base64 slack bits, padding,
// stray characters) is accepted, and every single-character change of a valid key fails.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { Config } from "../config.js";
import { isUuid } from "./ids.js";

const FORMAT = 1;
const MAC_BYTES = 16;
const KEY_CHARS = /^[A-Za-z0-9_-]{1,200}$/;

export interface WebhookKey {
  workflowId: string;
  renderingId: string;
  generation: number;
}

function uuidToBytes(id: string): Buffer {
  if (!isUuid(id)) throw new Error(`webhook keys need UUID ids, got "${id}"`);
  return Buffer.from(id.replace(/-/g, ""), "hex");
}

function bytesToUuid(b: Buffer): string {
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function mac(secret: Buffer, data: Buffer): Buffer {
  return createHmac("sha256", secret).update(data).digest().subarray(0, MAC_BYTES);
}

/** Signs a key with the current signing key (`config.signingKeyId`). */
export function signWebhookKey(config: Pick<Config, "signingKeys" | "signingKeyId">, k: WebhookKey): string {
  const kid = Buffer.from(config.signingKeyId, "ascii");
  const secret = config.signingKeys.get(config.signingKeyId);
  if (!secret) throw new Error(`no signing key "${config.signingKeyId}"`);
  if (!Number.isInteger(k.generation) || k.generation < 0 || k.generation > 0xffffffff) throw new Error("bad generation");
  const gen = Buffer.alloc(4);
  gen.writeUInt32BE(k.generation);
  const body = Buffer.concat([Buffer.from([FORMAT]), gen, uuidToBytes(k.workflowId), uuidToBytes(k.renderingId), Buffer.from([kid.length]), kid]);
  return Buffer.concat([body, mac(secret, body)]).toString("base64url");
}

/** The key's contents when it is well-formed and correctly signed by any configured key id; otherwise null. */
export function verifyWebhookKey(config: Pick<Config, "signingKeys">, key: string): WebhookKey | null {
  if (!KEY_CHARS.test(key)) return null;
  const raw = Buffer.from(key, "base64url");
  if (raw.toString("base64url") !== key) return null; // not the canonical spelling
  const fixed = 1 + 4 + 16 + 16 + 1;
  if (raw.length < fixed + 1 + MAC_BYTES || raw[0] !== FORMAT) return null;
  const kidLen = raw[fixed - 1]!;
  if (raw.length !== fixed + kidLen + MAC_BYTES) return null;
  const body = raw.subarray(0, fixed + kidLen);
  const kid = body.subarray(fixed).toString("ascii");
  const secret = config.signingKeys.get(kid);
  if (!secret) return null;
  const expected = mac(secret, body);
  const given = raw.subarray(fixed + kidLen);
  if (!timingSafeEqual(expected, given)) return null;
  return { generation: raw.readUInt32BE(1), workflowId: bytesToUuid(raw.subarray(5, 21)), renderingId: bytesToUuid(raw.subarray(21, 37)) };
}

/** The webhook URL of a key; computed, never stored. */
export function webhookUrl(config: Pick<Config, "publicBaseUrl">, key: string): string {
  return `${config.publicBaseUrl}/hooks/${key}`;
}

/** The key of a full webhook URL, or the string itself when it is only the key. */
export function keyOfUrl(urlOrKey: string): string {
  const s = urlOrKey.trim();
  const i = s.lastIndexOf("/hooks/");
  if (i >= 0)
    return s
      .slice(i + "/hooks/".length)
      .replace(/[?#].*$/, "")
      .replace(/\/$/, "");
  return s;
}
