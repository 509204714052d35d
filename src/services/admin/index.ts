// AdminService, composed from one part per resource. Typed as the whole service, so a
// method no part implements is a compile error.
import type { Deps } from "../../deps.js";
import { collectionMethods } from "./collections.js";
import type { AdminImpl } from "./common.js";
import { organizationMethods } from "./organizations.js";
import { projectMethods } from "./projects.js";
import { teamMethods } from "./teams.js";
import { tokenMethods, tokenReads } from "./tokens.js";
import { userMethods } from "./users.js";
import { webhookMethods } from "./webhooks.js";
import { workflowMethods } from "./workflows.js";

export function createAdminService(deps: Deps): AdminImpl {
  return {
    ...organizationMethods(deps),
    ...userMethods(deps),
    ...projectMethods(deps),
    ...teamMethods(deps),
    ...collectionMethods(deps),
    ...workflowMethods(deps),
    ...webhookMethods(deps),
    ...tokenMethods(deps),
    ...tokenReads(deps),
  };
}
