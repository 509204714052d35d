// Builds every service implementation once and registers it on a Connect router.
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { AdminService } from "../../gen/runhook/v1/admin_pb.js";
import { LogService } from "../../gen/runhook/v1/log_pb.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import { createAdminService } from "./admin/index.js";
import type { Deps } from "../deps.js";
import { createLogService } from "./logs.js";
import { createNoteService } from "./notes.js";
import { createRunService } from "./runs.js";
import { createTriggerService } from "./trigger.js";

export interface Services {
  trigger: ServiceImpl<typeof TriggerService>;
  run: ServiceImpl<typeof RunService>;
  log: ServiceImpl<typeof LogService>;
  note: ServiceImpl<typeof NoteService>;
  admin: ServiceImpl<typeof AdminService>;
}

export const SERVICE_DESCS = [TriggerService, RunService, LogService, NoteService, AdminService] as const;

export function createServices(deps: Deps): Services {
  return {
    trigger: createTriggerService(deps),
    run: createRunService(deps),
    log: createLogService(deps),
    note: createNoteService(deps),
    admin: createAdminService(deps),
  };
}

export function registerServices(router: ConnectRouter, s: Services): void {
  router.service(TriggerService, s.trigger);
  router.service(RunService, s.run);
  router.service(LogService, s.log);
  router.service(NoteService, s.note);
  router.service(AdminService, s.admin);
}
