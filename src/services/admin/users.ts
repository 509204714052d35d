// AdminService: the users of an organization.
import { randomUUID } from "node:crypto";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { assertOrgAdmin } from "../../domain/auth/access.js";
import { adminLogAboutUser, caller, EMAIL, insertUnique, reader, userInOrg, type AdminImpl } from "./common.js";
import { UserSchema } from "../../../gen/runhook/v1/admin_pb.js";
import { userToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";

export function userMethods(deps: Deps): Pick<AdminImpl, "createUser" | "listUsers" | "getUser"> {
  const dir = deps.store.directory;
  return {
    // Organization admins, who create them.
    async listUsers(req, ctx) {
      const { p } = await reader(deps, ctx);
      assertOrgAdmin(p.user);
      const page = pageOf(deps, p, { list: "users" }, req);
      const { items, nextPageToken } = await page.cut(await dir.users.list(p.user.organizationId, page.after, page.read), byId, UserSchema, userToProto);
      return { users: items, nextPageToken };
    },

    async getUser(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const user = await userInOrg(view, p, req.userId);
      assertOrgAdmin(p.user);
      return { user: userToProto(user) };
    },

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
