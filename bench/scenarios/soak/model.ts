import { PUBLISHED_MAX_LIMIT } from "../../../src/http/published.js";

export type Kind = "webhook" | "grpc" | "runGet" | "logsPage" | "noteCreate" | "noteList";
export const KINDS: Kind[] = ["webhook", "grpc", "runGet", "logsPage", "noteCreate", "noteList"];
/** Arrivals per 100 of each kind. */
export const MIX: Record<Kind, number> = { webhook: 50, grpc: 3, runGet: 20, logsPage: 10, noteCreate: 7, noteList: 10 };
export const KIND_LABEL: Record<Kind, string> = {
  webhook: "POST /hooks/{key}",
  grpc: "gRPC TriggerRun",
  runGet: "GET /v1/runs/{id}",
  logsPage: "GET …/activity-logs (tail: order=asc)",
  noteCreate: "POST …/notes",
  noteList: "GET …/notes",
};
export const SHORT: Record<Kind, string> = {
  webhook: "webhook",
  grpc: "gRPC",
  runGet: "run GET",
  logsPage: "logs page",
  noteCreate: "note POST",
  noteList: "note list",
};
export const TRIGGER_SHARE = (MIX.webhook + MIX.grpc) / 100;

export const REQUEST_TIMEOUT_MS = 30_000;
/** GET /v1/runs/{id} reads the newest run accepted at least this long before. */
export const FOLLOW_AFTER_MS = 1000;
/** Every CONFLICT_EVERY-th REST trigger of a tenant goes out twice at once on the same record (→ one 409). */
export const CONFLICT_EVERY = 50;
/** An activity-log page of the tail: the most the published list gives. */
export const LOG_PAGE = PUBLISHED_MAX_LIMIT;
export const RSS_EVERY_MS = 5000;
/** A minute is printed once all its requests answered, or this long after it ended. */
export const PRINT_GRACE_MS = 10_000;
/** RSS slope (MB/min) below which a process counts as flat; max/min of per-minute p99 below which it counts as stable. */
export const FLAT_MB_PER_MIN = 1;
export const STABLE_P99_RATIO = 2;
/** A minute's p99 is judged only above this many requests of its kind: at 100 or fewer it is simply the slowest one. */
export const MIN_P99_REQUESTS = 101;

export interface SoakOptions {
  durationMs: number;
  /** Length of one reporting window ("minute"). */
  windowMs: number;
  /** Worker processes (executors); 0 = executors inside the server. */
  workers: number;
  /** Fixed arrival rate (req/s) instead of measuring capacity. */
  ratePerSec?: number;
  /** Share of the measured capacity to run at. */
  share: number;
  capacityMs: number;
  capacityConcurrency: number;
  /** Records per tenant. */
  records: number;
}

export interface KindFigures {
  n: number;
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** Answers other than the expected ones (202/409, 200, 201), by status. */
  errors: number;
  statuses: Record<string, number>;
}

export interface SoakWindow {
  /** 1-based. */
  minute: number;
  fromS: number;
  durationS: number;
  arrivals: number;
  dropped: number;
  acceptedPerSec: number;
  conflicts: number;
  errors: number;
  /** Runs whose finishedAt falls in the window, per second (all tenants). */
  finishedPerSec: number | null;
  /** QUEUED + RUNNING runs at the window's end. */
  backlog: number | null;
  runsStored: number | null;
  activityEntries: number | null;
  /** VmRSS at the window's end, and the highest sample in it (every 5 s). */
  rssMb: Record<string, number | null>;
  rssPeakMb: Record<string, number | null>;
  kinds: Record<Kind, KindFigures>;
  /** Of the followed runs (GET /v1/runs about 1 s after the accept), the share already finished. */
  followedFinished: number | null;
  logEntriesRead: number;
  /** How late the generator issued requests (included in the latencies). */
  genLagP99Ms: number | null;
  /** The machine's 1-minute load average at the window's end (the machine may be shared). */
  loadAvg1: number | null;
}

export interface Capacity {
  concurrency: number;
  durationMs: number;
  /** The mix in the closed loop, arrivals/s. */
  mixPerSec: number;
  kinds: Record<Kind, KindFigures>;
  acceptedPerSec: number;
  /** Runs finished per second during the closed loop (executors sharing the machine with it). */
  finishedPerSec: number;
  backlogAfter: number;
  /** Runs finished per second while the backlog drained with the load off (null: under 2 s of backlog). */
  drainRunsPerSec: number | null;
  drainMs: number;
  cancelled: number;
  /** The mix's capacity, requests/s, and how it was obtained. */
  capacityPerSec: number;
  how: string;
}

export interface SoakVerdict {
  warmupMinutes: number;
  rss: { process: string; slopeMbPerMin: number | null; firstMb: number | null; lastMb: number | null; flat: boolean | null; note?: string }[];
  /** judged: every minute compared had at least MIN_P99_REQUESTS of the kind (below that its p99 is its max). */
  p99: { kind: Kind; minMs: number | null; maxMs: number | null; ratio: number | null; judged: boolean; stable: boolean | null }[];
  rssFlat: boolean | null;
  p99Stable: boolean | null;
  text: string;
}

export interface SoakResult {
  options: SoakOptions;
  mix: Record<Kind, number>;
  processes: Record<string, number | undefined>;
  tenants: number;
  capacity: Capacity | null;
  targetPerSec: number;
  windows: SoakWindow[];
  rssSamples: { t: number; mb: Record<string, number | null> }[];
  totals: {
    arrivals: number;
    issued: number;
    dropped: number;
    unanswered: number;
    maxInFlight: number;
    accepted: number;
    conflicts: number;
    errors: number;
    elapsedS: number;
  };
  verdict: SoakVerdict;
}

/** `90s`, `3m`, `10m`, `1h`, `1.5m`, `500ms` → ms; undefined when malformed (a unit is required). */
export function parseDuration(s: string | undefined): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec((s ?? "").trim());
  if (!m) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ms" | "s" | "m" | "h"];
  const v = Math.round(Number(m[1]) * unit);
  return v > 0 ? v : undefined;
}
