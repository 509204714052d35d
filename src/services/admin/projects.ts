// AdminService: projects, their environments and who holds which role on them.
import { randomUUID } from "node:crypto";
import { isRole } from "../../domain/auth/roles.js";
import { isDuplicateKey } from "../../store/index.js";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { assertOrgAdmin, assertSsoSession, holdsProjectRole } from "../../domain/auth/access.js";
import { adminLog, caller, inProject, insertUnique, projectOf, reader, required, userInOrg, type AdminImpl } from "./common.js";
import { EnvironmentSchema, ProjectSchema } from "../../../gen/runhook/v1/admin_pb.js";
import { environmentToProto, projectToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";
import { DATA_DATABASE_NAME, isReservedDatabase } from "../../config.js";
import type { EnvironmentDoc, ProjectDoc } from "../../store/types.js";
import type { AppPrincipal } from "../../domain/auth/tokens.js";

const PROJECT_NAME = /^[A-Za-z0-9._-]{1,100}$/;

/** A page of the projects the caller sees: an organization admin's, all of the organization's; anyone else's, those it has a role on. */
async function visibleProjects(deps: Deps, p: AppPrincipal, after: string | undefined, read: number): Promise<ProjectDoc[]> {
  const dir = deps.store.directory;
  if (p.user.organizationAdmin) return dir.projects.list(p.user.organizationId, after, read);
  const roles = await dir.roles.ofUser(p.user._id, after, read);
  const projects = new Map((await dir.projects.byIds(roles.map((r) => r.projectId))).map((project) => [project._id, project]));
  // Every key stays, even of a project removed since, so that the page's last key is the roles'.
  return roles.map((r) => projects.get(r.projectId) ?? { _id: r.projectId, organizationId: "", name: "", requiresSso: false, createdAt: new Date(0) });
}

export function projectMethods(
  deps: Deps,
): Pick<AdminImpl, "createProject" | "updateProject" | "createEnvironment" | "setProjectRole"> & ReturnType<typeof projectReads> {
  return { ...projectChanges(deps), ...projectReads(deps) };
}

/** Projects: those the caller has a role on (organization admins: all); environments: project admins, who make them. */
/** An environment as the caller sees it: its data database only for the project's admins. */
const environmentShown = (admin: boolean) => (e: EnvironmentDoc) => ({ ...environmentToProto(e), dataDatabase: admin ? e.dataDatabase : "" });

function projectReads(deps: Deps): Pick<AdminImpl, "listProjects" | "getProject" | "listEnvironments" | "getEnvironment"> {
  const dir = deps.store.directory;
  return {
    async listProjects(req, ctx) {
      const { p } = await reader(deps, ctx);
      const page = pageOf(deps, p, { list: "projects" }, req);
      const docs = await visibleProjects(deps, p, page.after, page.read);
      const shown = (project: ProjectDoc) => (project.organizationId === p.user.organizationId ? projectToProto(project) : null);
      const { items, nextPageToken } = await page.cut(docs, byId, ProjectSchema, shown);
      return { projects: items, nextPageToken };
    },

    async getProject(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      return { project: projectToProto(await inProject(view, p, req.projectId, "user")) };
    },

    // Any role on the project sees its environments (their names are where its runs are
    // searched); which database holds the records, only its admins.
    async listEnvironments(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const project = await inProject(view, p, req.projectId, "user");
      const shown = environmentShown(await holdsProjectRole(view, p.user, project, "admin"));
      const page = pageOf(deps, p, { list: "environments", projectId: project._id }, req);
      const { items, nextPageToken } = await page.cut(await dir.environments.list(project._id, page.after, page.read), byId, EnvironmentSchema, shown);
      return { environments: items, nextPageToken };
    },

    async getEnvironment(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const environment = await deps.store.immutable.environment(required(req.environmentId, "environment_id"));
      const project = await projectOf(view, p, environment?.projectId, "user", `environment "${req.environmentId}"`);
      return { environment: environmentShown(await holdsProjectRole(view, p.user, project, "admin"))(environment!) };
    },
  };
}

function projectChanges(deps: Deps): Pick<AdminImpl, "createProject" | "updateProject" | "createEnvironment" | "setProjectRole"> {
  const dir = deps.store.directory;
  return {
    async createProject(req, ctx) {
      const p = await caller(dir, ctx);
      assertOrgAdmin(p.user);
      if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
      const project = await insertUnique(
        dir.projects.insert,
        { _id: randomUUID(), organizationId: p.user.organizationId, name: req.name, requiresSso: req.requiresSso, createdAt: new Date() },
        `project "${req.name}"`,
      );
      await adminLog(
        deps,
        p.user,
        "project.created",
        `project/${project._id}`,
        { name: project.name, requiresSso: project.requiresSso },
        { projectId: project._id },
      );
      return { project: projectToProto(project) };
    },

    async updateProject(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      if (req.requiresSso === undefined) return { project: projectToProto(project) };
      assertSsoSession(p.token, "changing requires_sso");
      const after = await dir.projects.setRequiresSso(project.organizationId, project._id, req.requiresSso);
      if (!after) throw fail.notFound(`project "${req.projectId}" not found`);
      await adminLog(deps, p.user, "project.updated", `project/${project._id}`, { requiresSso: req.requiresSso }, { projectId: project._id });
      return { project: projectToProto(after) };
    },

    async createEnvironment(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      if (!PROJECT_NAME.test(req.name)) throw fail.invalid("name: 1-100 letters, digits, '.', '_' or '-'");
      const _id = randomUUID();
      const dataDatabase = dataDatabaseFor(deps, project, _id, req.dataDatabase);
      const environment = { _id, projectId: project._id, name: req.name, dataDatabase, createdAt: new Date() };
      try {
        await dir.environments.insert(environment);
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        // Either unique index: the name in the project, or the database of another environment.
        if (await dir.environments.byName(project._id, req.name)) throw fail.exists(`environment "${req.name}" already exists`);
        throw fail.exists(`data_database: "${dataDatabase}" is already the database of another environment`);
      }
      await adminLog(
        deps,
        p.user,
        "environment.created",
        `environment/${_id}`,
        { name: req.name, dataDatabase },
        { projectId: project._id, environment: req.name },
      );
      return { environment: environmentToProto(environment!) };
    },

    async setProjectRole(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      const user = await userInOrg(dir, p, req.userId);
      if (req.role === "") {
        await dir.roles.remove(project.organizationId, project._id, user._id);
      } else {
        if (!isRole(req.role)) throw fail.invalid(`role: "${req.role}" is not admin, editor, user or empty`);
        await dir.roles.set(project.organizationId, project._id, user._id, req.role);
      }
      await adminLog(deps, p.user, "project.role.changed", `user/${user._id}`, { email: user.email, role: req.role || null }, { projectId: project._id });
      return {};
    },
  };
}

/**
 * The data database of a new environment: one the server makes from its id, or (when the
 * request names one) a database the operator allowed for the project's organization in
 * configuration. Tenants never reach a database by naming it.
 */
function dataDatabaseFor(deps: Deps, project: ProjectDoc, environmentId: string, requested: string): string {
  if (!requested) return `${deps.store.databaseName}_d_${environmentId.replace(/-/g, "").slice(0, 12)}`;
  if (!DATA_DATABASE_NAME.test(requested)) throw fail.invalid("data_database: 1-63 letters, digits, '_' or '-'");
  // Never, even when listed: the service's own, MongoDB's, and the names it makes for environments.
  if (isReservedDatabase(requested, deps.store.databaseName))
    throw fail.invalid(`data_database: "${requested}" is reserved (the service's, MongoDB's, or one the server makes for an environment)`);
  if (deps.config.dataDatabasesAllowed.get(requested) !== project.organizationId) {
    throw fail.denied(
      `data_database: "${requested}" is not a database the operator allowed for this organization (RUNHOOK_DATA_DATABASES_ALLOWED); leave it empty for a database of its own`,
    );
  }
  return requested;
}
