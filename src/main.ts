// Wires configuration → store → services → servers → executors, and shuts down in reverse.
import { EventEmitter } from "node:events";
import type { Logger } from "pino";
import type { FastifyInstance } from "fastify";
import type { Config } from "./config.js";
import { connect, createStore, ensureIndexes, sweepExpired, SWEEP_EVERY_MS, type Database } from "./store/index.js";
import { startEmbeddedServer, type EmbeddedServer } from "./store/embedded.js";
import type { Deps } from "./deps.js";
import { buildGateway } from "./gateway/app.js";
import { startGrpcServer, type GrpcServer } from "./grpc-server.js";
import { startExecutors, type Executors } from "./runs/executor.js";
import { createServices, SERVICE_DESCS, type Services } from "./services.js";
import { createHealthStatus } from "./grpc/health.js";

export interface Runhook {
  deps: Deps;
  services: Services;
  /** Base URL of the HTTP gateway (absent for a worker). */
  baseUrl?: string;
  /** host:port of the native gRPC server (absent for a worker). */
  grpcAddr?: string;
  stop(): Promise<void>;
}

export interface StartOptions {
  /**
   * `server` runs the gateway, gRPC and (by config) executors; `worker` only executors;
   * `offline` neither (a command such as `seed` that only needs the services).
   */
  mode: "server" | "worker" | "offline";
  logger: Logger;
  /** Database name override (tests give each file its own). */
  dbName?: string;
}

/** Connects to MONGODB_URI, or to the embedded server it starts first, and creates the indexes. */
export async function openDatabase(config: Config, logger: Logger, dbName?: string): Promise<{ db: Database; embedded?: EmbeddedServer }> {
  let embedded: EmbeddedServer | undefined;
  let uri = config.mongodbUri;
  if (!uri) {
    embedded = await startEmbeddedServer({ dataDir: config.dataDir, cacheDir: config.cacheDir, persistent: config.embedded === "file", progress: (m) => logger.info(m) });
    uri = embedded.uri;
  }
  try {
    const db = await connect(uri, { dbName });
    await ensureIndexes(db);
    return { db, embedded };
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
}

export async function startRunhook(config: Config, opts: StartOptions): Promise<Runhook> {
  const { logger } = opts;
  const { db, embedded } = await openDatabase(config, logger, opts.dbName);
  const deps: Deps = { db, store: createStore(db), config, logger, events: new EventEmitter(), health: createHealthStatus({ services: [...SERVICE_DESCS] }) };
  deps.events.setMaxListeners(0);
  const services = createServices(deps);

  let gateway: FastifyInstance | undefined;
  let grpc: GrpcServer | undefined;
  let executors: Executors | undefined;
  // What MongoDB's TTL index does, for servers that accept it without applying it.
  const sweeper = setInterval(() => void sweepExpired(db).catch((err) => logger.warn({ err }, "sweeping expired rate-limit windows failed")), SWEEP_EVERY_MS);
  sweeper.unref();

  const stop = async () => {
    clearInterval(sweeper);
    deps.health.shutdown();
    // Stop accepting, let requests in flight finish, then the executors, then the database.
    await Promise.allSettled([gateway?.close(), grpc?.close()]);
    await executors?.stop();
    await db.close().catch(() => {});
    await embedded?.stop();
  };

  try {
    let baseUrl: string | undefined;
    let grpcAddr: string | undefined;
    if (opts.mode === "server") {
      gateway = await buildGateway(deps, services);
      await gateway.listen({ port: config.port, host: config.host });
      const port = (gateway.server.address() as { port: number }).port;
      baseUrl = `http://127.0.0.1:${port}`;
      // PORT=0 picks a free port: webhook URLs must name the one actually bound.
      if (/:0$/.test(config.publicBaseUrl)) config.publicBaseUrl = `http://localhost:${port}`;
      grpc = await startGrpcServer(deps, services, config.host, config.grpcPort);
      grpcAddr = `127.0.0.1:${grpc.port}`;
      logger.info({ http: port, grpc: grpc.port }, "runhook listening");
    }
    if (opts.mode === "worker" || (opts.mode === "server" && config.executor.enabled)) executors = startExecutors(deps);
    return { deps, services, baseUrl, grpcAddr, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
