// Signing in to the console: the user gives their own application token once (POST
// /console/session) and the browser gets a session cookie — HttpOnly (no script reads it),
// SameSite=Strict, Secure and `__Host-` behind HTTPS, expiring, stored hashed (domain/auth/console-sessions.ts).
// The console's Connect calls carry the cookie instead of an Authorization header; the cookie
// stands for one only on Connect's paths and only from the console's own origin (a browser
// always sends Origin with Connect's POSTs, which are never "simple" requests), so another site
// cannot make a signed-in browser call runhook. Failed sign-ins count toward the limit on failed
// authentications like any 401.
import { Code } from "@connectrpc/connect";
import type { IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ConsoleAssets } from "./console-assets.js";
import { newConsoleSession } from "../domain/auth/console-sessions.js";
import { APP_TOKEN_PREFIX, authenticateApp, consoleSession, type AppPrincipal } from "../domain/auth/tokens.js";
import { fail } from "../domain/errors.js";
import { authThrottled } from "../rpc/auth-throttle.js";
import { codeOf } from "../rpc/errors.js";
import { hitRateLimit } from "../rpc/rate-limit.js";
import type { ServerDeps } from "../rpc/server-deps.js";

export const CONSOLE_ROUTE = "/console";
export const CONSOLE_SESSION_ROUTE = "/console/session";
/**
 * The console's pages: only its own script and style, no inline script, nothing from elsewhere,
 * never framed. (Styles set by script through the CSSOM, as the timeline's bars are, are allowed.)
 */
const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
export const CONSOLE_COOKIE = "rh_console";
/** Connect's and gRPC-Web's paths: `/<package>.<Service>/<Method>`. */
const CONNECT_PATH = /^\/runhook\.v1\.[A-Za-z]+\//;

/** Requests whose token the session cookie gave (rpc/session-cookie.ts accepts a session's secret from these only). */
const tokenFromCookie = new WeakSet<IncomingMessage>();

/** Whether the request's token is the console's session cookie. */
export function viaSessionCookie(req: FastifyRequest): boolean {
  return tokenFromCookie.has(req.raw);
}

/**
 * The value of cookie `name` in a Cookie header; none when it comes twice (a cookie another site
 * of the domain set beside ours, which the browser may send first: neither is trusted).
 */
function cookieValue(header: string | undefined, name: string): string | undefined {
  let value: string | undefined;
  for (const part of header?.split(";") ?? []) {
    const eq = part.indexOf("=");
    if (eq <= 0 || part.slice(0, eq).trim() !== name) continue;
    if (value !== undefined) return undefined;
    value = part.slice(eq + 1).trim();
  }
  return value;
}

/** Whether the request comes from a page of this server: its Origin is the public base URL's, or the request's own. */
function fromOwnOrigin(req: FastifyRequest, publicBaseUrl: string): boolean {
  const origin = req.headers.origin;
  return typeof origin === "string" && (origin === new URL(publicBaseUrl).origin || origin === `${req.protocol}://${req.host}`);
}

/**
 * The session cookie's name: behind HTTPS with the `__Host-` prefix, which a browser keeps only
 * when it is Secure, for Path=/ and with no Domain, so no other site of the domain can set it.
 */
function cookieName(secure: boolean): string {
  return secure ? `__Host-${CONSOLE_COOKIE}` : CONSOLE_COOKIE;
}

function sessionCookie(value: string, maxAgeS: number, secure: boolean): string {
  return `${cookieName(secure)}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${secure ? "; Secure" : ""}`;
}

/** 429 when the caller's address is over its limit of failed authentications (before any secret is looked at). */
function refuseIfThrottled(deps: ServerDeps, req: FastifyRequest): void {
  const standing = deps.authFailures.check(req.clientAddress);
  if (standing.allowed) return;
  deps.metrics.rateLimitRefusals.inc({ bucket: "auth" });
  throw authThrottled(standing);
}

/** The principal of an application token given to sign in (a session's own value is not one); a 401 counts as a failed authentication. */
async function signingIn(deps: ServerDeps, req: FastifyRequest): Promise<AppPrincipal> {
  refuseIfThrottled(deps, req);
  const token = (req.body as { token?: unknown } | undefined)?.token;
  if (typeof token !== "string" || token === "") throw fail.invalid("token is required: your application token");
  try {
    if (!token.startsWith(APP_TOKEN_PREFIX)) throw fail.unauthenticated("sign in with your application token");
    return await authenticateApp(deps.store.directory.view(), `Bearer ${token}`);
  } catch (err) {
    if (codeOf(err) === Code.Unauthenticated) deps.authFailures.fail(req.clientAddress);
    throw err;
  }
}

/** Sign-ins a minute per application token: each stores a session, so a token cannot fill the database with them. */
export const CONSOLE_SIGN_INS_PER_MINUTE = 10;

async function limitSignIns(deps: ServerDeps, principal: AppPrincipal): Promise<void> {
  const { error } = await hitRateLimit(deps, `console-sign-in:${principal.token._id}`, CONSOLE_SIGN_INS_PER_MINUTE, "console-sign-in");
  if (error) throw error;
}

export function registerConsoleSession(app: FastifyInstance, deps: ServerDeps): void {
  const secure = (req: FastifyRequest) => deps.config.publicBaseUrl.startsWith("https:") || req.protocol === "https";
  // Before Connect's plugin reads the request: the cookie, from the console's origin, stands for the token.
  app.addHook("onRequest", async (req) => {
    if (req.headers.authorization !== undefined || !CONNECT_PATH.test(req.url)) return;
    const secret = cookieValue(req.headers.cookie, cookieName(secure(req)));
    if (!secret || !fromOwnOrigin(req, deps.config.publicBaseUrl)) return;
    req.raw.headers.authorization = `Bearer ${secret}`;
    tokenFromCookie.add(req.raw);
  });

  app.post(CONSOLE_SESSION_ROUTE, async (req, reply) => {
    if (!fromOwnOrigin(req, deps.config.publicBaseUrl)) throw fail.denied("sign in from the console's own page");
    const principal = await signingIn(deps, req);
    await limitSignIns(deps, principal);
    const { doc, secret } = newConsoleSession(principal);
    await deps.store.directory.consoleSessions.insert(doc);
    const maxAgeS = Math.floor((doc.expiresAt.getTime() - Date.now()) / 1000);
    reply.header("set-cookie", sessionCookie(secret, maxAgeS, secure(req))).header("cache-control", "no-store");
    const { user } = principal;
    return reply.code(201).send({ user: { id: user._id, email: user.email, name: user.name }, expiresAt: doc.expiresAt.toISOString() });
  });

  // Who is signed in (the page cannot read its HttpOnly cookie): `{}` when nobody is (no error to log on every visit).
  // A cookie that names no session counts as a failed authentication, as any bad token does: guessing
  // here costs a read of the database each time, so it is limited like guessing anywhere else.
  app.get(CONSOLE_SESSION_ROUTE, async (req, reply) => {
    reply.header("cache-control", "no-store");
    const secret = cookieValue(req.headers.cookie, cookieName(secure(req)));
    if (!secret) return {};
    refuseIfThrottled(deps, req);
    const view = deps.store.directory.view();
    try {
      const session = await consoleSession(view, `Bearer ${secret}`);
      const { user } = await authenticateApp(view, `Bearer ${secret}`);
      return { user: { id: user._id, email: user.email, name: user.name }, expiresAt: session.expiresAt.toISOString() };
    } catch (err) {
      if (codeOf(err) !== Code.Unauthenticated) throw err;
      deps.authFailures.fail(req.clientAddress);
      return {};
    }
  });

  app.delete(CONSOLE_SESSION_ROUTE, async (req, reply) => {
    if (!fromOwnOrigin(req, deps.config.publicBaseUrl)) throw fail.denied("sign out from the console's own page");
    const secret = cookieValue(req.headers.cookie, cookieName(secure(req)));
    const view = deps.store.directory.view();
    const session = secret ? await consoleSession(view, `Bearer ${secret}`).catch(() => null) : null;
    if (session) await deps.store.directory.consoleSessions.remove((await view.users.get(session.userId))?.organizationId ?? null, session._id);
    return reply
      .header("set-cookie", sessionCookie("", 0, secure(req)))
      .code(204)
      .send();
  });
}

/** The console's page and its two files, with the headers that keep them to themselves. */
export function registerConsolePages(app: FastifyInstance, assets: ConsoleAssets): void {
  const send = (req: FastifyRequest, reply: FastifyReply, name: string) => {
    const file = assets.files.get(name)!;
    reply
      .header("content-security-policy", CONSOLE_CSP)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("x-frame-options", "DENY")
      .header("cache-control", "no-cache")
      .header("etag", file.etag)
      .header("vary", "accept-encoding")
      .type(file.type);
    if (req.headers["if-none-match"] === file.etag) return reply.code(304).send();
    if (!/\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""))) return reply.send(file.body);
    return reply.header("content-encoding", "gzip").send(file.gzipped);
  };
  app.get(CONSOLE_ROUTE, (req, reply) => send(req, reply, "index.html"));
  app.get(`${CONSOLE_ROUTE}/assets/:name`, (req, reply) => {
    const { name } = req.params as { name: string };
    if (name === "index.html" || !assets.files.has(name)) throw fail.notFound(`no console file ${name}`);
    return send(req, reply, name);
  });
}
