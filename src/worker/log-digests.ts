// The background pass that signs the digests of the log streams (domain/logs/digests.ts), in
// a server process: every RUNHOOK_LOG_DIGEST_INTERVAL_MS, each stream written since the last
// pass gets a digest of what is resolved of it. It runs beside the requests, never on their
// path: an append or a read never waits for it.
import type { Deps } from "../deps.js";
import { isUnavailable } from "../store/index.js";
import type { LogKind } from "../store/logs.js";
import { logSigner } from "../domain/logs/digest-keys.js";
import { makeDigests, MAX_DIGESTS_PER_PASS, type DigestMaker, type StoredItem } from "../domain/logs/digests.js";
import { createLogReader } from "../domain/logs/reader.js";

/**
 * How far before a pass's start the next one looks for written streams: an entry is stamped
 * when its number is taken and stored a moment later, and a stream passed over because its last
 * digest is recent must be found again.
 */
const MIN_LOOKBACK_MS = 30_000;
/** The first pass looks back a day; a stream quiet since then gets its first digest (covering all it keeps) at its next entry. */
const START_LOOKBACK_MS = 86_400_000;

export interface LogDigester {
  /** Runs one pass now (after the one under way, if any). */
  runOnce(): Promise<void>;
  stop(): Promise<void>;
}

const kindOf = (stream: string): LogKind => (stream.startsWith("a:") ? "activity" : "admin");

export function startLogDigests(deps: Pick<Deps, "store" | "config" | "logger">, itemOf: StoredItem): LogDigester {
  const { store, config, logger } = deps;
  const intervalMs = config.logDigestIntervalMs;
  const reader = createLogReader(store, { retentionDays: config.retention.logDays });
  const maker: DigestMaker = { store, reader, signer: logSigner(config), itemOf, intervalMs };
  const lookbackMs = Math.max(2 * intervalMs, MIN_LOOKBACK_MS);
  let since = new Date(Date.now() - START_LOOKBACK_MS);
  // Streams to visit again whatever they were written: their last visit failed or left a backlog.
  const again = new Set<string>();
  let stopped = false;

  async function pass(): Promise<void> {
    const started = Date.now();
    const streams = new Set(again);
    for (const kind of ["activity", "admin"] as const) for (const s of await store.logDigests.streamsSince(kind, since)) streams.add(s);
    since = new Date(started - lookbackMs);
    for (const stream of streams) {
      if (stopped) return;
      try {
        const made = await makeDigests(maker, kindOf(stream), stream);
        if (made >= MAX_DIGESTS_PER_PASS) again.add(stream);
        else again.delete(stream);
      } catch (err) {
        again.add(stream);
        if (!isUnavailable(err)) logger.warn({ err, stream }, "making a log digest failed; tried again at the next pass");
      }
    }
  }

  let running: Promise<void> = Promise.resolve();
  const runOnce = () => {
    running = running.then(() =>
      pass().catch((err: unknown) => {
        if (!isUnavailable(err)) logger.warn({ err }, "finding the log streams to digest failed; tried again at the next pass");
      }),
    );
    return running;
  };
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    timer = setTimeout(() => void runOnce().then(() => !stopped && schedule()), intervalMs);
    timer.unref();
  };
  schedule();
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
