// Signed digests of the log streams: making them (worker/log-digests.ts runs makeDigests for
// the streams written lately, off the request path) and weaving them into an export, each
// after the last entry it covers. The rules of what is hashed and signed: digest-format.ts.
import { createHash } from "node:crypto";
import type { Store } from "../../store/index.js";
import { isFiltered, streamKey, type LogDocOf, type LogKind, type LogSelection, type SeqRange } from "../../store/logs.js";
import type { DigestHead } from "../../store/log-digests.js";
import type { LogDigestDoc } from "../../store/types.js";
import { DIGEST_VERSION, entryHash, leavesHash, MAX_DIGEST_POSITIONS, signedText, type DigestLine, type Leaf } from "./digest-format.js";
import type { LogSigner } from "./digest-keys.js";
import type { LogReader } from "./reader.js";

/** An entry as the NDJSON export writes it, made from the stored entry alone (no names looked up). */
export type StoredItem = (kind: LogKind, doc: LogDocOf<LogKind>) => Promise<Record<string, unknown> & { object: string }>;

export interface DigestMaker {
  store: Store;
  reader: LogReader;
  signer: LogSigner;
  itemOf: StoredItem;
  /** A stream gets a digest at most this often (unless MAX_DIGEST_POSITIONS positions wait). */
  intervalMs: number;
}

/** The most digests one call makes for a stream (a backlog of a million positions); the rest waits for the next pass. */
const MAX_DIGESTS_PER_PASS = 100;
const HASH_BYTES = 32;

/** The digest of the positions from…to of a stream, chained to `last`, signed now. */
async function digestOf(
  m: DigestMaker,
  kind: LogKind,
  stream: string,
  range: { from: number; to: number },
  last: DigestHead | null,
  now: Date,
): Promise<LogDigestDoc> {
  const { from, to } = range;
  const docs = await m.store.logs.entries(kind, stream, { after: from - 1, upTo: to }, 1, MAX_DIGEST_POSITIONS);
  const leaves: Leaf[] = [];
  for (const d of docs) leaves.push([d.seq, entryHash(await m.itemOf(kind, d))]);
  const payload = {
    version: DIGEST_VERSION,
    stream,
    from,
    to,
    entries: leaves.length,
    hash: leavesHash(leaves),
    previous: last?.digest ?? "",
    createdAt: now.toISOString(),
    keyId: m.signer.keyId,
  };
  const text = signedText(payload);
  const present = new Set(docs.map((d) => d.seq));
  const empty: number[] = [];
  for (let n = from; n <= to; n++) if (!present.has(n)) empty.push(n);
  return {
    _id: streamKey(stream, from),
    stream,
    from,
    to,
    payload: text,
    signature: m.signer.sign(text),
    digest: createHash("sha256").update(text, "utf8").digest("hex"),
    empty,
    hashes: Buffer.concat(leaves.map(([, hash]) => Buffer.from(hash, "hex"))).toString("base64"),
    createdAt: now,
    timestamp: docs[0]?.timestamp ?? now,
  };
}

/**
 * Digests what is resolved of a stream since its last digest: the positions up to its
 * watermark (advanced first: every position there holds an entry or a tombstone), at most
 * MAX_DIGEST_POSITIONS a digest, and no sooner than `intervalMs` after the last one unless that
 * many wait. A digest another process stored first at the same position is theirs: the chain
 * goes on from the one stored. Says how many this call stored, and whether the stream is
 * covered up to its watermark (otherwise: too soon, or more than MAX_DIGESTS_PER_PASS digests due).
 */
export async function makeDigests(m: DigestMaker, kind: LogKind, stream: string, now = new Date()): Promise<{ made: number; caughtUp: boolean }> {
  let made = 0;
  for (let i = 0; i < MAX_DIGESTS_PER_PASS; i++) {
    const last = await m.store.logDigests.last(stream);
    const watermark = await m.reader.advance(kind, stream);
    // A stream's first digest starts at its oldest position kept (retention may have removed the first).
    const from = last ? last.to + 1 : await m.store.logs.oldest(kind, stream);
    if (from === null || from > watermark) return { made, caughtUp: true };
    const waiting = watermark - from + 1;
    if (last && waiting < MAX_DIGEST_POSITIONS && now.getTime() - last.createdAt.getTime() < m.intervalMs) return { made, caughtUp: false };
    const to = Math.min(watermark, from + MAX_DIGEST_POSITIONS - 1);
    if (await m.store.logDigests.insert(await digestOf(m, kind, stream, { from, to }, last, now))) made++;
  }
  return { made, caughtUp: false };
}

/** A stored digest as the export writes it. */
export function digestLineOf(doc: LogDigestDoc): DigestLine {
  const payload = JSON.parse(doc.payload) as Omit<DigestLine, "signature" | "leaves">;
  const hashes = Buffer.from(doc.hashes, "base64");
  const empty = new Set(doc.empty);
  const leaves: Leaf[] = [];
  for (let n = doc.from; n <= doc.to; n++) {
    if (empty.has(n)) continue;
    const k = leaves.length * HASH_BYTES;
    leaves.push([n, hashes.subarray(k, k + HASH_BYTES).toString("hex")]);
  }
  return { ...payload, signature: doc.signature, leaves };
}

/** Whether a selection picks entries by what they say (user, action, record…), not only by time. */
function picksEntries(s: LogSelection): boolean {
  return isFiltered({ ...s, fromMicros: undefined, toMicros: undefined });
}

/**
 * The digests an export of `range` (from exportRange) carries. Without filters on what entries
 * say: the digests whose whole range the export covers, all of whose positions are still kept
 * (retention removes a digest with its first entry, and may be a moment late), so that a verifier
 * finds every entry they list. With such filters: every digest whose range the export touches
 * (their leaves prove the entries shown; completeness cannot be proven for a subset).
 */
async function* digestsOf(store: Store, kind: LogKind, stream: string, s: LogSelection, range: SeqRange, order: 1 | -1): AsyncGenerator<LogDigestDoc> {
  const span = await store.logs.bounds(kind, s, range);
  if (!span) return;
  const low = span.after ?? 0;
  const high = span.upTo ?? (span.before === undefined ? Number.MAX_SAFE_INTEGER : span.before - 1);
  if (picksEntries(s)) {
    for await (const d of store.logDigests.starting(stream, Math.max(0, low - MAX_DIGEST_POSITIONS), high, order)) if (d.to > low) yield d;
    return;
  }
  const kept = (await store.logs.oldest(kind, stream)) ?? 1;
  for await (const d of store.logDigests.starting(stream, Math.max(low, kept - 1), high, order)) if (d.to <= high) yield d;
}

/** One item of an export: an entry, or a digest. */
export type ExportItem<K extends LogKind> = { doc: LogDocOf<K>; digest?: undefined } | { doc?: undefined; digest: DigestLine };

/** The export's entries with its digests woven in, each digest right after the last entry (in the export's order) it covers. */
export async function* withDigests<K extends LogKind>(
  store: Store,
  kind: K,
  q: { stream: string; selection: LogSelection },
  read: { range: SeqRange; order: 1 | -1 },
  entries: AsyncIterable<LogDocOf<K>>,
): AsyncGenerator<ExportItem<K>> {
  const digests = digestsOf(store, kind, q.stream, q.selection, read.range, read.order);
  const passed = (d: LogDigestDoc, seq: number) => (read.order === 1 ? d.to < seq : d.from > seq);
  try {
    let next = (await digests.next()).value as LogDigestDoc | undefined;
    for await (const doc of entries) {
      while (next && passed(next, doc.seq)) {
        yield { digest: digestLineOf(next) };
        next = (await digests.next()).value as LogDigestDoc | undefined;
      }
      yield { doc };
    }
    for (; next; next = (await digests.next()).value as LogDigestDoc | undefined) yield { digest: digestLineOf(next) };
  } finally {
    await digests.return(undefined);
  }
}
