// RunService: placeholder until its issue lands.
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import type { Deps } from "../deps.js";

export function createRunService(_deps: Deps): ServiceImpl<typeof RunService> {
  const notYet = () => {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  };
  return Object.fromEntries(RunService.methods.map((m) => [m.localName, notYet])) as unknown as ServiceImpl<typeof RunService>;
}
