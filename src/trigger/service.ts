// TriggerService: placeholder until its issue lands.
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { TriggerService } from "../../gen/runhook/v1/trigger_pb.js";
import type { Deps } from "../deps.js";

export function createTriggerService(_deps: Deps): ServiceImpl<typeof TriggerService> {
  const notYet = () => {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  };
  return Object.fromEntries(TriggerService.methods.map((m) => [m.localName, notYet])) as unknown as ServiceImpl<typeof TriggerService>;
}
