// The background pass that signs the digests of the log streams (domain/logs/digests.ts), in
// a server process: every RUNHOOK_LOG_DIGEST_INTERVAL_MS, each stream written since the last
// pass gets a digest of what is resolved of it. It runs beside the requests, never on their
// path: an append or a read never waits for it.
import type { Deps } from "../deps.js";
import { isUnavailable } from "../store/index.js";
import type { LogKind } from "../store/logs.js";
import { logSigner } from "../domain/logs/digest-keys.js";
import { makeDigests, type DigestMaker, type StoredItem } from "../domain/logs/digests.js";
import { createLogReader } from "../domain/logs/reader.js";

/**
 * How far before a pass's start the next one looks for written streams: an entry is stamped
 * when its number is taken and stored a moment later, and a stream passed over because its last
 * digest is recent must be found again.
 */
const MIN_LOOKBACK_MS = 30_000;
/**
 * Where a process's first pass looks from: a few lookbacks before the newest entry a digest
 * covers (what was written since, while no server signed, is found), or on a database without
 * digests yet an hour back. A stream written before and not since gets its first digest, which
 * covers all it keeps, at its next entry.
 */
const FIRST_LOOKBACK_MS = 3_600_000;

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
  let since: Date | undefined;
  // Streams to visit again whatever is written: their last visit failed, or left positions undigested.
  const again = new Set<string>();
  let stopped = false;

  async function pass(): Promise<void> {
    const started = Date.now();
    since ??= new Date(((await store.logDigests.newestCovered())?.getTime() ?? started - FIRST_LOOKBACK_MS) - 3 * lookbackMs);
    const streams = new Set(again);
    for (const kind of ["activity", "admin"] as const) for (const s of await store.logDigests.streamsSince(kind, since)) streams.add(s);
    since = new Date(started - lookbackMs);
    for (const stream of streams) {
      if (stopped) return;
      try {
        if ((await makeDigests(maker, kindOf(stream), stream)).caughtUp) again.delete(stream);
        else again.add(stream);
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
