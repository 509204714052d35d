// The signed digests of the log streams (domain/logs/digests.ts makes them), and the one read
// of the logs that finds the streams written lately.
import type { Filter } from "mongodb";
import type { Database } from "./connection.js";
import { isDuplicateKey } from "./errors.js";
import { logCollections, streamKey, type LogKind, type Position } from "./logs.js";
import type { LogDigestDoc } from "./types.js";

/** The digest fields that chaining the next one needs (the rest is large: the hashes). */
export type DigestHead = Pick<LogDigestDoc, "_id" | "to" | "digest" | "createdAt">;

export interface LogDigestStore {
  /** The stream's digest covering the highest positions, or null before its first. */
  last(stream: string): Promise<DigestHead | null>;
  /** Stores a digest; false when a digest starting at the same position is stored already (another process's). */
  insert(doc: LogDigestDoc): Promise<boolean>;
  /** The stream's digests whose first position is within (after, upTo], by first position in `order`, read a few at a time. */
  starting(stream: string, after: number, upTo: number, order: 1 | -1): AsyncGenerator<LogDigestDoc>;
  /** The time of the newest first entry any digest covers (null before the first digest). */
  newestCovered(): Promise<Date | null>;
  /** The streams of a log with a position (entry or tombstone) stamped at or after `since`. */
  streamsSince(kind: LogKind, since: Date): Promise<Set<string>>;
}

/** The `_id` range of a stream's digests (the whole stream where a side is open). */
function digestRange(stream: string, after?: number, upTo?: number): Record<string, string> {
  return { $gt: after === undefined ? `${stream}:` : streamKey(stream, after), $lte: upTo === undefined ? `${stream};` : streamKey(stream, upTo) };
}

// A digest holds up to 10,000 hashes (~430 KB): a few per batch.
const DIGEST_BATCH = 4;
const STREAM_SCAN_BATCH = 1000;
/** The latest time a Date holds. */
const MAX_DATE_MS = 8.64e15;

export function logDigestStore(d: Database): LogDigestStore {
  const logs = logCollections(d);
  return {
    last: (stream) =>
      d.logDigests.findOne({ _id: digestRange(stream) } as Filter<LogDigestDoc>, {
        sort: { _id: -1 },
        projection: { _id: 1, to: 1, digest: 1, createdAt: 1 },
      }),
    async insert(doc) {
      try {
        await d.logDigests.insertOne(doc);
        return true;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        return false;
      }
    },
    async *starting(stream, after, upTo, order) {
      const cursor = d.logDigests
        .find({ _id: digestRange(stream, after, upTo) } as Filter<LogDigestDoc>)
        .sort({ _id: order })
        .batchSize(DIGEST_BATCH);
      try {
        for await (const doc of cursor) yield doc;
      } finally {
        await cursor.close();
      }
    },
    async newestCovered() {
      // On the retention index.
      const doc = await d.logDigests.findOne({ timestamp: { $lte: new Date(MAX_DATE_MS) } }, { sort: { timestamp: -1 }, projection: { timestamp: 1 } });
      return doc?.timestamp ?? null;
    },
    async streamsSince(kind, since) {
      // The logs' time index (retention's) finds the positions of the last moments; each names
      // its stream in its `_id` (`<stream>:<position>`), tombstones too. No scope index is
      // needed, and the read costs what those positions' writes did: it is one pass over the
      // entries of the last few minutes, off the request path, where listing every environment,
      // project and organization would read them all at every pass, and stamping a stream's
      // counter with its time would add an index write to every append.
      const streams = new Set<string>();
      const cursor = logs[kind].find({ timestamp: { $gte: since } } as Filter<Position>, { projection: { _id: 1 } }).batchSize(STREAM_SCAN_BATCH);
      for await (const doc of cursor) streams.add(doc._id.slice(0, doc._id.lastIndexOf(":")));
      return streams;
    },
  };
}
