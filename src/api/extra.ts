// Standard services served next to runhook's own: grpc.health.v1 and server reflection
// (v1 and v1alpha), so grpcurl and `buf curl` work without our protos.
import type { ConnectRouter } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import { Health, registerHealth } from "./health.js";
import { registerReflection } from "./reflection.js";
import { SERVICE_DESCS } from "./services.js";

export function registerExtraConnectRoutes(router: ConnectRouter, deps: Deps): void {
  registerHealth(router, deps.health);
  registerReflection(router, [...SERVICE_DESCS, Health]);
}
