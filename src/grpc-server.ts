// Native gRPC over HTTP/2 cleartext for internal callers (@grpc/grpc-js clients work).
import http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { Deps } from "./deps.js";
import { registerExtraConnectRoutes } from "./gateway/extra.js";
import { registerServices, type Services } from "./services.js";

export interface GrpcServer {
  port: number;
  close(): Promise<void>;
}

export async function startGrpcServer(deps: Deps, services: Services, host: string, port: number): Promise<GrpcServer> {
  const handler = connectNodeAdapter({
    routes: (router) => {
      registerServices(router, services);
      registerExtraConnectRoutes(router, deps);
    },
    grpc: true,
    grpcWeb: false,
    connect: false,
    readMaxBytes: deps.config.bodyLimitBytes,
  });
  const server = http2.createServer({}, handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Ask clients to go away; in-flight streams finish, idle sessions close.
        for (const s of sessions) s.close();
        setTimeout(() => sessions.forEach((s) => s.destroy()), 5000).unref();
      }),
  };
}
