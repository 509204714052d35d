// AdminService: the users of an organization.
import { randomUUID } from "node:crypto";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { assertOrgAdmin } from "../../domain/auth/access.js";
import { adminLogAboutUser, caller, EMAIL, insertUnique, type AdminImpl } from "./common.js";
import { userToProto } from "./convert.js";

export function userMethods(deps: Deps): Pick<AdminImpl, "createUser"> {
  const dir = deps.store.directory;
  return {
    async createUser(req, ctx) {
      const p = await caller(dir, ctx);
      assertOrgAdmin(p.user);
      const email = req.email.trim().toLowerCase();
      if (!EMAIL.test(email)) throw fail.invalid("email: not an e-mail address");
      const name = req.name.trim() || email;
      if (name.length > 200) throw fail.invalid("name: at most 200 characters");
      const user = await insertUnique(
        dir.users.insert,
        { _id: randomUUID(), organizationId: p.user.organizationId, email, name, organizationAdmin: req.organizationAdmin, createdAt: new Date() },
        `user "${email}"`,
      );
      await adminLogAboutUser(deps, p.user, user, "user.created", `user/${user._id}`, { email, organizationAdmin: user.organizationAdmin });
      return { user: userToProto(user) };
    },
  };
}
