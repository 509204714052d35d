// Bearer tokens: generated once, stored only as a sha256 hash, found by the id they carry.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { DirectoryReads } from "../../store/directory-cache.js";
import type { ApiTokenDoc, AppTokenDoc, ConsoleSessionDoc, OrgApiTokenDoc, ProjectDoc, UserDoc } from "../../store/types.js";
import { fail } from "../errors.js";

export const APP_TOKEN_PREFIX = "rh_app_";
export const API_TOKEN_PREFIX = "rh_api_";
export const ORG_API_TOKEN_PREFIX = "rh_org_";
/** A console session's cookie value (console-sessions.ts): never shown, never in a header the browser sends. */
export const CONSOLE_SESSION_PREFIX = "rh_ses_";
// `rh_app_<token id, 32 hex>_<secret, 43 base64url>` (rh_api_, rh_org_ and rh_ses_ alike): the
// id lets a token be found by its _id without an extra index on the hash; only the hash of the
// whole plaintext is stored and compared.
const TOKEN_SHAPE = /^rh_(app|api|org|ses)_([0-9a-f]{32})_[A-Za-z0-9_-]{43}$/;

/** A new token for the document `id` (a UUID): its plaintext (shown once) and hash (stored). */
export function newToken(prefix: string, id: string): { plaintext: string; hash: string } {
  const plaintext = `${prefix}${id.replace(/-/g, "")}_${randomBytes(32).toString("base64url")}`;
  return { plaintext, hash: hashToken(plaintext) };
}

/** The token document id carried by a well-formed plaintext of the given prefix. */
function tokenId(plaintext: string | undefined, prefix: string): string | undefined {
  if (!plaintext?.startsWith(prefix)) return undefined;
  const hex = TOKEN_SHAPE.exec(plaintext)?.[2];
  return hex && `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function hashToken(plaintext: string): string {
  return createHash("sha256").update(plaintext).digest("hex");
}

/** Extracts the token from `Bearer <token>`; undefined when absent or malformed. */
export function bearer(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What a bearer secret is checked against (a console session has no revocation of its own: it is removed). */
type StoredToken = { hash: string; revokedAt?: Date | null; expiresAt: Date };

function usable(doc: StoredToken, hash: string, now: Date): boolean {
  return sameHash(doc.hash, hash) && !doc.revokedAt && doc.expiresAt.getTime() > now.getTime();
}

/** The token a `Bearer` header carries, as `find` reads it by its id, if well-formed, known, unrevoked and unexpired; else unauthenticated. */
async function usableToken<T extends StoredToken>(
  header: string | null | undefined,
  prefix: string,
  find: (id: string) => Promise<T | null>,
  now: Date,
): Promise<T> {
  const plaintext = bearer(header);
  const id = tokenId(plaintext, prefix);
  if (!id) throw fail.unauthenticated();
  const hash = hashToken(plaintext!);
  const token = await find(id);
  if (!token || !usable(token, hash, now)) throw fail.unauthenticated();
  return token;
}

export interface AppPrincipal {
  kind: "app";
  token: AppTokenDoc;
  user: UserDoc;
}
export interface ApiPrincipal {
  kind: "api";
  token: ApiTokenDoc;
  user: UserDoc;
  project: ProjectDoc;
}

/** An organization API token's principal: the organization admin who made it, and its organization. */
export interface OrgPrincipal {
  kind: "org";
  token: OrgApiTokenDoc;
  user: UserDoc;
}

export type AnyPrincipal = AppPrincipal | ApiPrincipal | OrgPrincipal;

/** The console session a `Bearer` header carries: known, its secret matching, unexpired; else unauthenticated. */
export function consoleSession(dir: DirectoryReads, header: string | null | undefined, now = new Date()): Promise<ConsoleSessionDoc> {
  return usableToken(header, CONSOLE_SESSION_PREFIX, (id) => dir.consoleSessions.get(id), now);
}

/** The application token a console session acts as: the session usable, and its token too. */
async function consoleSessionToken(dir: DirectoryReads, header: string | null | undefined, now: Date): Promise<AppTokenDoc> {
  const session = await consoleSession(dir, header, now);
  const token = await dir.appTokens.get(session.tokenId);
  if (!token || token.revokedAt !== null || token.expiresAt.getTime() <= now.getTime()) throw fail.unauthenticated();
  return token;
}

/**
 * The application token's principal, read fresh on every call (revocation is immediate); a
 * console session stands for the token it was opened with (revoking the token ends it).
 */
export async function authenticateApp(dir: DirectoryReads, header: string | null | undefined, now = new Date()): Promise<AppPrincipal> {
  const token = bearer(header)?.startsWith(CONSOLE_SESSION_PREFIX)
    ? await consoleSessionToken(dir, header, now)
    : await usableToken(header, APP_TOKEN_PREFIX, (id) => dir.appTokens.get(id), now);
  const user = await dir.users.get(token.userId);
  if (!user) throw fail.unauthenticated();
  dir.tokenUsed?.("app", token._id);
  return { kind: "app", token, user };
}

/** The project API token's principal; its creator must still be an admin of the project. */
export async function authenticateApi(dir: DirectoryReads, header: string | null | undefined, now = new Date()): Promise<ApiPrincipal> {
  const token = await usableToken(header, API_TOKEN_PREFIX, (id) => dir.apiTokens.get(id), now);
  const [user, project] = await Promise.all([dir.users.get(token.userId), dir.projects.get(token.projectId)]);
  if (!user || !project) throw fail.unauthenticated();
  dir.tokenUsed?.("api", token._id);
  return { kind: "api", token, user, project };
}

/** The organization API token's principal; its creator must still be an admin of the organization (access.ts). */
export async function authenticateOrg(dir: DirectoryReads, header: string | null | undefined, now = new Date()): Promise<OrgPrincipal> {
  const token = await usableToken(header, ORG_API_TOKEN_PREFIX, (id) => dir.orgApiTokens.get(id), now);
  const user = await dir.users.get(token.userId);
  if (!user) throw fail.unauthenticated();
  dir.tokenUsed?.("org", token._id);
  return { kind: "org", token, user };
}

function sameSecret(given: string, expected: string): boolean {
  // Hash both so the comparison is constant-time whatever the lengths.
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** Throws UNAUTHENTICATED unless the `Bearer` header carries the operator (bootstrap) secret; `what` names the call that needs it. */
export function assertOperator(header: string | null | undefined, operatorSecret: string, what: string): void {
  const secret = bearer(header);
  if (!secret || !sameSecret(secret, operatorSecret)) throw fail.unauthenticated(`${what} needs the operator secret as bearer token`);
}

/** Any kind of token, chosen by its prefix. */
export async function authenticateAny(dir: DirectoryReads, header: string | null | undefined): Promise<AnyPrincipal> {
  const plaintext = bearer(header);
  if (plaintext?.startsWith(API_TOKEN_PREFIX)) return authenticateApi(dir, header);
  if (plaintext?.startsWith(ORG_API_TOKEN_PREFIX)) return authenticateOrg(dir, header);
  return authenticateApp(dir, header);
}
