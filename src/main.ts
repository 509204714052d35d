// Wires configuration → store → services → servers → executors, and shuts down in reverse.
import { EventEmitter } from "node:events";
import type { Logger } from "pino";
import type { FastifyInstance } from "fastify";
import { AggregatorRegistry } from "prom-client";
import { bindPublicBaseUrl, type Config } from "./config.js";
import {
  ensureIndexes,
  isUnavailable,
  STALE_INTENT_MS,
  openStore,
  sweepEveryMs,
  sweepExpired,
  SWEEP_EVERY_MS,
  ttlIndexes,
  type Store,
  type TtlIndex,
} from "./store/index.js";
import { bindUnboundSsoApiTokens } from "./domain/auth/sso-tokens.js";
import { numberUnnumberedUsers } from "./domain/auth/user-numbers.js";
import { EMBEDDED_HOST, startEmbeddedServer, type EmbeddedServer } from "./embedded/index.js";
import type { ServerDeps } from "./rpc/server-deps.js";
import { AuthFailureThrottle } from "./rpc/auth-throttle.js";
import { buildGateway } from "./http/app.js";
import { startGrpcServer, type GrpcServer } from "./rpc/grpc-server.js";
import { startExecutors, type Executors } from "./worker/executor.js";
import { startPendingSweep } from "./worker/pending-sweep.js";
import { startLogDigests, type LogDigester } from "./worker/log-digests.js";
import { storedItem } from "./http/published.js";
import { createServices, SERVICE_DESCS, type Services } from "./services/index.js";
import { createHealthStatus, ServingStatus } from "./rpc/health.js";
import { fullDatabaseReporter, monitorDatabase } from "./store/monitor.js";
import { createMetrics, startMetricsServer, type MetricsServer } from "./lib/metrics.js";
import { checkPorts, listening, PortError, type PortUse } from "./lib/ports.js";

/** Where a server on the embedded database (the demo) serves its metrics unless METRICS_PORT says otherwise. */
export const DEMO_METRICS_PORT = 9464;

/** Metrics are served where METRICS_PORT says; without it, only by a server on the embedded database. */
export function metricsPortFor(config: Config, mode: StartOptions["mode"]): number | undefined {
  // A one-shot command (seed) never listens, whatever METRICS_PORT says for the server beside it.
  if (mode === "offline" || config.metricsPort === "off") return undefined;
  if (config.metricsPort !== undefined) return config.metricsPort;
  return mode === "server" && !config.mongodbUri ? DEMO_METRICS_PORT : undefined;
}

/** The ports a command may listen on, each with the variable that sets it (absent: not opened). */
export interface Ports {
  gateway?: PortUse;
  grpc?: PortUse;
  metrics?: PortUse;
  /** Without MONGODB_URI: opened only by a process that starts the embedded database, not one that joins it. */
  embedded?: PortUse;
}

export function portsFor(config: Config, mode: StartOptions["mode"]): Ports {
  const at = (variable: string, port: number, host = config.host): PortUse => ({ variable, port, host });
  const metrics = metricsPortFor(config, mode);
  return {
    gateway: mode === "server" ? at("PORT", config.port) : undefined,
    grpc: mode === "server" ? at("GRPC_PORT", config.grpcPort) : undefined,
    metrics: metrics === undefined ? undefined : at("METRICS_PORT", metrics),
    embedded: config.mongodbUri ? undefined : at("RUNHOOK_EMBEDDED_PORT", config.embeddedPort, EMBEDDED_HOST),
  };
}

const usesOf = (ports: Ports): PortUse[] => [ports.gateway, ports.grpc, ports.metrics, ports.embedded].filter((u) => u !== undefined);

/**
 * Before anything starts: one port given twice, or a busy or forbidden gateway or gRPC port,
 * stops the command with a PortError that names the variable and says what to do. The metrics
 * port is tried when its server starts: busy, it is only a warning. The embedded database's is
 * tried by the database itself, the first thing to start (it is not opened when joined).
 */
export function checkListenPorts(ports: Ports): Promise<void> {
  return checkPorts(
    usesOf(ports),
    [ports.gateway, ports.grpc].filter((u) => u !== undefined),
  );
}

/** Runs a real listen on `use`, one of `ports`: a port taken since the check fails as the check would have. */
function listenOn<T>(ports: Ports, use: PortUse, listen: () => Promise<T>): Promise<T> {
  return listening(
    use,
    usesOf(ports).map((u) => u.port),
    listen,
  );
}

/** GET /metrics on `ports.metrics`, if any; a busy or forbidden port is a warning, and the process runs without them. */
export async function serveMetrics(
  ports: Ports,
  registry: Parameters<typeof startMetricsServer>[0],
  logger: Logger,
  started: { msg: string; fields?: object } = { msg: "metrics at /metrics" },
): Promise<MetricsServer | undefined> {
  const use = ports.metrics;
  if (!use) return undefined;
  try {
    const server = await listenOn(ports, use, () => startMetricsServer(registry, use.host, use.port));
    logger.info({ metrics: server.port, ...started.fields }, started.msg);
    return server;
  } catch (err) {
    if (!(err instanceof PortError)) throw err;
    logger.warn({ metrics: use.port }, `${err.message}; runhook runs without GET /metrics`);
    return undefined;
  }
}

/** How often the database is pinged to know whether it is reachable (health, /readyz). */
export const DB_CHECK_EVERY_MS = 1000;
/** A ping slower than this (or than RUNHOOK_DB_TIMEOUT_MS, if shorter) counts as the database being unreachable. */
const DB_CHECK_TIMEOUT_MS = 2000;

export interface Runhook {
  deps: ServerDeps;
  services: Services;
  /** Port of GET /metrics, when served. */
  metricsPort?: number;
  /** The HTTP gateway (absent for a worker): tests call it in process with inject(). */
  gateway?: FastifyInstance;
  /** Base URL of the HTTP gateway (absent for a worker). */
  baseUrl?: string;
  /** host:port of the native gRPC server (absent for a worker). */
  grpcAddr?: string;
  /** The background pass that signs the log streams' digests (a server's first process only). */
  logDigests?: LogDigester;
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
  /**
   * This process's number (1…N) among the processes of one `runhook start` (cli/cluster.ts):
   * only the first runs executors, and the primary process serves the metrics of all.
   */
  processIndex?: number;
}

/**
 * Starts the embedded database (or joins the one another local runhook process runs for the
 * data dir). On the memory backend only a server starts it; a worker or seed joins it, or fails.
 */
export function startEmbedded(config: Config, logger: Logger, mode: StartOptions["mode"]): Promise<EmbeddedServer> {
  const ports = portsFor(config, mode);
  return listenOn(ports, ports.embedded!, () =>
    startEmbeddedServer({
      dataDir: config.dataDir,
      cacheDir: config.cacheDir,
      persistent: config.embedded === "file",
      share: mode === "server" ? "publish" : "join",
      port: config.embeddedPort,
      noTableScan: config.embeddedNoTableScan,
      heapMb: config.embeddedHeapMb,
      progress: (m) => logger.info(m),
    }),
  );
}

/** Connects to MONGODB_URI, or to the embedded server it starts (or joins) first, and creates the indexes. */
export async function openDatabase(
  config: Config,
  logger: Logger,
  mode: StartOptions["mode"],
  dbName?: string,
): Promise<{ store: Store; embedded?: EmbeddedServer }> {
  const embedded = config.mongodbUri ? undefined : await startEmbedded(config, logger, mode);
  const uri = config.mongodbUri ?? embedded!.uri;
  try {
    const store = await openStore(uri, {
      dbName,
      timeoutMs: config.dbTimeoutMs,
      writeConcern: config.writeConcern,
      onReplaced: ({ stuckMs }) => logger.warn({ stuckMs }, "the database driver's server monitor was stuck: reconnected with a new client"),
    });
    logWriteConcern(store, logger, embedded ? config.embedded : undefined);
    await ensureIndexes(store, config.retention);
    const bound = await bindUnboundSsoApiTokens(store.directory);
    if (bound > 0) logger.info({ bound }, "API tokens made in SSO sessions now expire with the SSO token that made them");
    const numbered = await numberUnnumberedUsers(store.directory);
    if (numbered > 0) logger.info({ numbered }, "users now have numbers (their ids in the public REST API)");
    return { store, embedded };
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
}

/** One line at start: the write concern every write is acknowledged with. */
function logWriteConcern(store: Store, logger: Logger, embedded: Config["embedded"] | undefined): void {
  const { w, journal, wtimeoutMS } = store.writeConcern;
  const durable = journal === true && (w === "majority" || (typeof w === "number" && w >= 1));
  // The embedded server ignores write concerns: what a write survives is its backend's doing.
  const note =
    embedded === "file"
      ? " (ignored by the embedded server: its file backend answers a write once it is on disk)"
      : embedded === "memory"
        ? " (ignored by the embedded server: its memory backend keeps nothing across a restart)"
        : durable
          ? ""
          : " — a crash can lose acknowledged writes";
  logger.info({ writeConcern: { w, journal, wtimeoutMS } }, `write concern in force: w=${String(w)}, journal=${String(journal)}${note}`);
}

/**
 * Removes what the TTL indexes expire (for the embedded server, which never does): each index
 * every sweepEveryMs of it. The first sweep of each falls at a random point of its first
 * period (a minute at least): a restart, or processes started together, do not all scan every
 * collection at once (on the embedded server a sweep holds its collection, and so every write,
 * for seconds).
 */
function startSweeper(store: Store, config: Config, logger: Logger): NodeJS.Timeout {
  const key = (t: TtlIndex) => `${t.collection}.${t.field}`;
  const started = Date.now();
  const sweptAt = new Map(ttlIndexes(config.retention).map((t) => [key(t), started - Math.random() * sweepEveryMs(t)]));
  let sweeping = false;
  const sweeper = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    const now = Date.now();
    const due = (t: TtlIndex) => {
      if (now - (sweptAt.get(key(t)) ?? 0) < sweepEveryMs(t)) return false;
      sweptAt.set(key(t), now);
      return true;
    };
    sweepExpired(store, config.retention, new Date(now), due)
      .then(
        (removed) => Object.keys(removed).length > 0 && logger.info({ removed }, "removed expired documents (retention)"),
        (err: unknown) => !isUnavailable(err) && logger.warn({ err }, "sweeping expired documents failed"),
      )
      .finally(() => (sweeping = false));
  }, SWEEP_EVERY_MS);
  sweeper.unref();
  return sweeper;
}

/** Beyond this the clocks of instances may disagree by more than the directory's stale-intent tolerance allows. */
export const CLOCK_SKEW_WARN_MS = 10_000;
const CLOCK_CHECK_EVERY_MS = 10 * 60_000;

/**
 * Compares this process's clock with the database server's at start and every 10 minutes, and
 * says so when they differ by more than CLOCK_SKEW_WARN_MS: runhook assumes instances agree
 * within well under a minute (a directory change's intent counts as abandoned after one).
 */
export function startClockCheck(store: Store, logger: Logger): NodeJS.Timeout {
  const check = () =>
    store.clockSkewMs().then(
      (skew) => {
        if (Math.abs(skew) > CLOCK_SKEW_WARN_MS)
          logger.warn(
            { clockSkewMs: Math.round(skew) },
            `this process's clock differs from the database server's by ${Math.round(Math.abs(skew) / 1000)} s: keep every instance's clock synchronised (NTP); runhook assumes they agree within ${STALE_INTENT_MS / 1000} s`,
          );
      },
      () => {}, // the database is away: the health checks say so
    );
  void check();
  const timer = setInterval(check, CLOCK_CHECK_EVERY_MS);
  timer.unref();
  return timer;
}

/** What every service is built from, on an open database. */
export function createDeps(store: Store, config: Config, logger: Logger): ServerDeps {
  const metrics = createMetrics(async () => {
    const q = await store.runs.queueStats();
    return { depth: q.depth, oldestAgeSeconds: q.oldest ? (Date.now() - q.oldest.getTime()) / 1000 : 0 };
  });
  store.onCommandFailed((command) => metrics.dbErrors.inc({ command }));
  store.onFull(
    fullDatabaseReporter((refused) =>
      logger.warn(
        { refused },
        `the database is full: ${refused} write${refused === 1 ? "" : "s"} refused since the last such line; callers are answered 503 (gRPC UNAVAILABLE) with Retry-After until room is made (docs/operators.md)`,
      ),
    ),
  );
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const dbMonitor = monitorDatabase(() => store.ping(), { intervalMs: DB_CHECK_EVERY_MS, timeoutMs: Math.min(config.dbTimeoutMs, DB_CHECK_TIMEOUT_MS) });
  return {
    store,
    config,
    logger,
    events,
    health: createHealthStatus({ services: [...SERVICE_DESCS] }),
    metrics,
    dbMonitor,
    // Counted in this process, shared with the others through the database at most once a second.
    authFailures: new AuthFailureThrottle(config.authFailureLimitPerMinute, {
      share: (windowStart, increments) => store.rateLimits.share(windowStart, increments),
      onError: (err) => !isUnavailable(err) && logger.warn({ err }, "sharing the counts of failed authentications failed; they are sent again in a second"),
    }),
  };
}

export async function startRunhook(config: Config, opts: StartOptions): Promise<Runhook> {
  const { logger } = opts;
  const ports = portsFor(config, opts.mode);
  // A cluster's primary checks them for its processes, which share its sockets.
  if (opts.processIndex === undefined) await checkListenPorts(ports);
  const { store, embedded } = await openDatabase(config, logger, opts.mode, opts.dbName);
  const deps = createDeps(store, config, logger);
  const { dbMonitor } = deps;
  const services = createServices(deps);
  // Every service needs the database: all of them follow it (a shutdown keeps NOT_SERVING).
  let downSince = 0;
  dbMonitor.onChange((up, why) => {
    if (up) {
      logger.info({ downMs: Date.now() - downSince }, "database reachable again: serving");
    } else {
      downSince = Date.now();
      logger.warn({ err: why }, "database unreachable: calls answer 503 unavailable and health is NOT_SERVING until it is back");
    }
    deps.health.setAll(up ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  });

  let gateway: FastifyInstance | undefined;
  let grpc: GrpcServer | undefined;
  let executors: Executors | undefined;
  let metricsServer: MetricsServer | undefined;
  let logDigests: LogDigester | undefined;
  // What MongoDB's TTL indexes do, for servers that accept them without applying them: one
  // sweeper per process (each deletion is idempotent, so processes need not elect one).
  const sweeper = startSweeper(store, config, logger);
  const pendingSweep = startPendingSweep(store, logger);
  const clockCheck = startClockCheck(store, logger);

  const stop = async () => {
    clearInterval(sweeper);
    clearInterval(pendingSweep);
    clearInterval(clockCheck);
    deps.authFailures.close();
    deps.health.shutdown();
    dbMonitor.stop();
    // Stop accepting, let requests in flight finish, then the executors, then the database.
    await Promise.allSettled([gateway?.close(), grpc?.close(), metricsServer?.close()]);
    await logDigests?.stop();
    await executors?.stop();
    await store.close().catch(() => {});
    await embedded?.stop();
  };

  try {
    let baseUrl: string | undefined;
    let grpcAddr: string | undefined;
    if (opts.mode === "server") {
      const app = await buildGateway(deps, services);
      gateway = app;
      await listenOn(ports, ports.gateway!, () => app.listen({ port: config.port, host: config.host }));
      const port = (gateway.server.address() as { port: number }).port;
      baseUrl = `http://127.0.0.1:${port}`;
      bindPublicBaseUrl(config, port);
      grpc = await listenOn(ports, ports.grpc!, () => startGrpcServer(deps, services, config.host, config.grpcPort));
      grpcAddr = `127.0.0.1:${grpc.port}`;
      logger.info({ http: port, grpc: grpc.port }, "runhook listening");
    }
    const firstProcess = (opts.processIndex ?? 1) === 1;
    if (opts.mode === "worker" || (opts.mode === "server" && config.executor.enabled && firstProcess)) executors = startExecutors(deps);
    // One process of a server signs the digests (several would only repeat each other's work).
    if (opts.mode === "server" && firstProcess) logDigests = startLogDigests(deps, storedItem);
    if (opts.processIndex !== undefined) {
      // The primary asks each process for its metrics: an AggregatorRegistry made here answers it.
      new AggregatorRegistry();
      AggregatorRegistry.setRegistries([deps.metrics.registry]);
    } else {
      metricsServer = await serveMetrics(ports, deps.metrics.registry, logger);
    }
    return { deps, services, gateway, baseUrl, grpcAddr, logDigests, metricsPort: metricsServer?.port, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
