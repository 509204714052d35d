// AdminService: projects, their environments and who holds which role on them.
import { randomUUID } from "node:crypto";
import { projectRoleId } from "../../domain/auth/access.js";
import { isRole, type Role } from "../../domain/auth/roles.js";
import { isDuplicateKey, type Database } from "../../store/index.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../errors.js";
import { adminLog, caller, inProject, insertUnique, requireOrgAdmin, userInOrg, type AdminImpl } from "./common.js";
import { environmentToProto, projectToProto } from "./convert.js";

const PROJECT_NAME = /^[A-Za-z0-9._-]{1,100}$/;
const DATABASE_NAME = /^[A-Za-z0-9_-]{1,63}$/;

async function upsertProjectRole(db: Database, projectId: string, userId: string, role: Role): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await db.projectRoles.updateOne({ _id: projectRoleId(projectId, userId) }, { $set: { role }, $setOnInsert: { projectId, userId } }, { upsert: true });
      return;
    } catch (err) {
      if (!isDuplicateKey(err) || attempt > 2) throw err; // two upserts raced: the loser updates
    }
  }
}

export function projectMethods(deps: Deps): Pick<AdminImpl, "createProject" | "updateProject" | "createEnvironment" | "setProjectRole"> {
  const { db } = deps;
  return {
    async createProject(req, ctx) {
      const p = await caller(db, ctx);
      requireOrgAdmin(p);
      if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
      const project = await insertUnique(db.projects, { _id: randomUUID(), organizationId: p.user.organizationId, name: req.name, requiresSso: req.requiresSso, createdAt: new Date() }, `project "${req.name}"`);
      await adminLog(deps, p.user, "project.created", `project/${project._id}`, { name: project.name, requiresSso: project.requiresSso }, { projectId: project._id });
      return { project: projectToProto(project) };
    },

    async updateProject(req, ctx) {
      const p = await caller(db, ctx);
      const project = await inProject(db, p, req.projectId, "admin");
      if (req.requiresSso === undefined) return { project: projectToProto(project) };
      const after = await db.projects.findOneAndUpdate({ _id: project._id }, { $set: { requiresSso: req.requiresSso } }, { returnDocument: "after" });
      if (!after) throw fail.notFound(`project "${req.projectId}" not found`);
      await adminLog(deps, p.user, "project.updated", `project/${project._id}`, { requiresSso: req.requiresSso }, { projectId: project._id });
      return { project: projectToProto(after) };
    },

    async createEnvironment(req, ctx) {
      const p = await caller(db, ctx);
      const project = await inProject(db, p, req.projectId, "admin");
      if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
      const _id = randomUUID();
      const dataDatabase = req.dataDatabase || `${db.name}_d_${_id.replace(/-/g, "").slice(0, 12)}`;
      if (!DATABASE_NAME.test(dataDatabase)) throw fail.invalid("data_database: 1-63 letters, digits, '_' or '-'");
      if (["admin", "local", "config", db.name].includes(dataDatabase)) throw fail.invalid(`data_database: "${dataDatabase}" is reserved`);
      const environment = await insertUnique(db.environments, { _id, projectId: project._id, name: req.name, dataDatabase, createdAt: new Date() }, `environment "${req.name}"`);
      await adminLog(deps, p.user, "environment.created", `environment/${_id}`, { name: req.name, dataDatabase }, { projectId: project._id, environment: req.name });
      return { environment: environmentToProto(environment) };
    },

    async setProjectRole(req, ctx) {
      const p = await caller(db, ctx);
      const project = await inProject(db, p, req.projectId, "admin");
      const user = await userInOrg(db, p, req.userId);
      if (req.role === "") {
        await db.projectRoles.deleteOne({ _id: projectRoleId(project._id, user._id) });
      } else {
        if (!isRole(req.role)) throw fail.invalid(`role: "${req.role}" is not admin, editor, user or empty`);
        await upsertProjectRole(db, project._id, user._id, req.role);
      }
      await adminLog(deps, p.user, "project.role.changed", `user/${user._id}`, { email: user.email, role: req.role || null }, { projectId: project._id });
      return {};
    },
  };
}
