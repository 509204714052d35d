// Builds every service implementation once and registers it on a Connect router.
import type { ConnectRouter, Interceptor, ServiceImpl } from "@connectrpc/connect";
import { AdminService } from "../gen/runhook/v1/admin_pb.js";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { NoteService } from "../gen/runhook/v1/note_pb.js";
import { RunService } from "../gen/runhook/v1/run_pb.js";
import { TriggerService } from "../gen/runhook/v1/trigger_pb.js";
import { createAdminService } from "./admin/service.js";
import type { Deps } from "./deps.js";
import { errorInterceptor } from "./errors.js";
import { createLogService } from "./logs/service.js";
import { createNoteService } from "./notes/service.js";
import { createRunService } from "./runs/service.js";
import { createTriggerService } from "./trigger/service.js";

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

/**
 * The interceptors of every router the services are registered on (gateway: Connect and
 * gRPC-Web; native gRPC): errors go out as src/errors.ts toConnectError makes them — the
 * database unreachable as UNAVAILABLE with `retry-after` metadata, bugs as INTERNAL (logged).
 */
export function serverInterceptors(deps: Deps): Interceptor[] {
  return [errorInterceptor((err, procedure) => deps.logger.error({ err, procedure }, "unhandled error in an RPC"))];
}
