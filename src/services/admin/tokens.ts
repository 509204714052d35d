// AdminService: application tokens (a user's) and API tokens (a project's, an organization's).
import { randomUUID } from "node:crypto";
import { API_TOKEN_PREFIX, APP_TOKEN_PREFIX, newToken, ORG_API_TOKEN_PREFIX } from "../../domain/auth/tokens.js";
import type * as T from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import {
  assertMayIssueApiToken,
  assertMayIssueSsoToken,
  assertMayIssueTokensForOthers,
  assertOrgAdmin,
  mayRevokeAppToken,
  ssoTokenExpiry,
} from "../../domain/auth/access.js";
import type { AppPrincipal } from "../../domain/auth/tokens.js";
import { adminLog, adminLogAboutUser, caller, inProject, projectOf, reader, required, requireOperator, userInOrg, type AdminImpl } from "./common.js";
import { ApiTokenSchema, ApplicationTokenSchema, OrganizationApiTokenSchema } from "../../../gen/runhook/v1/admin_pb.js";
import { apiTokenToProto, appTokenToProto, orgApiTokenToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";

const DAY_MS = 86_400_000;
const MIN_TTL_S = 60;
const MAX_TTL_S = 31_536_000;
export const DEFAULT_TOKEN_TTL_MS = 90 * DAY_MS;

/** Stores a new application token for `user`; returns the document and the plaintext (shown once). */
export async function issueAppToken(
  deps: Deps,
  user: T.UserDoc,
  opts: { name: string; ttlMs: number; sso: boolean; now?: Date },
): Promise<{ doc: T.AppTokenDoc; plaintext: string }> {
  const id = randomUUID();
  const t = newToken(APP_TOKEN_PREFIX, id);
  const now = opts.now ?? new Date();
  const doc: T.AppTokenDoc = {
    _id: id,
    hash: t.hash,
    userId: user._id,
    name: opts.name,
    expiresAt: new Date(now.getTime() + opts.ttlMs),
    revokedAt: null,
    createdAt: now,
    sso: opts.sso,
  };
  await deps.store.directory.appTokens.insert(doc);
  return { doc, plaintext: t.plaintext };
}

function ttlMs(seconds: number): number {
  if (seconds === 0) return DEFAULT_TOKEN_TTL_MS;
  if (seconds < MIN_TTL_S || seconds > MAX_TTL_S) throw fail.invalid(`ttl_seconds: must be 0 (90 days) or ${MIN_TTL_S} to ${MAX_TTL_S} seconds`);
  return seconds * 1000;
}

/**
 * The lifetime of a new token: as asked (ttlMs), except that a token that carries its maker's
 * SSO session (an SSO application token, an API token made in an SSO session) never outlives
 * the session's own token (ssoTokenExpiry).
 */
function tokenTtlMs(caller: AppPrincipal, carriesSso: boolean, seconds: number, now: Date): number {
  const ms = ttlMs(seconds);
  if (!carriesSso) return ms;
  return ssoTokenExpiry(caller.token, { ms, isDefault: seconds === 0 }, now).getTime() - now.getTime();
}

function tokenName(name: string, fallback: string): string {
  const n = name.trim() || fallback;
  if (n.length > 100) throw fail.invalid("name: at most 100 characters");
  return n;
}

/**
 * A new API token of `creator` (a project's or an organization's, by `prefix`): the fields both
 * kinds store (the hash, never the plaintext) and the plaintext, shown once.
 */
function newApiToken(prefix: string, creator: T.UserDoc, req: { name: string }, fallbackName: string, lifetime: { ttlMs: number; now: Date }) {
  const name = tokenName(req.name, fallbackName);
  const id = randomUUID();
  const t = newToken(prefix, id);
  const { now } = lifetime;
  const fields: T.TokenDocBase = {
    _id: id,
    hash: t.hash,
    userId: creator._id,
    name,
    expiresAt: new Date(now.getTime() + lifetime.ttlMs),
    revokedAt: null,
    createdAt: now,
  };
  return { fields, plaintext: t.plaintext };
}

export function tokenMethods(
  deps: Deps,
): Pick<
  AdminImpl,
  | "createApplicationToken"
  | "issueSsoToken"
  | "revokeApplicationToken"
  | "createApiToken"
  | "revokeApiToken"
  | "createOrganizationApiToken"
  | "revokeOrganizationApiToken"
> {
  return { ...appTokenMethods(deps), ...apiTokenMethods(deps), ...orgApiTokenMethods(deps) };
}

/** The creators of `tokens`, as their messages name them (one read of the users). */
async function creatorsOf(deps: Deps, tokens: T.TokenDocBase[]) {
  const users = new Map((await deps.store.directory.users.byIds([...new Set(tokens.map((t) => t.userId))])).map((u) => [u._id, u]));
  return (t: T.TokenDocBase) => users.get(t.userId) ?? { _id: t.userId, email: "" };
}

/**
 * Reading tokens (never their secret or hash): as revoking them. A user's application tokens by
 * that user, or any user's of the organization by an organization admin (mayRevokeAppToken); a
 * project's API tokens by its admins; the organization's API tokens by organization admins.
 */
export function tokenReads(
  deps: Deps,
): Pick<
  AdminImpl,
  "listApplicationTokens" | "getApplicationToken" | "listApiTokens" | "getApiToken" | "listOrganizationApiTokens" | "getOrganizationApiToken"
> {
  const dir = deps.store.directory;
  return {
    async listApplicationTokens(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const owner = req.userId && req.userId !== p.user._id ? await userInOrg(view, p, req.userId) : p.user;
      if (!mayRevokeAppToken(p.user, owner)) throw fail.denied("only organization admins see other users' tokens");
      const page = pageOf(deps, p, { list: "applicationTokens", userId: owner._id }, req);
      const docs = await dir.appTokens.ofUser(owner._id, page.after, page.read);
      const { items, nextPageToken } = await page.cut(docs, byId, ApplicationTokenSchema, (t) => appTokenToProto(t, owner));
      return { applicationTokens: items, nextPageToken };
    },

    async getApplicationToken(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const token = await dir.appTokens.get(required(req.tokenId, "token_id"));
      const owner = token ? await view.users.get(token.userId) : null;
      // Tokens the caller may not see are not found, like unknown ones.
      if (!token || !owner || !mayRevokeAppToken(p.user, owner)) throw fail.notFound(`token "${req.tokenId}" not found`);
      return { token: appTokenToProto(token, owner) };
    },

    async listApiTokens(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const project = await inProject(view, p, req.projectId, "admin");
      const page = pageOf(deps, p, { list: "apiTokens", projectId: project._id }, req);
      const docs = await dir.apiTokens.ofProject(project._id, page.after, page.read);
      const creator = await creatorsOf(deps, docs);
      const { items, nextPageToken } = await page.cut(docs, byId, ApiTokenSchema, (t) => apiTokenToProto(t, creator(t)));
      return { apiTokens: items, nextPageToken };
    },

    async getApiToken(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const token = await dir.apiTokens.get(required(req.tokenId, "token_id"));
      await projectOf(view, p, token?.projectId, "admin", `API token "${req.tokenId}"`);
      return { token: apiTokenToProto(token!, (await creatorsOf(deps, [token!]))(token!)) };
    },

    async listOrganizationApiTokens(req, ctx) {
      const { p } = await reader(deps, ctx);
      assertOrgAdmin(p.user);
      const page = pageOf(deps, p, { list: "organizationApiTokens" }, req);
      const docs = await dir.orgApiTokens.ofOrganization(p.user.organizationId, page.after, page.read);
      const creator = await creatorsOf(deps, docs);
      const { items, nextPageToken } = await page.cut(docs, byId, OrganizationApiTokenSchema, (t) => orgApiTokenToProto(t, creator(t)));
      return { organizationApiTokens: items, nextPageToken };
    },

    async getOrganizationApiToken(req, ctx) {
      const { p } = await reader(deps, ctx);
      const token = await dir.orgApiTokens.get(required(req.tokenId, "token_id"));
      if (!token || token.organizationId !== p.user.organizationId) throw fail.notFound(`organization API token "${req.tokenId}" not found`);
      assertOrgAdmin(p.user);
      return { token: orgApiTokenToProto(token, (await creatorsOf(deps, [token]))(token)) };
    },
  };
}

function appTokenMethods(deps: Deps): Pick<AdminImpl, "createApplicationToken" | "issueSsoToken" | "revokeApplicationToken"> {
  const dir = deps.store.directory;
  return {
    async createApplicationToken(req, ctx) {
      const p = await caller(dir, ctx);
      let owner = p.user;
      if (req.userId && req.userId !== p.user._id) {
        assertMayIssueTokensForOthers(p.user);
        owner = await userInOrg(dir, p, req.userId);
      }
      if (req.sso) assertMayIssueSsoToken(p, owner._id);
      const name = tokenName(req.name, "token");
      const now = new Date();
      const ttl = tokenTtlMs(p, req.sso, req.ttlSeconds, now);
      const { doc, plaintext } = await issueAppToken(deps, owner, { name, ttlMs: ttl, sso: req.sso, now });
      await adminLogAboutUser(deps, p.user, owner, "token.created", `token/${doc._id}`, {
        userId: owner._id,
        email: owner.email,
        name,
        sso: doc.sso,
        expiresAt: doc.expiresAt.toISOString(),
      });
      return { token: appTokenToProto(doc, owner), plaintext };
    },

    // The identity provider's stand-in: the operator secret vouches for the login.
    async issueSsoToken(req, ctx) {
      requireOperator(deps, ctx, "IssueSsoToken");
      const user = await dir.users.get(required(req.userId, "user_id"));
      if (!user) throw fail.notFound(`user "${req.userId}" not found`);
      const name = tokenName(req.name, "sso token");
      const { doc, plaintext } = await issueAppToken(deps, user, { name, ttlMs: ttlMs(req.ttlSeconds), sso: true });
      await adminLogAboutUser(deps, user, user, "token.created", `token/${doc._id}`, {
        userId: user._id,
        email: user.email,
        name,
        sso: true,
        issuedBy: "operator",
        expiresAt: doc.expiresAt.toISOString(),
      });
      return { token: appTokenToProto(doc, user), plaintext };
    },

    async revokeApplicationToken(req, ctx) {
      const p = await caller(dir, ctx);
      const token = await dir.appTokens.get(required(req.tokenId, "token_id"));
      const owner = token ? await dir.users.get(token.userId) : null;
      // Tokens the caller may not revoke are not found, like unknown ones.
      if (!token || !owner || !mayRevokeAppToken(p.user, owner)) throw fail.notFound(`token "${req.tokenId}" not found`);
      const revokedAt = new Date();
      if (await dir.appTokens.revoke(owner.organizationId, token._id, revokedAt))
        await adminLogAboutUser(deps, p.user, owner, "token.revoked", `token/${token._id}`, { userId: owner._id, email: owner.email, name: token.name });
      const after = (await dir.appTokens.get(token._id)) ?? { ...token, revokedAt };
      return { token: appTokenToProto(after, owner) };
    },
  };
}

function apiTokenMethods(deps: Deps): Pick<AdminImpl, "createApiToken" | "revokeApiToken"> {
  const dir = deps.store.directory;
  return {
    async createApiToken(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      assertMayIssueApiToken(p, project);
      const now = new Date();
      const sso = p.token.sso;
      const { fields, plaintext } = newApiToken(API_TOKEN_PREFIX, p.user, req, "api token", { ttlMs: tokenTtlMs(p, sso, req.ttlSeconds, now), now });
      // Recorded, so that a project that comes to require SSO refuses the tokens made without it.
      const doc: T.ApiTokenDoc = { ...fields, projectId: project._id, sso, ...(sso ? { ssoTokenId: p.token._id } : {}) };
      await dir.apiTokens.insert(doc);
      await adminLog(
        deps,
        p.user,
        "api_token.created",
        `api_token/${doc._id}`,
        { name: doc.name, expiresAt: doc.expiresAt.toISOString() },
        { projectId: project._id },
      );
      return { token: apiTokenToProto(doc, p.user), plaintext };
    },

    async revokeApiToken(req, ctx) {
      const p = await caller(dir, ctx);
      const token = await dir.apiTokens.get(required(req.tokenId, "token_id"));
      if (!token) throw fail.notFound(`API token "${req.tokenId}" not found`);
      const project = await inProject(dir, p, token.projectId, "admin");
      const revokedAt = new Date();
      if (await dir.apiTokens.revoke(project.organizationId, token._id, revokedAt))
        await adminLog(deps, p.user, "api_token.revoked", `api_token/${token._id}`, { name: token.name }, { projectId: project._id });
      const [after, creator] = await Promise.all([dir.apiTokens.get(token._id), dir.users.get(token.userId)]);
      return { token: apiTokenToProto(after ?? { ...token, revokedAt }, creator ?? { _id: token.userId, email: "" }) };
    },
  };
}

/**
 * Organization API tokens: made and revoked by organization admins only (no project role is
 * needed, and an organization has no SSO requirement of its own: a project's requires_sso
 * governs that project's tokens, and this token reads no project). Their entries go to the
 * organization's own admin log, the one stream such a token reads.
 */
function orgApiTokenMethods(deps: Deps): Pick<AdminImpl, "createOrganizationApiToken" | "revokeOrganizationApiToken"> {
  const dir = deps.store.directory;
  return {
    async createOrganizationApiToken(req, ctx) {
      const p = await caller(dir, ctx);
      assertOrgAdmin(p.user);
      const now = new Date();
      const { fields, plaintext } = newApiToken(ORG_API_TOKEN_PREFIX, p.user, req, "organization api token", { ttlMs: ttlMs(req.ttlSeconds), now });
      const doc: T.OrgApiTokenDoc = { ...fields, organizationId: p.user.organizationId };
      await dir.orgApiTokens.insert(doc);
      await adminLog(deps, p.user, "org_api_token.created", `org_api_token/${doc._id}`, { name: doc.name, expiresAt: doc.expiresAt.toISOString() });
      return { token: orgApiTokenToProto(doc, p.user), plaintext };
    },

    async revokeOrganizationApiToken(req, ctx) {
      const p = await caller(dir, ctx);
      const token = await dir.orgApiTokens.get(required(req.tokenId, "token_id"));
      // Another organization's token is not found, like an unknown one.
      if (!token || token.organizationId !== p.user.organizationId) throw fail.notFound(`organization API token "${req.tokenId}" not found`);
      assertOrgAdmin(p.user);
      const revokedAt = new Date();
      if (await dir.orgApiTokens.revoke(token.organizationId, token._id, revokedAt))
        await adminLog(deps, p.user, "org_api_token.revoked", `org_api_token/${token._id}`, { name: token.name });
      const [after, creator] = await Promise.all([dir.orgApiTokens.get(token._id), dir.users.get(token.userId)]);
      return { token: orgApiTokenToProto(after ?? { ...token, revokedAt }, creator ?? { _id: token.userId, email: "" }) };
    },
  };
}
