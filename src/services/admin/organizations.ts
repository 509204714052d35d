// AdminService: bootstrap, the one method the operator calls (with the bootstrap secret) to
// create an organization, its first admin and that admin's token.
import { randomUUID } from "node:crypto";
import { isDuplicateKey } from "../../store/index.js";
import type { UserDoc } from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, EMAIL, requireOperator, type AdminImpl } from "./common.js";
import { userToProto } from "./convert.js";
import { DEFAULT_TOKEN_TTL_MS, issueAppToken } from "./tokens.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export function organizationMethods(deps: Deps): Pick<AdminImpl, "bootstrap"> {
  const dir = deps.store.directory;
  return {
    async bootstrap(req, ctx) {
      // Switched off, the secret is not even compared: nothing left to guess.
      if (!deps.config.bootstrap) throw fail.denied("Bootstrap is switched off on this server (RUNHOOK_BOOTSTRAP=off)");
      requireOperator(deps, ctx, "Bootstrap");
      const orgName = req.organizationName.trim();
      if (!NAME.test(orgName)) throw fail.invalid("organization_name: 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit");
      if (!EMAIL.test(req.adminEmail)) throw fail.invalid("admin_email: not an e-mail address");
      const now = new Date();
      const org = { _id: randomUUID(), name: orgName, createdAt: now };
      try {
        await dir.organizations.insert(org);
      } catch (err) {
        if (isDuplicateKey(err)) throw fail.exists(`organization "${orgName}" exists`);
        throw err;
      }
      const admin: UserDoc = {
        _id: randomUUID(),
        organizationId: org._id,
        email: req.adminEmail.toLowerCase(),
        name: req.adminName || req.adminEmail,
        organizationAdmin: true,
        createdAt: now,
      };
      try {
        await dir.users.insert(admin);
      } catch (err) {
        await dir.organizations.remove(org._id);
        if (isDuplicateKey(err)) throw fail.exists(`user "${admin.email}" exists`);
        throw err;
      }
      const token = await issueAppToken(deps, admin, { name: "bootstrap", ttlMs: DEFAULT_TOKEN_TTL_MS, sso: false });
      await adminLog(deps, admin, "organization.created", `organization/${org._id}`, { name: org.name });
      await adminLog(deps, admin, "token.created", `token/${token.doc._id}`, { userId: admin._id, name: "bootstrap" });
      return { organization: { id: org._id, name: org.name }, admin: userToProto(admin), adminToken: token.plaintext };
    },
  };
}
