// AdminService: bootstrap, the one method the operator calls (with the bootstrap secret) to
// create an organization, its first admin and that admin's token.
import { randomUUID } from "node:crypto";
import { isDuplicateKey } from "../../store/index.js";
import type { UserDoc } from "../../store/types.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, EMAIL, reader, requireOperator, type AdminImpl } from "./common.js";
import { appTokenToProto, userToProto } from "./convert.js";
import { MAX_PAGE_SIZE } from "./paging.js";
import type { DirectoryStore } from "../../store/directory.js";
import { DEFAULT_TOKEN_TTL_MS, issueAppToken } from "./tokens.js";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** Every role of the user, with its project's name, by project id. */
async function rolesOf(dir: DirectoryStore, user: UserDoc) {
  const roles: { projectId: string; projectName: string; role: string }[] = [];
  for (let after: string | undefined; ; ) {
    const page = await dir.roles.ofUser(user._id, after, MAX_PAGE_SIZE);
    const names = new Map((await dir.projects.byIds(page.map((r) => r.projectId))).map((project) => [project._id, project.name]));
    for (const r of page) if (names.has(r.projectId)) roles.push({ projectId: r.projectId, projectName: names.get(r.projectId)!, role: r.role });
    if (page.length < MAX_PAGE_SIZE) return roles;
    after = page[page.length - 1]!.projectId;
  }
}

export function organizationMethods(deps: Deps): Pick<AdminImpl, "bootstrap" | "whoAmI" | "getOrganization"> {
  const dir = deps.store.directory;
  return {
    async whoAmI(_req, ctx) {
      const { p } = await reader(deps, ctx);
      const [org, roles] = await Promise.all([dir.organizations.get(p.user.organizationId), rolesOf(dir, p.user)]);
      if (!org) throw fail.notFound("the caller's organization no longer exists");
      return { user: userToProto(p.user), organization: { id: org._id, name: org.name }, roles, token: appTokenToProto(p.token, p.user) };
    },

    async getOrganization(_req, ctx) {
      const { p } = await reader(deps, ctx);
      const org = await dir.organizations.get(p.user.organizationId);
      if (!org) throw fail.notFound("the caller's organization no longer exists");
      return { organization: { id: org._id, name: org.name } };
    },

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
