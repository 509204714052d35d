// Console sessions: a browser signs in with the user's own application token once, and gets a
// session whose secret lives only in an HttpOnly cookie (http/console.ts). The session acts as
// that token (tokens.ts authenticateApp), so every rule, SSO's included, holds as for the token;
// it ends at sign-out, when it expires, or when the token is revoked or expires.
import { randomUUID } from "node:crypto";
import type { ConsoleSessionDoc } from "../../store/types.js";
import { fail } from "../errors.js";
import { CONSOLE_SESSION_PREFIX, newToken, type AppPrincipal } from "./tokens.js";

/** The longest a session lasts (never beyond its token's expiry). */
export const CONSOLE_SESSION_MAX_MS = 12 * 3_600_000;

/** A new session for the principal's token: the document to store and the cookie's value. */
export function newConsoleSession(principal: AppPrincipal, now = new Date()): { doc: ConsoleSessionDoc; secret: string } {
  const id = randomUUID();
  const { plaintext, hash } = newToken(CONSOLE_SESSION_PREFIX, id);
  const expiresAt = new Date(Math.min(now.getTime() + CONSOLE_SESSION_MAX_MS, principal.token.expiresAt.getTime()));
  if (expiresAt.getTime() <= now.getTime()) throw fail.unauthenticated();
  return { doc: { _id: id, hash, tokenId: principal.token._id, userId: principal.user._id, createdAt: now, expiresAt }, secret: plaintext };
}
