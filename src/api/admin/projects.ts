// AdminService: projects, their environments and who holds which role on them.
import { randomUUID } from "node:crypto";
import { isRole, type Role } from "../../domain/auth/roles.js";
import { isDuplicateKey } from "../../store/index.js";
import type { DirectoryStore } from "../../store/directory.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../errors.js";
import { adminLog, caller, inProject, insertUnique, requireOrgAdmin, requireSsoSession, userInOrg, type AdminImpl } from "./common.js";
import { environmentToProto, projectToProto } from "./convert.js";

const PROJECT_NAME = /^[A-Za-z0-9._-]{1,100}$/;
const DATABASE_NAME = /^[A-Za-z0-9_-]{1,63}$/;

export function projectMethods(deps: Deps): Pick<AdminImpl, "createProject" | "updateProject" | "createEnvironment" | "setProjectRole"> {
  const dir = deps.store.directory;
  return {
    async createProject(req, ctx) {
      const p = await caller(dir, ctx);
      requireOrgAdmin(p);
      if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
      const project = await insertUnique(dir.projects.insert, { _id: randomUUID(), organizationId: p.user.organizationId, name: req.name, requiresSso: req.requiresSso, createdAt: new Date() }, `project "${req.name}"`);
      await adminLog(deps, p.user, "project.created", `project/${project._id}`, { name: project.name, requiresSso: project.requiresSso }, { projectId: project._id });
      return { project: projectToProto(project) };
    },

    async updateProject(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      if (req.requiresSso === undefined) return { project: projectToProto(project) };
      requireSsoSession(p, "changing requires_sso");
      const after = await dir.projects.setRequiresSso(project._id, req.requiresSso);
      if (!after) throw fail.notFound(`project "${req.projectId}" not found`);
      await adminLog(deps, p.user, "project.updated", `project/${project._id}`, { requiresSso: req.requiresSso }, { projectId: project._id });
      return { project: projectToProto(after) };
    },

    async createEnvironment(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
      const _id = randomUUID();
      const dataDatabase = req.dataDatabase || `${deps.store.databaseName}_d_${_id.replace(/-/g, "").slice(0, 12)}`;
      if (!DATABASE_NAME.test(dataDatabase)) throw fail.invalid("data_database: 1-63 letters, digits, '_' or '-'");
      if (["admin", "local", "config", deps.store.databaseName].includes(dataDatabase)) throw fail.invalid(`data_database: "${dataDatabase}" is reserved`);
      const environment = await insertUnique(dir.environments.insert, { _id, projectId: project._id, name: req.name, dataDatabase, createdAt: new Date() }, `environment "${req.name}"`);
      await adminLog(deps, p.user, "environment.created", `environment/${_id}`, { name: req.name, dataDatabase }, { projectId: project._id, environment: req.name });
      return { environment: environmentToProto(environment) };
    },

    async setProjectRole(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      const user = await userInOrg(dir, p, req.userId);
      if (req.role === "") {
        await dir.roles.remove(project._id, user._id);
      } else {
        if (!isRole(req.role)) throw fail.invalid(`role: "${req.role}" is not admin, editor, user or empty`);
        await dir.roles.set(project._id, user._id, req.role);
      }
      await adminLog(deps, p.user, "project.role.changed", `user/${user._id}`, { email: user.email, role: req.role || null }, { projectId: project._id });
      return {};
    },
  };
}
