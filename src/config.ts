// One typed configuration object, read from the environment and validated at start.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { isIP } from "node:net";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";

export interface Config {
  port: number;
  grpcPort: number;
  host: string;
  /** Set when the operator points the service at a real MongoDB. */
  mongodbUri: string | undefined;
  /**
   * How long a database operation waits for a reachable server before it fails (the driver's
   * serverSelectionTimeoutMS): during an outage calls answer 503 `unavailable` after this.
   */
  dbTimeoutMs: number;
  /** Root of local state (embedded database files, generated secrets). */
  dataDir: string;
  /** Where the embedded database server is built and cached between runs. */
  cacheDir: string;
  /** Without MONGODB_URI: keep the embedded database's data in files under dataDir, or in memory. */
  embedded: "file" | "memory";
  /**
   * The embedded database refuses a query no index serves (MongoDB's notablescan), instead of
   * reading the whole collection: the tests and benchmarks turn it on.
   */
  embeddedNoTableScan: boolean;
  /** The embedded database's Java heap, MB; undefined: by backend (src/embedded/process.ts). */
  embeddedHeapMb: number | undefined;
  /** The embedded database's loopback port when this process starts it (0: any free port). */
  embeddedPort: number;
  publicBaseUrl: string;
  /** Webhook URL signing keys by key id; `signingKeyId` signs new URLs. */
  signingKeys: Map<string, Buffer>;
  signingKeyId: string;
  /** Secret that authenticates AdminService.Bootstrap. */
  bootstrapSecret: string;
  logLevel: string;
  bodyLimitBytes: number;
  webhookRateLimitPerMinute: number;
  /** Public API requests per project API token or application token (RUNHOOK_API_RATE_LIMIT[_HOURLY|_DAILY]). */
  apiRateLimit: ApiRateLimits;
  /** Public API requests per organization API token (RUNHOOK_ORG_API_RATE_LIMIT[_HOURLY|_DAILY]; by default apiRateLimit's). */
  orgApiRateLimit: ApiRateLimits;
  /** AdminService calls per minute: per token (RUNHOOK_ADMIN_RATE_LIMIT) and per organization (RUNHOOK_ADMIN_ORG_RATE_LIMIT). */
  adminRateLimit: { perToken: number; perOrganization: number };
  /** Ongoing (QUEUED or RUNNING) runs a project may have; a trigger beyond is 429 (RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT). */
  projectOngoingRunsLimit: number;
  /** Serves the API reference page GET /docs (Swagger UI over /openapi.json). */
  docs: boolean;
  /** Serves the browser console at /console (built at the first start: RUNHOOK_CONSOLE). */
  console: boolean;
  /** How long a trigger call's idempotency key is remembered (RUNHOOK_IDEMPOTENCY_TTL_HOURS). */
  idempotencyTtlMs: number;
  /** Failed authentications (401s) a client address may make per minute before all its calls get 429. */
  authFailureLimitPerMinute: number;
  /** Proxies whose X-Forwarded-For names the client (addresses or CIDRs); empty: the peer address is the client. */
  trustedProxies: string[];
  /** Whether AdminService.Bootstrap is served (the operator switches it off once the organizations exist). */
  bootstrap: boolean;
  /** Limits of the HTTP/1.1 gateway against slow or idle clients (docs/operators.md: Configuration). */
  http: {
    /** Complete request headers must arrive within this time (from the connection or the request start). */
    headersTimeoutMs: number;
    /** The complete request, headers and body, must arrive within this time (the answer may take longer). */
    requestTimeoutMs: number;
    /** An idle keep-alive connection is closed after this time. */
    keepAliveTimeoutMs: number;
  };
  /** HTTP/2 limits of the native gRPC server. */
  grpc: {
    /** A session without open streams and without a complete frame for this long is closed (GOAWAY). */
    idleTimeoutMs: number;
    /** A stream's request (headers and message) must be received completely within this time. */
    requestTimeoutMs: number;
    /** SETTINGS_MAX_CONCURRENT_STREAMS announced to (and enforced on) each client connection. */
    maxConcurrentStreams: number;
    /** SETTINGS_MAX_HEADER_LIST_SIZE: the largest header block (metadata), uncompressed, accepted. */
    maxHeaderListSize: number;
  };
  executor: {
    enabled: boolean;
    concurrency: number;
    /** How many of a process's `concurrency` slots one organization may hold at once (fair share). */
    organizationConcurrency: number;
    /** How many of a process's `concurrency` slots one project may hold at once (fair share). */
    projectConcurrency: number;
    pollIntervalMs: number;
    leaseMs: number;
    /** How many of its own runs a run batch keeps ongoing at most (RUNHOOK_BATCH_ONGOING_RUNS). */
    batchOngoingRuns: number;
  };
  /** Port of GET /metrics (Prometheus): a number (0: any free port), "off", or unset (main.ts decides). */
  metricsPort: number | "off" | undefined;
  /** Seeds the demo data on an empty database at `start` (by default only on the embedded database). */
  demo: boolean;
  /** How many processes `runhook start` and `runhook worker` run (cli/cluster.ts). */
  processes: number;
  /** The write concern of every write (docs/operators.md: Crashes and power cuts). */
  writeConcern: WriteConcernSetting;
  /** How long finished runs, and log entries, are kept (docs/operators.md: Retention). */
  retention: Retention;
  /** How often a server signs a digest of each log stream written meanwhile (RUNHOOK_LOG_DIGEST_INTERVAL_MS). */
  logDigestIntervalMs: number;
  /**
   * Existing databases an organization may attach as an environment's data database
   * (database name → organization id); every other environment gets a database the server
   * makes. Operator configuration only: tenants never name a database themselves.
   */
  dataDatabasesAllowed: Map<string, string>;
}

/** A MongoDB database name runhook accepts for an environment's records. */
export const DATA_DATABASE_NAME = /^[A-Za-z0-9_-]{1,63}$/;
/** MongoDB's own databases: never an environment's. */
const SYSTEM_DATABASES = ["admin", "local", "config"];

/**
 * Whether a database can never be attached as an environment's: MongoDB's own, and (given the
 * service database) that one and the names the server makes for environments,
 * `<service database>_d_…`, another environment's database now or once. In any case of letters:
 * MongoDB tells database names apart only case-insensitively.
 */
export function isReservedDatabase(name: string, serviceDatabase?: string): boolean {
  const n = name.toLowerCase();
  if (SYSTEM_DATABASES.includes(n)) return true;
  const own = serviceDatabase?.toLowerCase();
  return own !== undefined && (n === own || n.startsWith(`${own}_d_`));
}

/** RUNHOOK_DATA_DATABASES_ALLOWED: "database=organizationId[,database=organizationId…]". */
function dataDatabasesAllowed(env: NodeJS.ProcessEnv): Map<string, string> {
  const allowed = new Map<string, string>();
  for (const part of (env.RUNHOOK_DATA_DATABASES_ALLOWED ?? "").split(",")) {
    if (!part.trim()) continue;
    const m = /^([^=]+)=([0-9a-f-]{36})$/.exec(part.trim());
    if (!m || !DATA_DATABASE_NAME.test(m[1]!) || isReservedDatabase(m[1]!)) {
      throw new ConfigError(
        `RUNHOOK_DATA_DATABASES_ALLOWED must be 'database=organizationId[,…]' (database: 1-63 letters, digits, '_' or '-', not admin/local/config; organization: its id), got "${part.trim()}"`,
      );
    }
    allowed.set(m[1]!, m[2]!);
  }
  return allowed;
}

/** `w`: "majority" or a number of members; `journal`: acknowledged only once in the on-disk journal. */
export interface WriteConcernSetting {
  w: "majority" | number;
  journal: boolean;
}

/** A token's public API requests per window; a call must fit in every one. */
export interface ApiRateLimits {
  perMinute: number;
  perHour: number;
  perDay: number;
}

/** Public API requests per token, unless RUNHOOK_API_RATE_LIMIT[_HOURLY|_DAILY] say otherwise (the published API's figures). */
export const DEFAULT_API_RATE_LIMITS: Readonly<ApiRateLimits> = { perMinute: 60, perHour: 1000, perDay: 10_000 };
/** The highest limits a token may be given: a million a minute, and that rate kept up for an hour or a day. */
const MAX_API_RATE_LIMITS: Readonly<ApiRateLimits> = { perMinute: 1_000_000, perHour: 60_000_000, perDay: 1_440_000_000 };
/** Processes of `runhook start` / `worker` unless RUNHOOK_PROCESSES says otherwise (see docs/operators.md for why). */
export const DEFAULT_PROCESSES = 1;

/** Writes survive a crash of the server, and on a replica set a failover too. */
export const DEFAULT_WRITE_CONCERN: WriteConcernSetting = { w: "majority", journal: true };

export interface Retention {
  /** Finished runs (with their lease and step results) are removed this long after they finished. */
  runDays: number;
  /** Activity and admin log entries are removed this long after their timestamp. */
  logDays: number;
}

/** 400 days of logs: a year of audit trail and a margin. */
export const DEFAULT_RETENTION: Retention = { runDays: 30, logDays: 400 };

export class ConfigError extends Error {}

function int(env: NodeJS.ProcessEnv, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return def;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: NodeJS.ProcessEnv, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return def;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/**
 * Parses `RUNHOOK_SIGNING_KEYS` ("kid:base64secret,kid2:base64secret"; the first signs).
 * Without it, a key is generated once and kept under the data directory so that
 * webhook URLs survive restarts.
 */
function signingKeys(env: NodeJS.ProcessEnv, secrets: LocalSecrets): { keys: Map<string, Buffer>; current: string } {
  const raw = env.RUNHOOK_SIGNING_KEYS;
  const keys = new Map<string, Buffer>();
  if (!raw) {
    keys.set(secrets.signingKeyId, Buffer.from(secrets.signingKey, "base64url"));
    return { keys, current: secrets.signingKeyId };
  }
  let current = "";
  for (const part of raw.split(",")) {
    const m = /^([A-Za-z0-9]{1,16}):([A-Za-z0-9+/=_-]{22,})$/.exec(part.trim());
    if (!m) throw new ConfigError("RUNHOOK_SIGNING_KEYS must be 'kid:secret[,kid:secret…]' (kid 1-16 letters/digits, secret base64 of at least 16 bytes)");
    const secret = Buffer.from(m[2]!, m[2]!.includes("+") || m[2]!.includes("/") ? "base64" : "base64url");
    if (secret.length < 16) throw new ConfigError(`RUNHOOK_SIGNING_KEYS: secret of key "${m[1]}" is shorter than 16 bytes`);
    keys.set(m[1]!, secret);
    if (!current) current = m[1]!;
  }
  return { keys, current };
}

interface LocalSecrets {
  signingKeyId: string;
  signingKey: string;
  bootstrapSecret: string;
}

/** Safe secrets generated on first start and kept under the data directory. */
function localSecrets(dataDir: string): LocalSecrets {
  const file = join(dataDir, "secrets.json");
  if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")) as LocalSecrets;
  mkdirSync(dataDir, { recursive: true });
  const secrets: LocalSecrets = {
    signingKeyId: "k1",
    signingKey: randomBytes(32).toString("base64url"),
    bootstrapSecret: randomBytes(24).toString("base64url"),
  };
  writeFileSync(file, JSON.stringify(secrets, null, 2), { mode: 0o600, flag: "wx" });
  return secrets;
}

/** METRICS_PORT: a port number, or `off`; unset leaves the choice to the mode (main.ts). */
function metricsPort(env: NodeJS.ProcessEnv): Config["metricsPort"] {
  const raw = env.METRICS_PORT;
  if (raw === undefined || raw === "") return undefined;
  if (raw === "off") return "off";
  return int(env, "METRICS_PORT", 0, 0, 65535);
}

/** RUNHOOK_WRITE_CONCERN (`majority` or a number of members) and RUNHOOK_WRITE_JOURNAL. */
function writeConcern(env: NodeJS.ProcessEnv): WriteConcernSetting {
  const raw = env.RUNHOOK_WRITE_CONCERN || String(DEFAULT_WRITE_CONCERN.w);
  // w: 0 would acknowledge nothing at all: a 202 must mean the run is stored.
  if (raw !== "majority" && !/^[1-9]\d{0,1}$/.test(raw))
    throw new ConfigError(`RUNHOOK_WRITE_CONCERN must be "majority" or a number of members from 1 to 99, got "${raw}"`);
  return { w: raw === "majority" ? raw : Number(raw), journal: bool(env, "RUNHOOK_WRITE_JOURNAL", DEFAULT_WRITE_CONCERN.journal) };
}

function embeddedMode(env: NodeJS.ProcessEnv): Config["embedded"] {
  const raw = env.RUNHOOK_EMBEDDED || "file";
  if (raw !== "file" && raw !== "memory") throw new ConfigError(`RUNHOOK_EMBEDDED must be "file" or "memory", got "${raw}"`);
  return raw;
}

/** The HTTP/1.1 timeouts; Node requires the headers timeout not to exceed the request timeout. */
function httpLimits(env: NodeJS.ProcessEnv): Config["http"] {
  const headersTimeoutMs = int(env, "RUNHOOK_HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, 3_600_000);
  const requestTimeoutMs = int(env, "RUNHOOK_HTTP_REQUEST_TIMEOUT_MS", 30_000, 100, 3_600_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `RUNHOOK_HTTP_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not be larger than RUNHOOK_HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    );
  }
  return { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs: int(env, "RUNHOOK_HTTP_KEEP_ALIVE_TIMEOUT_MS", 72_000, 100, 3_600_000) };
}

/** RUNHOOK_TRUSTED_PROXIES: comma-separated IPv4/IPv6 addresses or CIDR ranges. */
function trustedProxies(env: NodeJS.ProcessEnv): string[] {
  const list = (env.RUNHOOK_TRUSTED_PROXIES ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of list) {
    const [addr, bits, extra] = p.split("/");
    const max = isIP(addr ?? "") === 4 ? 32 : isIP(addr ?? "") === 6 ? 128 : 0;
    const ok = max > 0 && extra === undefined && (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= max));
    if (!ok) throw new ConfigError(`RUNHOOK_TRUSTED_PROXIES must list IP addresses or CIDR ranges, got "${p}"`);
  }
  return list;
}

const localBaseUrl = (port: number) => `http://localhost:${port}`;

/**
 * Once the gateway listens: PORT=0 picked a free port, and webhook URLs must name the one
 * actually bound (the default public URL was made with port 0).
 */
export function bindPublicBaseUrl(config: Config, boundPort: number): void {
  if (config.publicBaseUrl === localBaseUrl(0)) config.publicBaseUrl = localBaseUrl(boundPort);
}

/** What the process is configured with that no log line may show: the bootstrap secret and the webhook signing keys (both base64 spellings). */
export function configuredSecrets(config: Pick<Config, "bootstrapSecret" | "signingKeys">): string[] {
  return [config.bootstrapSecret, ...[...config.signingKeys.values()].flatMap((key) => [key.toString("base64"), key.toString("base64url")])];
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const dataDir = resolve(env.RUNHOOK_DATA_DIR || ".data");
  const port = int(env, "PORT", 8080, 0, 65535);
  const host = env.HOST || "0.0.0.0";
  const needLocal = !env.RUNHOOK_SIGNING_KEYS || !env.RUNHOOK_BOOTSTRAP_SECRET;
  const secrets = needLocal ? localSecrets(dataDir) : undefined;
  const { keys, current } = signingKeys(env, secrets!);
  const bootstrapSecret = env.RUNHOOK_BOOTSTRAP_SECRET || secrets!.bootstrapSecret;
  if (bootstrapSecret.length < 16) throw new ConfigError("RUNHOOK_BOOTSTRAP_SECRET must be at least 16 characters");
  const publicBaseUrl = (env.PUBLIC_BASE_URL || localBaseUrl(port)).replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+(\/.*)?$/.test(publicBaseUrl)) throw new ConfigError(`PUBLIC_BASE_URL must be an http(s) URL, got "${publicBaseUrl}"`);
  const mongodbUri = env.MONGODB_URI || undefined;
  if (mongodbUri && !/^mongodb(\+srv)?:\/\//.test(mongodbUri)) throw new ConfigError("MONGODB_URI must start with mongodb:// or mongodb+srv://");
  if (mongodbUri && /[?&]w=0(&|$)/i.test(mongodbUri))
    throw new ConfigError("MONGODB_URI must not set w=0: runhook acknowledges only writes the database has confirmed");
  return {
    port,
    grpcPort: int(env, "GRPC_PORT", 50051, 0, 65535),
    host,
    mongodbUri,
    dbTimeoutMs: int(env, "RUNHOOK_DB_TIMEOUT_MS", 3000, 100, 600_000),
    dataDir,
    cacheDir: resolve(env.RUNHOOK_CACHE_DIR || join(env.HOME || dataDir, ".cache", "runhook")),
    embedded: embeddedMode(env),
    embeddedNoTableScan: bool(env, "RUNHOOK_EMBEDDED_NOTABLESCAN", false),
    embeddedHeapMb: env.RUNHOOK_EMBEDDED_HEAP_MB ? int(env, "RUNHOOK_EMBEDDED_HEAP_MB", 0, 128, 1_048_576) : undefined,
    embeddedPort: int(env, "RUNHOOK_EMBEDDED_PORT", 0, 0, 65535),
    publicBaseUrl,
    signingKeys: keys,
    signingKeyId: current,
    bootstrapSecret,
    logLevel: env.LOG_LEVEL || "info",
    bodyLimitBytes: int(env, "RUNHOOK_BODY_LIMIT_BYTES", 256 * 1024, 1024, 64 * 1024 * 1024),
    webhookRateLimitPerMinute: int(env, "RUNHOOK_WEBHOOK_RATE_LIMIT", 60, 1, 1_000_000),
    ...apiRateLimits(env),
    adminRateLimit: {
      perToken: int(env, "RUNHOOK_ADMIN_RATE_LIMIT", 300, 1, 1_000_000),
      perOrganization: int(env, "RUNHOOK_ADMIN_ORG_RATE_LIMIT", 1200, 1, 1_000_000),
    },
    projectOngoingRunsLimit: int(env, "RUNHOOK_PROJECT_ONGOING_RUNS_LIMIT", 10_000, 1, 100_000_000),
    docs: bool(env, "RUNHOOK_DOCS", true),
    console: bool(env, "RUNHOOK_CONSOLE", true),
    idempotencyTtlMs: idempotencyTtlMs(env),
    authFailureLimitPerMinute: int(env, "RUNHOOK_AUTH_FAILURE_LIMIT", 100, 1, 1_000_000),
    trustedProxies: trustedProxies(env),
    bootstrap: bool(env, "RUNHOOK_BOOTSTRAP", true),
    http: httpLimits(env),
    grpc: {
      idleTimeoutMs: int(env, "RUNHOOK_GRPC_IDLE_TIMEOUT_MS", 120_000, 100, 86_400_000),
      requestTimeoutMs: int(env, "RUNHOOK_GRPC_REQUEST_TIMEOUT_MS", 30_000, 100, 3_600_000),
      maxConcurrentStreams: int(env, "RUNHOOK_GRPC_MAX_CONCURRENT_STREAMS", 100, 1, 10_000),
      maxHeaderListSize: int(env, "RUNHOOK_GRPC_MAX_HEADER_LIST_SIZE", 16 * 1024, 1024, 1024 * 1024),
    },
    executor: executorConfig(env),
    metricsPort: metricsPort(env),
    writeConcern: writeConcern(env),
    retention: {
      runDays: int(env, "RUNHOOK_RUN_RETENTION_DAYS", DEFAULT_RETENTION.runDays, 1, 36_500),
      logDays: int(env, "RUNHOOK_LOG_RETENTION_DAYS", DEFAULT_RETENTION.logDays, 1, 36_500),
    },
    logDigestIntervalMs: int(env, "RUNHOOK_LOG_DIGEST_INTERVAL_MS", 60_000, 10, 86_400_000),
    // A real MongoDB is production until the operator asks for the demo: no live tokens in its logs.
    demo: bool(env, "RUNHOOK_DEMO", !mongodbUri),
    processes: processesOf(env),
    dataDatabasesAllowed: dataDatabasesAllowed(env),
  };
}

/** The public API's per-token limits: a project API token's or application token's, and an organization API token's (by default the same). */
function apiRateLimits(env: NodeJS.ProcessEnv): Pick<Config, "apiRateLimit" | "orgApiRateLimit"> {
  const d = DEFAULT_API_RATE_LIMITS;
  const max = MAX_API_RATE_LIMITS;
  const api: ApiRateLimits = {
    perMinute: int(env, "RUNHOOK_API_RATE_LIMIT", d.perMinute, 1, max.perMinute),
    perHour: int(env, "RUNHOOK_API_RATE_LIMIT_HOURLY", d.perHour, 1, max.perHour),
    perDay: int(env, "RUNHOOK_API_RATE_LIMIT_DAILY", d.perDay, 1, max.perDay),
  };
  const org: ApiRateLimits = {
    perMinute: int(env, "RUNHOOK_ORG_API_RATE_LIMIT", api.perMinute, 1, max.perMinute),
    perHour: int(env, "RUNHOOK_ORG_API_RATE_LIMIT_HOURLY", api.perHour, 1, max.perHour),
    perDay: int(env, "RUNHOOK_ORG_API_RATE_LIMIT_DAILY", api.perDay, 1, max.perDay),
  };
  return { apiRateLimit: api, orgApiRateLimit: org };
}

/**
 * RUNHOOK_IDEMPOTENCY_TTL_HOURS, at most the run retention: a key is forgotten before its run
 * can be removed (a run is removed RUNHOOK_RUN_RETENTION_DAYS after it finished, never before its
 * key was reserved), so a repeat never finds a remembered key without its run.
 */
function idempotencyTtlMs(env: NodeJS.ProcessEnv): number {
  const runDays = int(env, "RUNHOOK_RUN_RETENTION_DAYS", DEFAULT_RETENTION.runDays, 1, 36_500);
  const hours = int(env, "RUNHOOK_IDEMPOTENCY_TTL_HOURS", 24, 1, 24 * 365);
  if (hours > runDays * 24)
    throw new ConfigError(
      `RUNHOOK_IDEMPOTENCY_TTL_HOURS (${hours}) must not be longer than RUNHOOK_RUN_RETENTION_DAYS (${runDays} days = ${runDays * 24} hours): a key would outlive its run`,
    );
  return hours * 3_600_000;
}

/** Executors; by default one organization (and so one project) may hold all slots but one, which stays for the others. */
/** RUNHOOK_PROCESSES: a number of processes, or `auto` (one per core). */
function processesOf(env: NodeJS.ProcessEnv): number {
  const raw = env.RUNHOOK_PROCESSES?.trim();
  if (raw === "auto") return availableParallelism();
  return int(env, "RUNHOOK_PROCESSES", DEFAULT_PROCESSES, 1, 256);
}

function executorConfig(env: NodeJS.ProcessEnv): Config["executor"] {
  const concurrency = int(env, "RUNHOOK_EXECUTOR_CONCURRENCY", 8, 1, 1000);
  const organizationConcurrency = int(env, "RUNHOOK_EXECUTOR_ORGANIZATION_CONCURRENCY", Math.max(1, concurrency - 1), 1, concurrency);
  return {
    enabled: bool(env, "RUNHOOK_EXECUTOR", true),
    concurrency,
    organizationConcurrency,
    // A project is within its organization: never more than the organization's share.
    projectConcurrency: Math.min(organizationConcurrency, int(env, "RUNHOOK_EXECUTOR_PROJECT_CONCURRENCY", organizationConcurrency, 1, concurrency)),
    pollIntervalMs: int(env, "RUNHOOK_EXECUTOR_POLL_MS", 500, 10, 60_000),
    leaseMs: int(env, "RUNHOOK_EXECUTOR_LEASE_MS", 10_000, 1000, 600_000),
    // Half the executors at most by default: webhook runs never queue behind a batch's thousands.
    batchOngoingRuns: int(env, "RUNHOOK_BATCH_ONGOING_RUNS", Math.max(1, Math.floor(concurrency / 2)), 1, 100_000),
  };
}
