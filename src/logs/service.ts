// LogService: placeholder until its issue lands.
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { LogService } from "../../gen/runhook/v1/log_pb.js";
import type { Deps } from "../deps.js";

export function createLogService(_deps: Deps): ServiceImpl<typeof LogService> {
  const notYet = () => {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  };
  return Object.fromEntries(LogService.methods.map((m) => [m.localName, notYet])) as unknown as ServiceImpl<typeof LogService>;
}
