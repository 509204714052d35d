// What every call to a service gets (pipeline.ts): its request id echoed (a response header,
// or error metadata); an RPC on either Connect server also gets one access-log line and its
// count by protocol, method and outcome. A REST call (webhook, /v1) is logged and counted by
// the gateway, once per HTTP request, with its route and status (http/app.ts).
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Deps } from "../deps.js";
import { requestIdKey, viaKey } from "../services/context.js";
import { codeName } from "./errors.js";
import { REQUEST_ID_HEADER } from "./request-id.js";

function protocolOf(contentType: string | null): string {
  if (!contentType) return "unknown";
  if (contentType.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/** The access-log line and count of an RPC, given its outcome once known. */
function observation(deps: Deps, req: Parameters<Parameters<Interceptor>[0]>[0], requestId: string): (code: Code | 0) => void {
  const started = performance.now();
  const labels = { protocol: protocolOf(req.header.get("content-type")), service: req.service.typeName, method: req.method.name };
  return (code) => {
    const name = code === 0 ? "ok" : codeName(code);
    deps.metrics.rpcCalls.inc({ ...labels, code: name });
    deps.logger.info(
      { rpc: `${labels.service}/${labels.method}`, protocol: labels.protocol, code: name, ms: Math.round(performance.now() - started), requestId },
      "rpc",
    );
  };
}

export function observeInterceptor(deps: Deps): Interceptor {
  return (next) => async (req) => {
    const requestId = req.contextValues.get(requestIdKey);
    // A REST call is logged and counted by the gateway, once per HTTP request.
    const done = req.contextValues.get(viaKey) === "grpc" ? observation(deps, req, requestId) : undefined;
    try {
      const res = await next(req);
      res.header.set(REQUEST_ID_HEADER, requestId);
      done?.(0);
      return res;
    } catch (err) {
      if (err instanceof ConnectError) err.metadata.set(REQUEST_ID_HEADER, requestId);
      done?.(err instanceof ConnectError ? err.code : Code.Internal);
      throw err;
    }
  };
}
