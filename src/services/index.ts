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

/** Each service's descriptor with its implementation (the gRPC fast path and the router both take them). */
export function serviceImpls(s: Services): Array<[(typeof SERVICE_DESCS)[number], object]> {
  return [
    [TriggerService, s.trigger],
    [RunService, s.run],
    [LogService, s.log],
    [NoteService, s.note],
    [AdminService, s.admin],
  ];
}

export function registerServices(router: ConnectRouter, s: Services): void {
  for (const [service, impl] of serviceImpls(s)) router.service(service, impl as ServiceImpl<typeof service>);
}
