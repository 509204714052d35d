// AdminService: organizations, projects, users, roles, collections, workflows, webhooks, tokens.
import { randomUUID, timingSafeEqual, createHash } from "node:crypto";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import { APP_TOKEN_PREFIX, bearer, newToken } from "../auth/tokens.js";
import { isDuplicateKey } from "../db/mongo.js";
import type { AppTokenDoc, UserDoc } from "../db/types.js";
import { authorization, type Deps } from "../deps.js";
import { fail } from "../errors.js";
import { writeAdmin } from "../logs/writer.js";

const DAY_MS = 86_400_000;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

function sameSecret(given: string, expected: string): boolean {
  // Hash both so the comparison is constant-time whatever the lengths.
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

export function userToProto(u: UserDoc) {
  return { id: u._id, organizationId: u.organizationId, email: u.email, name: u.name, organizationAdmin: u.organizationAdmin };
}

export function appTokenToProto(t: AppTokenDoc, user: UserDoc) {
  return {
    id: t._id,
    user: { id: user._id, email: user.email },
    name: t.name,
    expiresAt: timestampFromDate(t.expiresAt),
    sso: t.sso,
    revokedAt: t.revokedAt ? timestampFromDate(t.revokedAt) : undefined,
    createdAt: timestampFromDate(t.createdAt),
  };
}

/** Stores a new application token for `user`; returns the document and the plaintext (shown once). */
export async function issueAppToken(deps: Deps, user: UserDoc, opts: { name: string; ttlMs: number; sso: boolean }): Promise<{ doc: AppTokenDoc; plaintext: string }> {
  const t = newToken(APP_TOKEN_PREFIX);
  const now = new Date();
  const doc: AppTokenDoc = { _id: randomUUID(), hash: t.hash, userId: user._id, name: opts.name, expiresAt: new Date(now.getTime() + opts.ttlMs), revokedAt: null, createdAt: now, sso: opts.sso };
  await deps.db.appTokens.insertOne(doc);
  return { doc, plaintext: t.plaintext };
}

export function createAdminService(deps: Deps): ServiceImpl<typeof AdminService> {
  const { db } = deps;
  const notYet = () => {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  };
  const impl = Object.fromEntries(AdminService.methods.map((m) => [m.localName, notYet])) as unknown as ServiceImpl<typeof AdminService>;

  impl.bootstrap = async (req, ctx: HandlerContext) => {
    const secret = bearer(authorization(ctx));
    if (!secret || !sameSecret(secret, deps.config.bootstrapSecret)) throw fail.unauthenticated("Bootstrap needs the operator secret as bearer token");
    const orgName = req.organizationName.trim();
    if (!NAME.test(orgName)) throw fail.invalid("organization_name: 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit");
    if (!EMAIL.test(req.adminEmail)) throw fail.invalid("admin_email: not an e-mail address");
    const now = new Date();
    const org = { _id: randomUUID(), name: orgName, createdAt: now };
    try {
      await db.organizations.insertOne(org);
    } catch (err) {
      if (isDuplicateKey(err)) throw fail.exists(`organization "${orgName}" exists`);
      throw err;
    }
    const admin: UserDoc = { _id: randomUUID(), organizationId: org._id, email: req.adminEmail.toLowerCase(), name: req.adminName || req.adminEmail, organizationAdmin: true, createdAt: now };
    try {
      await db.users.insertOne(admin);
    } catch (err) {
      await db.organizations.deleteOne({ _id: org._id });
      if (isDuplicateKey(err)) throw fail.exists(`user "${admin.email}" exists`);
      throw err;
    }
    const token = await issueAppToken(deps, admin, { name: "bootstrap", ttlMs: 90 * DAY_MS, sso: false });
    const actor = { id: admin._id, email: admin.email };
    await writeAdmin(db, { organizationId: org._id, projectId: null, environment: null, actor, action: "organization.created", target: `organization/${org._id}`, details: { name: org.name } });
    await writeAdmin(db, { organizationId: org._id, projectId: null, environment: null, actor, action: "token.created", target: `token/${token.doc._id}`, details: { userId: admin._id, name: "bootstrap" } });
    return { organization: { id: org._id, name: org.name }, admin: userToProto(admin), adminToken: token.plaintext };
  };

  return impl;
}
