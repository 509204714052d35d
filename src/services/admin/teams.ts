// AdminService: teams, their members and their renderings (a team's view of one environment).
import { randomUUID } from "node:crypto";
import type { Deps } from "../../deps.js";
import { fail } from "../../domain/errors.js";
import { adminLog, caller, inProject, insertUnique, required, teamOf, userInOrg, type AdminImpl } from "./common.js";
import { renderingToProto, teamToProto } from "./convert.js";

export function teamMethods(deps: Deps): Pick<AdminImpl, "createTeam" | "setTeamMember" | "createRendering"> {
  const dir = deps.store.directory;
  return {
    async createTeam(req, ctx) {
      const p = await caller(dir, ctx);
      const project = await inProject(dir, p, req.projectId, "admin");
      const name = req.name.trim();
      if (!name || name.length > 100) throw fail.invalid("name: 1 to 100 characters");
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
