// The activity and admin logs as stored: numbered streams of entries.
//
// Every log is split into independent streams — the activity log per environment
// (`a:<environmentId>`), the admin log per project (`m:<projectId>`; entries without a project
// go to `m:org:<organizationId>`, the organization's own, which organization API tokens list).
// A stream's counter (`counters._id =
// stream`) hands out its numbers, and entry n is stored under `_id` = `<stream>:<n, 12 digits>`
// with n also in `seq`, so a position is found by `_id` and string order is number order.
// The ordering protocol that makes tailing exact (holes, tombstones, watermarks) is in
// src/domain/logs/reader.ts; these are its primitives.
import type { Collection, Filter } from "mongodb";
import type { Database } from "./connection.js";
import type { CounterStore } from "./counters.js";
import { isDuplicateKey } from "./errors.js";
import { groupedInsert, type Taken } from "./group-commit.js";
import type { ActivityLogDoc, AdminLogDoc, PendingLogEntry, RunDoc } from "./types.js";

export type LogKind = "activity" | "admin";
export type LogDocOf<K extends LogKind> = K extends "activity" ? ActivityLogDoc : AdminLogDoc;
/** What every stored position has: an entry or a tombstone. */
export interface Position {
  _id: string;
  seq: number;
  tomb?: true;
}

/** Digits of the zero-padded sequence number in an entry's `_id` (string order = number order). */
export const SEQ_DIGITS = 12;

export function activityStream(environmentId: string): string {
  return `a:${environmentId}`;
}

export function adminStream(organizationId: string, projectId: string | null): string {
  return projectId ? `m:${projectId}` : `m:org:${organizationId}`;
}

/** The `_id` of the entry (or tombstone) at `seq` of `stream`. */
export function streamKey(stream: string, seq: number): string {
  return `${stream}:${String(seq).padStart(SEQ_DIGITS, "0")}`;
}

/** The counter holding a stream's watermark. */
export function watermarkId(stream: string): string {
  return `${stream}:watermark`;
}

export type NewActivity = Omit<ActivityLogDoc, "_id" | "seq" | "timestamp" | "micros" | "tomb">;
export type NewAdminEntry = Omit<AdminLogDoc, "_id" | "seq" | "timestamp" | "micros" | "tomb">;

/** Which entries of one stream a filtered page or an export selects (empty strings select all). */
export interface LogSelection {
  /** Activity: the environment; admin: the project, or with `organization` the organization. */
  scopeId: string;
  /** Admin only: the organization's own stream (its entries without a project), scopeId being the organization. */
  organization?: boolean;
  userId?: string;
  userEmail?: string;
  /** Entries with any of these actions (absent: any action; empty: none). */
  actions?: readonly string[];
  /** Activity only: entries of any of these renderings, null naming entries of none (absent: any). */
  renderings?: readonly (string | null)[];
  collection?: string;
  recordId?: string;
  runId?: string;
  /** Entries at or after this time, in microseconds since the epoch. */
  fromMicros?: number;
  /** Entries before this time, in microseconds since the epoch. */
  toMicros?: number;
}

/** Whether a selection needs the query path (attribute filters or a time range). */
export function isFiltered(s: LogSelection): boolean {
  return Boolean(
    s.userId || s.userEmail || s.actions || s.renderings || s.collection || s.recordId || s.runId || s.fromMicros !== undefined || s.toMicros !== undefined,
  );
}

/** The most queries one selection makes (one per action and rendering, each in index order, merged). */
export const MAX_SELECTION_QUERIES = 16;

export interface SeqRange {
  after?: number;
  before?: number;
  upTo?: number;
}

/** Where an entry of a change is: in the log at its reserved position, or the position was given up (a tombstone is there). */
export type PendingOutcome = "written" | "tombstoned";

export interface LogStore {
  appendActivity(entry: NewActivity): Promise<number>;
  /** The next number of a stream, with its time: a position reserved for an entry (see putPending). */
  take(stream: string): Promise<Taken>;
  /**
   * Writes a change's entry at its reserved position, idempotently: "written" when it is there
   * (put now, or earlier by another process), "tombstoned" when a reader gave the position up.
   */
  putPending(p: PendingLogEntry): Promise<PendingOutcome>;
  /** The entry a run holds for a position of an activity stream (see PendingLogEntry), or null. */
  pendingAt(kind: LogKind, stream: string, seq: number): Promise<PendingLogEntry | null>;
  appendAdmin(entry: NewAdminEntry): Promise<number>;
  /** The highest number taken in a stream so far. */
  counter(stream: string): Promise<number>;
  watermark(stream: string): Promise<number>;
  raiseWatermark(stream: string, pos: number): Promise<void>;
  /** The lowest position stored in a stream (entry or tombstone), or null when none is. */
  oldest(kind: LogKind, stream: string): Promise<number | null>;
  /** What is stored at one position (entry or tombstone), or null. */
  at(kind: LogKind, stream: string, seq: number, fields?: string[]): Promise<Position | null>;
  /** Entries (no tombstones) of a stream with after < seq ≤ upTo (or < before), in `order`, at most `limit`. */
  entries<K extends LogKind>(kind: K, stream: string, range: SeqRange, order: 1 | -1, limit: number): Promise<LogDocOf<K>[]>;
  /** What is stored at the positions after < seq ≤ upTo, entries and tombstones, in order. */
  positions(kind: LogKind, stream: string, after: number, upTo: number): Promise<Position[]>;
  /** Puts a tombstone at a position nothing was stored at; false when something is there already. */
  tombstone(kind: LogKind, stream: string, seq: number): Promise<boolean>;
  /** Entries matching a selection within a range of its stream, by seq in `order`. */
  select<K extends LogKind>(kind: K, s: LogSelection, range: SeqRange, order: 1 | -1, limit: number): Promise<LogDocOf<K>[]>;
  /** Whether any activity entry names the run (its start is logged once it is stored). */
  mentionsRun(runId: string): Promise<boolean>;
  /** The numbers a selection's time range spans within `r` (null: none), as `select` and `scan` read them. */
  bounds(kind: LogKind, s: LogSelection, r: SeqRange): Promise<SeqRange | null>;
  /** The same as one stream read in batches (the NDJSON export), in constant memory. */
  scan<K extends LogKind>(kind: K, s: LogSelection, range: SeqRange, order: 1 | -1): AsyncGenerator<LogDocOf<K>>;
}

/** The `_id` range of a stream's positions within `r` (the whole stream where `r` leaves a side open). */
function keyRange(stream: string, r: SeqRange): Record<string, string> {
  const id: Record<string, string> = {};
  id.$gt = streamKey(stream, r.after ?? 0);
  if (r.upTo !== undefined) id.$lte = streamKey(stream, r.upTo);
  else if (r.before !== undefined) id.$lt = streamKey(stream, r.before);
  else id.$lt = `${stream};`; // just past the stream's keys
  return id;
}

function seqFilter(r: SeqRange): Record<string, number> {
  const f: Record<string, number> = {};
  if (r.after !== undefined) f.$gt = r.after;
  if (r.upTo !== undefined) f.$lte = r.upTo;
  if (r.before !== undefined) f.$lt = r.before;
  return f;
}

/**
 * The stream's entries as a selection finds them: activity by environment, admin by project,
 * or an organization's own stream by (organization, no project). Tombstones (null scope fields)
 * match none of these.
 */
function scopeFilter(kind: LogKind, s: LogSelection): Record<string, unknown> {
  if (kind === "activity") return { environmentId: s.scopeId };
  return s.organization ? { organizationId: s.scopeId, projectId: null } : { projectId: s.scopeId };
}

/** One action and one rendering of a selection's alternatives (undefined: any). */
interface Alternative {
  action?: string;
  rendering?: string | null;
}

/**
 * The queries of a selection: one per action and rendering it allows, each served in `seq`
 * order by an index, merged by the caller; past MAX_SELECTION_QUERIES, one query with `$in`
 * (served by the scope's index, the list filtered along it). None when it allows no action.
 */
function alternatives(s: LogSelection): Alternative[] {
  const actions = s.actions ? [...new Set(s.actions)] : [undefined];
  const renderings = s.renderings ? [...new Set(s.renderings)] : [undefined];
  if (actions.length * renderings.length > MAX_SELECTION_QUERIES) return [{}];
  return actions.flatMap((action) => renderings.map((rendering) => ({ action, rendering })));
}

function selectionFilter(kind: LogKind, s: LogSelection, r: SeqRange, alt: Alternative): Record<string, unknown> {
  const f = scopeFilter(kind, s);
  const user = kind === "activity" ? "user" : "actor";
  if (s.userId) f[`${user}.id`] = s.userId;
  if (s.userEmail) f[`${user}.email`] = s.userEmail;
  if (alt.action !== undefined) f.action = alt.action;
  else if (s.actions) f.action = { $in: [...s.actions] };
  if (kind === "activity") {
    if (alt.rendering !== undefined) f.rendering = alt.rendering;
    else if (s.renderings) f.rendering = { $in: [...s.renderings] };
    if (s.collection) f.collection = s.collection;
    if (s.recordId) f.recordId = s.recordId;
    if (s.runId) f.runId = s.runId;
  }
  f.seq = seqFilter(r);
  return f;
}

/** Entries of several queries, each in `seq` order, as one list in that order (at most `limit`). */
function mergeBySeq<T extends { seq: number }>(lists: T[][], order: 1 | -1, limit: number): T[] {
  if (lists.length <= 1) return (lists[0] ?? []).slice(0, limit);
  return lists
    .flat()
    .sort((a, b) => order * (a.seq - b.seq))
    .slice(0, limit);
}

/** The same for cursors: a k-way merge in constant memory (one pending entry per query). */
async function* mergeStreams<T extends { seq: number }>(streams: AsyncGenerator<T>[], order: 1 | -1): AsyncGenerator<T> {
  const heads = await Promise.all(streams.map((it) => it.next()));
  try {
    for (;;) {
      let best = -1;
      for (let i = 0; i < heads.length; i++) {
        const h = heads[i]!;
        if (!h.done && (best < 0 || order * (h.value.seq - (heads[best]!.value as T).seq) < 0)) best = i;
      }
      if (best < 0) return;
      yield heads[best]!.value as T;
      heads[best] = await streams[best]!.next();
    }
  } finally {
    await Promise.all(streams.map((it) => it.return(undefined)));
  }
}

/** A tombstone: null scope fields, so no project's or environment's query ever matches it. */
function tombstoneDoc(kind: LogKind, stream: string, seq: number): Position {
  const base = { _id: streamKey(stream, seq), seq, tomb: true as const, timestamp: new Date(), projectId: null, action: "", details: {} };
  return kind === "activity"
    ? ({
        ...base,
        environmentId: null,
        environment: "",
        rendering: null,
        user: { id: "", email: "" },
        via: "api",
        collection: null,
        recordId: null,
        runId: null,
      } as Position)
    : ({ ...base, organizationId: null, environment: null, actor: { id: "", email: "" }, target: "" } as Position);
}

/** Puts a tombstone at `seq` unless something is stored there already (then false). */
async function putTombstone(insert: (doc: Position) => Promise<void>, kind: LogKind, stream: string, seq: number): Promise<boolean> {
  try {
    await insert(tombstoneDoc(kind, stream, seq));
    return true;
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
    return false;
  }
}

/** `r` within the numbers `b` allows (both as after < seq ≤ upTo, numbers being whole), or null when none is left. */
function intersect(r: SeqRange, b: SeqRange): SeqRange | null {
  const after = Math.max(r.after ?? 0, b.after ?? 0);
  const upTo = Math.min(r.upTo ?? Infinity, (r.before ?? Infinity) - 1, (b.before ?? Infinity) - 1);
  if (upTo <= after) return null;
  return Number.isFinite(upTo) ? { after, upTo } : { after };
}

type LogCollections = Record<LogKind, Collection<Position>>;

/**
 * The number of the first entry of the selection's stream at or after `micros`, among those
 * up to `upTo` (null: none). A stream's times rise with its numbers, so that entry splits the
 * stream in two: every earlier number is earlier than `micros`, every later one is not. An
 * entry's time is `micros`, or on older entries `timestamp` (a millisecond several may share),
 * and the index on (scope, timestamp, micros, seq) lists the stream in number order: one or
 * two look-ups on it. Positions not yet resolved are never above `upTo` (a reader's range).
 */
async function firstAtOrAfter(colls: LogCollections, kind: LogKind, s: LogSelection, micros: number, upTo: number | undefined): Promise<number | null> {
  const ms = Math.floor(micros / 1000);
  const seq = upTo === undefined ? {} : { seq: { $lte: upTo } };
  const first = async (f: Record<string, unknown>) =>
    (
      await colls[kind].findOne({ ...scopeFilter(kind, s), ...f, ...seq } as Filter<Position>, {
        sort: { timestamp: 1, micros: 1, seq: 1 },
        projection: { seq: 1 },
      })
    )?.seq ?? null;
  if (micros % 1000 === 0) return first({ timestamp: { $gte: new Date(ms) } });
  // Within the millisecond, only entries with a time of their own can be as late as `micros`.
  return (await first({ timestamp: new Date(ms), micros: { $gte: micros } })) ?? first({ timestamp: { $gt: new Date(ms) } });
}

/** A selection's time range as a range of numbers, within `r` (null: nothing there). */
async function timeBounds(colls: LogCollections, kind: LogKind, s: LogSelection, r: SeqRange): Promise<SeqRange | null> {
  if (s.fromMicros === undefined && s.toMicros === undefined) return r;
  const top = r.upTo ?? (r.before !== undefined ? r.before - 1 : undefined);
  const [from, to] = await Promise.all([
    s.fromMicros === undefined ? undefined : firstAtOrAfter(colls, kind, s, s.fromMicros, top),
    s.toMicros === undefined ? undefined : firstAtOrAfter(colls, kind, s, s.toMicros, top),
  ]);
  if (from === null) return null;
  return intersect(r, { after: from === undefined ? undefined : from - 1, before: to ?? undefined });
}

/** The reads of both logs: by position, by key range, and by selection (filters, time range). */
function logReads(colls: LogCollections): Pick<LogStore, "oldest" | "at" | "entries" | "positions" | "select" | "bounds" | "scan" | "mentionsRun"> {
  /** One query per alternative of the selection within `range`, sorted by seq. */
  const queries = (kind: LogKind, s: LogSelection, range: SeqRange, order: 1 | -1) =>
    alternatives(s).map((alt) => colls[kind].find(selectionFilter(kind, s, range, alt) as Filter<Position>).sort({ seq: order }));

  return {
    async oldest(kind, stream) {
      const first = await colls[kind].findOne({ _id: keyRange(stream, {}) } as Filter<Position>, { sort: { _id: 1 }, projection: { seq: 1 } });
      return first?.seq ?? null;
    },
    at(kind, stream, seq, fields) {
      const projection = fields ? Object.fromEntries(fields.map((f) => [f, 1])) : undefined;
      return colls[kind].findOne({ _id: streamKey(stream, seq) }, projection ? { projection } : {});
    },
    async entries(kind, stream, r, order, limit) {
      const docs = await colls[kind]
        .find({ _id: keyRange(stream, r), tomb: { $exists: false } } as Filter<Position>)
        .sort({ _id: order })
        .limit(limit)
        .toArray();
      return docs as unknown as LogDocOf<typeof kind>[];
    },
    positions(kind, stream, after, upTo) {
      return colls[kind]
        .find({ _id: keyRange(stream, { after, upTo }) } as Filter<Position>)
        .sort({ _id: 1 })
        .toArray();
    },
    async select(kind, s, r, order, limit) {
      const range = await timeBounds(colls, kind, s, r);
      if (!range) return [];
      const lists = await Promise.all(queries(kind, s, range, order).map((q) => q.limit(limit).toArray()));
      return mergeBySeq(lists, order, limit) as unknown as LogDocOf<typeof kind>[];
    },
    bounds: (kind, s, r) => timeBounds(colls, kind, s, r),
    async mentionsRun(runId) {
      return (await colls.activity.findOne({ runId } as Filter<Position>, { projection: { _id: 1 } })) !== null;
    },
    async *scan(kind, s, r, order) {
      const range = await timeBounds(colls, kind, s, r);
      if (!range) return;
      const cursors = queries(kind, s, range, order).map((q) => q.batchSize(1000));
      async function* each(c: (typeof cursors)[number]) {
        try {
          for await (const doc of c) yield doc;
        } finally {
          await c.close();
        }
      }
      for await (const doc of mergeStreams(cursors.map(each), order)) yield doc as unknown as LogDocOf<typeof kind>;
    },
  };
}

/** Both logs' collections by kind, read at each use: the handles change if the store reconnects (connection.ts). */
export function logCollections(d: Database): Record<LogKind, Collection<Position>> {
  return {
    get activity() {
      return d.activityLogs as unknown as Collection<Position>;
    },
    get admin() {
      return d.adminLogs as unknown as Collection<Position>;
    },
  };
}

export function logStore(d: Database, counters: CounterStore): LogStore {
  const colls = logCollections(d);

  /**
   * Takes the stream's next number, then inserts the entry there. If a reader tombstoned
   * that number meanwhile (the insert took longer than the readers' grace), the insert
   * collides and the entry takes a new, higher number: it never lands behind a position a
   * reader has passed. The entry's time is the one its number was taken with (counters.ts), so a
   * stream's times are unique and rise with its numbers (a time range is a range of numbers).
   */
  // Entries written together go in one insert per log.
  const inserts = { activity: groupedInsert(() => colls.activity), admin: groupedInsert(() => colls.admin) };
  async function append(kind: LogKind, stream: string, entry: object, taken?: Taken): Promise<number> {
    for (let next = taken; ; next = undefined) {
      const { value: seq, micros } = next ?? (await counters.nextStamped(stream));
      try {
        await inserts[kind]({ timestamp: new Date(Math.floor(micros / 1000)), micros, ...entry, _id: streamKey(stream, seq), seq } as Position);
        return seq;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    }
  }

  const tombstone = (kind: LogKind, stream: string, seq: number) => putTombstone(inserts[kind], kind, stream, seq);

  async function putPending(p: PendingLogEntry): Promise<PendingOutcome> {
    // The fields in the order every other entry has them (timestamp, projectId, environmentId, …).
    const doc = { timestamp: new Date(Math.floor(p.micros / 1000)), micros: p.micros, ...p.entry, _id: p.key, seq: p.seq } as Position;
    try {
      await inserts.activity(doc);
      return "written";
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    // Only this entry or a tombstone is ever stored at a reserved position.
    const there = await colls.activity.findOne({ _id: p.key }, { projection: { tomb: 1 } });
    return there?.tomb ? "tombstoned" : "written";
  }

  return {
    appendActivity: (e) => append("activity", activityStream(e.environmentId), e),
    take: (stream) => counters.nextStamped(stream),
    putPending,
    async pendingAt(kind, stream, seq) {
      if (kind !== "activity") return null;
      const key = streamKey(stream, seq);
      // Served by the sparse index on runs' pendingLog.key: only runs with entries not yet cleared are in it.
      const run = await d.runs.findOne({ "pendingLog.key": key }, { projection: { pendingLog: 1 } });
      return (run as Pick<RunDoc, "pendingLog"> | null)?.pendingLog?.find((p) => p.key === key) ?? null;
    },
    appendAdmin: (e) => append("admin", adminStream(e.organizationId, e.projectId), e),
    counter: (stream) => counters.current(stream),
    watermark: (stream) => counters.current(watermarkId(stream)),
    raiseWatermark: (stream, pos) => counters.raise(watermarkId(stream), pos),
    ...logReads(colls),
    tombstone,
  };
}
