// The Ed25519 keys that sign log digests, one per configured signing key (RUNHOOK_SIGNING_KEYS):
// each derived from its secret, so that every instance with the same configuration signs with
// the same key, and rotating the signing keys rotates these (the current key id signs; every
// configured key stays listed, so that older digests still verify). Only the public halves
// leave this file.
import { createHmac, createPrivateKey, createPublicKey, sign, type KeyObject } from "node:crypto";
import type { Config } from "../../config.js";

/** A public key as ListLogKeys and `GET /v1/…/log-keys` answer it. */
export interface PublicLogKey {
  id: string;
  algorithm: "Ed25519";
  /** The raw 32-byte public key, base64. */
  publicKey: string;
  current: boolean;
}

export interface LogSigner {
  /** The id of the key that signs. */
  keyId: string;
  /** The Ed25519 signature (base64) of `text` with the current key. */
  sign(text: string): string;
  /** Every configured key's public half, the current one first. */
  publicKeys: PublicLogKey[];
}

// An Ed25519 private key in the DER PKCS#8 wrapping node:crypto reads, around its 32-byte seed.
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/** The 32-byte seed of a signing key's digest key: its secret's HMAC of a label of its own (the secret also keys cursors and webhook URLs). */
function seedOf(secret: Buffer): Buffer {
  return createHmac("sha256", secret).update("runhook log digest signing key v1").digest();
}

function privateKeyOf(secret: Buffer): KeyObject {
  return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seedOf(secret)]), format: "der", type: "pkcs8" });
}

/** The raw public key (the last 32 bytes of its DER SubjectPublicKeyInfo), base64. */
function rawPublicKey(key: KeyObject): string {
  return (createPublicKey(key).export({ format: "der", type: "spki" }) as Buffer).subarray(-32).toString("base64");
}

export function logSigner(config: Pick<Config, "signingKeys" | "signingKeyId">): LogSigner {
  const keys = new Map([...config.signingKeys].map(([id, secret]) => [id, privateKeyOf(secret)]));
  const current = keys.get(config.signingKeyId);
  if (!current) throw new Error(`no signing key "${config.signingKeyId}"`);
  const publicKeys = [...keys].map(
    ([id, key]): PublicLogKey => ({ id, algorithm: "Ed25519", publicKey: rawPublicKey(key), current: id === config.signingKeyId }),
  );
  return {
    keyId: config.signingKeyId,
    sign: (text) => sign(null, Buffer.from(text, "utf8"), current).toString("base64"),
    publicKeys: publicKeys.sort((a, b) => Number(b.current) - Number(a.current)),
  };
}
