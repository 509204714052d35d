// Paging a log: one page after (or before) a cursor, or the whole selection as a stream, over
// the ordering protocol of domain/logs/reader.ts. Ascending pages never pass an unresolved
// position, so a consumer polling `next_cursor` receives every entry exactly once, in order.
import type { Store } from "../../store/index.js";
import { isFiltered, type LogDocOf, type LogKind, type LogSelection, type SeqRange } from "../../store/logs.js";
import type { CursorCodec, Paging } from "./cursor.js";
import type { LogReader } from "./reader.js";
import { withDigests, type ExportItem } from "./digests.js";

/** What a log is read through: the store, the reader of its ordering protocol, and the cursor codec. */
export interface LogSource {
  store: Store;
  reader: LogReader;
  codec: CursorCodec;
}

/** A list request resolved: its stream, its selection and the cursor binding. */
export interface LogQuery {
  stream: string;
  selection: LogSelection;
  hash: string;
}

export interface LogPage<T> {
  docs: T[];
  hasMore: boolean;
  nextCursor: string | undefined;
}

/** Drops the look-ahead entry of a `limit + 1` read. */
function page<T extends { seq: number }>(docs: T[], limit: number): { docs: T[]; hasMore: boolean } {
  return docs.length > limit ? { docs: docs.slice(0, limit), hasMore: true } : { docs, hasMore: false };
}

/** The position of the request's cursor (undefined without one); an ascending one into entries retention removed is refused. */
async function cursorPosition({ reader, codec }: LogSource, kind: LogKind, q: LogQuery, p: Paging): Promise<number | undefined> {
  if (!p.cursor) return undefined;
  const pos = codec.decode(p.cursor, q.hash);
  if (p.order === "asc") await reader.checkCursor(kind, q.stream, pos);
  return pos;
}

/**
 * One page of a log. Ascending: entries after the cursor, never past an unresolved
 * position; descending: before it, starting at the watermark. The cursor position is the
 * sequence number within the stream.
 *
 * Without filters, ascending: a forward walk of the stream (ranges below the watermark,
 * position look-ups above it), O(limit). With filters: a query on (scope, filter…, seq)
 * bounded by the watermark, O(limit) through the indexes. Descending: one range query
 * below the watermark (every position there is resolved).
 */
export async function readPage<K extends LogKind>(source: LogSource, kind: K, q: LogQuery, p: Paging): Promise<LogPage<LogDocOf<K>>> {
  const { store, reader, codec } = source;
  const logs = store.logs;
  const pos = await cursorPosition(source, kind, q, p);
  const filtered = isFiltered(q.selection);
  if (p.order === "desc") {
    const range = pos !== undefined ? { before: pos } : { upTo: await reader.advance(kind, q.stream) };
    const read = filtered ? logs.select(kind, q.selection, range, -1, p.limit + 1) : logs.entries(kind, q.stream, range, -1, p.limit + 1);
    const { docs, hasMore } = page(await read, p.limit);
    return { docs, hasMore, nextCursor: hasMore ? codec.encode(docs[docs.length - 1]!.seq, q.hash) : undefined };
  }
  const after = pos ?? 0;
  if (!filtered) {
    const docs: LogDocOf<K>[] = [];
    let hasMore = false;
    let last = after;
    for await (const r of reader.forward(kind, q.stream, after, { batch: p.limit + 1 })) {
      if (r.doc) {
        if (docs.length === p.limit) {
          hasMore = true;
          break;
        }
        docs.push(r.doc);
      }
      last = r.seq;
    }
    // Caught up: every position up to `last` is resolved, so the cursor moves there.
    return { docs, hasMore, nextCursor: codec.encode(last, q.hash) };
  }
  // Serve from the stored watermark when that fills the page; advance only otherwise.
  let wm = await reader.stored(q.stream);
  let docs = wm > after ? await logs.select(kind, q.selection, { after, upTo: wm }, 1, p.limit + 1) : [];
  if (docs.length <= p.limit) {
    const wm2 = await reader.advance(kind, q.stream);
    const from = Math.max(wm, after);
    if (wm2 > from) docs = docs.concat(await logs.select(kind, q.selection, { after: from, upTo: wm2 }, 1, p.limit + 1 - docs.length));
    wm = Math.max(wm, wm2);
  }
  const r = page(docs, p.limit);
  // Caught up: everything up to the watermark has been considered, so the cursor moves there.
  const nextPos = r.hasMore ? r.docs[r.docs.length - 1]!.seq : Math.max(after, wm);
  return { ...r, nextCursor: codec.encode(nextPos, q.hash) };
}

/** What an export reads: the positions from the cursor up to the watermark as of now, and the order. */
async function exportRange(source: LogSource, kind: LogKind, q: LogQuery, p: Paging): Promise<{ range: SeqRange; order: 1 | -1 }> {
  const pos = await cursorPosition(source, kind, q, p);
  const wm = await source.reader.advance(kind, q.stream);
  const range = p.order === "asc" ? { after: pos ?? 0, upTo: wm } : pos !== undefined ? { before: pos } : { upTo: wm };
  return { range, order: p.order === "asc" ? 1 : -1 };
}

/**
 * Every matching entry from the cursor up to the watermark as of the start, in one pass
 * and constant memory: the watermark advance, then one indexed scan sorted by seq. With
 * `digests`, the stream's signed digests that the export covers come with them (digests.ts).
 */
export async function* exportLog<K extends LogKind>(source: LogSource, kind: K, q: LogQuery, p: Paging, digests: boolean): AsyncGenerator<ExportItem<K>> {
  const read = await exportRange(source, kind, q, p);
  const entries = source.store.logs.scan(kind, q.selection, read.range, read.order);
  if (digests) yield* withDigests(source.store, kind, q, read, entries);
  else for await (const doc of entries) yield { doc };
}
