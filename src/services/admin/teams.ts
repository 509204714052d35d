// AdminService: teams, their members and their renderings (a team's view of one environment).
import { randomUUID } from "node:crypto";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, caller, inProject, insertUnique, projectOf, reader, required, teamOf, userInOrg, type AdminImpl } from "./common.js";
import { RenderingSchema, TeamSchema, UserSchema } from "../../../gen/runhook/v1/admin_pb.js";
import { renderingToProto, teamToProto, userToProto } from "./convert.js";
import { byId, pageOf } from "./paging.js";
import { NO_TEAM } from "../../domain/teams.js";

export function teamMethods(deps: Deps): Pick<AdminImpl, "createTeam" | "setTeamMember" | "createRendering"> & ReturnType<typeof teamReads> {
  return { ...teamChanges(deps), ...teamReads(deps) };
}

/** Teams and their members: project admins (who make them); renderings: editors too (CreateWorkflow names one). */
function teamReads(deps: Deps): Pick<AdminImpl, "listTeams" | "getTeam" | "listTeamMembers" | "listRenderings" | "getRendering"> {
  const dir = deps.store.directory;
  return {
    async listTeams(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const project = await inProject(view, p, req.projectId, "admin");
      const page = pageOf(deps, p, { list: "teams", projectId: project._id }, req);
      const { items, nextPageToken } = await page.cut(await dir.teams.list(project._id, page.after, page.read), byId, TeamSchema, teamToProto);
      return { teams: items, nextPageToken };
    },

    async getTeam(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const team = await dir.teams.get(required(req.teamId, "team_id"));
      await projectOf(view, p, team?.projectId, "admin", `team "${req.teamId}"`);
      return { team: teamToProto(team!) };
    },

    async listTeamMembers(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const team = await dir.teams.get(required(req.teamId, "team_id"));
      await projectOf(view, p, team?.projectId, "admin", `team "${req.teamId}"`);
      const page = pageOf(deps, p, { list: "teamMembers", teamId: team!._id }, req);
      const ids = [...team!.memberIds]
        .sort()
        .filter((id) => page.after === undefined || id > page.after)
        .slice(0, page.read);
      const users = new Map((await dir.users.byIds(ids)).map((u) => [u._id, u]));
      // A member whose user is gone takes its place in the order, and is not shown.
      const shown = (id: string) => {
        const user = users.get(id);
        return user ? userToProto(user) : null;
      };
      const { items, nextPageToken } = await page.cut(ids, (id) => id, UserSchema, shown);
      return { users: items, nextPageToken };
    },

    async listRenderings(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const project = await inProject(view, p, req.projectId, "editor");
      if (req.environmentId) {
        const environment = await deps.store.immutable.environment(req.environmentId);
        if (environment?.projectId !== project._id) throw fail.notFound(`environment "${req.environmentId}" not found in the project`);
      }
      const page = pageOf(deps, p, { list: "renderings", projectId: project._id, environmentId: req.environmentId }, req);
      const docs = req.environmentId
        ? await dir.renderings.ofEnvironment(req.environmentId, page.after, page.read)
        : await dir.renderings.ofProject(project._id, page.after, page.read);
      const { items, nextPageToken } = await page.cut(docs, byId, RenderingSchema, renderingToProto);
      return { renderings: items, nextPageToken };
    },

    async getRendering(req, ctx) {
      const { view, p } = await reader(deps, ctx);
      const rendering = await deps.store.immutable.rendering(required(req.renderingId, "rendering_id"));
      await projectOf(view, p, rendering?.projectId, "editor", `rendering "${req.renderingId}"`);
      return { rendering: renderingToProto(rendering!) };
    },
  };
}

function teamChanges(deps: Deps): Pick<AdminImpl, "createTeam" | "setTeamMember" | "createRendering"> {
  const dir = deps.store.directory;
  return {
    async createTeam(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      const name = req.name.trim();
      if (!name || name.length > 100) throw fail.invalid("name: 1 to 100 characters");
      if (name === NO_TEAM) throw fail.invalid(`name: "${NO_TEAM}" is what the public API calls entries of no team`);
      const team = await insertUnique(
        dir.teams.insert,
        { _id: randomUUID(), projectId: project._id, name, memberIds: [], createdAt: new Date() },
        `team "${name}"`,
      );
      await adminLog(deps, p.user, "team.created", `team/${team._id}`, { name }, { projectId: project._id });
      return { team: teamToProto(team) };
    },

    async setTeamMember(req, ctx) {
      const p = await caller(dir, ctx);
      const { team, project } = await teamOf(dir, p, req.teamId);
      const user = await userInOrg(dir, p, req.userId);
      const after = await dir.teams.setMember(project.organizationId, team._id, user._id, req.member);
      if (!after) throw fail.notFound(`team "${req.teamId}" not found`);
      await adminLog(
        deps,
        p.user,
        req.member ? "team.member.added" : "team.member.removed",
        `team/${team._id}`,
        { userId: user._id, email: user.email },
        { projectId: project._id },
      );
      return { team: teamToProto(after) };
    },

    async createRendering(req, ctx) {
      const p = await caller(dir, ctx);
      const { team, project } = await teamOf(dir, p, req.teamId);
      const environment = await dir.environments.get(required(req.environmentId, "environment_id"));
      if (!environment || environment.projectId !== project._id) throw fail.notFound(`environment "${req.environmentId}" not found in the team's project`);
      const rendering = await insertUnique(
        dir.renderings.insert,
        { _id: randomUUID(), projectId: project._id, teamId: team._id, environmentId: environment._id, createdAt: new Date() },
        `a rendering of team "${team.name}" in environment "${environment.name}"`,
      );
      const details = { teamId: team._id, team: team.name, environmentId: environment._id };
      await adminLog(deps, p.user, "rendering.created", `rendering/${rendering._id}`, details, { projectId: project._id, environment: environment.name });
      return { rendering: renderingToProto(rendering) };
    },
  };
}
