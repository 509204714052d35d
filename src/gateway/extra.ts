// Standard services served next to runhook's own (health, reflection).
import type { ConnectRouter } from "@connectrpc/connect";
import type { Deps } from "../deps.js";

export function registerExtraConnectRoutes(_router: ConnectRouter, _deps: Deps): void {}
