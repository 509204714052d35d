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
import type { ActivityLogDoc, AdminLogDoc } from "./types.js";

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

export type NewActivity = Omit<ActivityLogDoc, "_id" | "seq" | "timestamp" | "tomb">;
export type NewAdminEntry = Omit<AdminLogDoc, "_id" | "seq" | "timestamp" | "tomb">;

/** Which entries of one stream a filtered page or an export selects (empty strings select all). */
export interface LogSelection {
  /** Activity: the environment; admin: the project, or with `organization` the organization. */
  scopeId: string;
  /** Admin only: the organization's own stream (its entries without a project), scopeId being the organization. */
  organization?: boolean;
  userId?: string;
  userEmail?: string;
  action?: string;
  collection?: string;
  recordId?: string;
  runId?: string;
  from?: Date;
  to?: Date;
}

/** Whether a selection needs the query path (attribute filters or a time range). */
export function isFiltered(s: LogSelection): boolean {
  return Boolean(s.userId || s.userEmail || s.action || s.collection || s.recordId || s.runId || s.from || s.to);
}

export interface SeqRange {
  after?: number;
  before?: number;
  upTo?: number;
}

export interface ActivityReservation {
  put(entry: Omit<NewActivity, "environmentId">): Promise<number>;
  release(): Promise<void>;
}

export interface LogStore {
  appendActivity(entry: NewActivity): Promise<number>;
  /**
   * Reserves the next position of an environment's activity stream before its entry can be
   * written: `put` writes the entry there (see append; returns where it landed), `release`
   * writes a tombstone there instead, so that readers never wait for a position left empty.
   */
  reserve(environmentId: string): Promise<ActivityReservation>;
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

function selectionFilter(kind: LogKind, s: LogSelection, r: SeqRange): Record<string, unknown> {
  const f = scopeFilter(kind, s);
  const user = kind === "activity" ? "user" : "actor";
  if (s.userId) f[`${user}.id`] = s.userId;
  if (s.userEmail) f[`${user}.email`] = s.userEmail;
  if (s.action) f.action = s.action;
  if (kind === "activity") {
    if (s.collection) f.collection = s.collection;
    if (s.recordId) f.recordId = s.recordId;
    if (s.runId) f.runId = s.runId;
  }
  if (s.from || s.to) f.timestamp = { ...(s.from ? { $gte: s.from } : {}), ...(s.to ? { $lt: s.to } : {}) };
  f.seq = seqFilter(r);
  return f;
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

/** The reads of both logs: by position, by key range, and by selection (filters, time range). */
function logReads(colls: Record<LogKind, Collection<Position>>): Pick<LogStore, "oldest" | "at" | "entries" | "positions" | "select" | "scan" | "mentionsRun"> {
  /**
   * The numbers a selection's time range can hold. A stream's times rise with its numbers
   * (append), so every entry up to the last one before `from` is earlier than `from`, and every
   * entry from the first one at or after `to` is not earlier than `to`: two look-ups on the time
   * index turn a time range deep in a long stream into a short range of numbers, and the time
   * filter still decides within it. Numbers taken but not yet written change nothing.
   */
  async function timeBounds(kind: LogKind, s: LogSelection, r: SeqRange): Promise<SeqRange | null> {
    if (!s.from && !s.to) return r;
    const nearest = (timestamp: Record<string, Date>, order: 1 | -1) =>
      colls[kind].findOne({ ...scopeFilter(kind, s), timestamp } as Filter<Position>, { sort: { timestamp: order }, projection: { seq: 1 } });
    const [before, after] = await Promise.all([s.from ? nearest({ $lt: s.from }, -1) : null, s.to ? nearest({ $gte: s.to }, 1) : null]);
    return intersect(r, { after: before?.seq, before: after?.seq });
  }

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
      const range = await timeBounds(kind, s, r);
      if (!range) return [];
      const docs = await colls[kind]
        .find(selectionFilter(kind, s, range) as Filter<Position>)
        .sort({ seq: order })
        .limit(limit)
        .toArray();
      return docs as unknown as LogDocOf<typeof kind>[];
    },
    async mentionsRun(runId) {
      return (await colls.activity.findOne({ runId } as Filter<Position>, { projection: { _id: 1 } })) !== null;
    },
    async *scan(kind, s, r, order) {
      const range = await timeBounds(kind, s, r);
      if (!range) return;
      const cursor = colls[kind]
        .find(selectionFilter(kind, s, range) as Filter<Position>)
        .sort({ seq: order })
        .batchSize(1000);
      try {
        for await (const doc of cursor) yield doc as unknown as LogDocOf<typeof kind>;
      } finally {
        await cursor.close();
      }
    },
  };
}

export function logStore(d: Database, counters: CounterStore): LogStore {
  // Read at each use: the handles change if the store reconnects (connection.ts).
  const colls = {
    get activity() {
      return d.activityLogs as unknown as Collection<Position>;
    },
    get admin() {
      return d.adminLogs as unknown as Collection<Position>;
    },
  } as Record<LogKind, Collection<Position>>;

  /**
   * Takes the stream's next number, then inserts the entry there. If a reader tombstoned
   * that number meanwhile (the insert took longer than the readers' grace), the insert
   * collides and the entry takes a new, higher number: it never lands behind a position a
   * reader has passed. The entry's time is the one its number was taken with, so a stream's
   * times rise with its numbers (what makes a time range a range of numbers, see timeBounds).
   */
  // Entries written together go in one insert per log.
  const inserts = { activity: groupedInsert(() => colls.activity), admin: groupedInsert(() => colls.admin) };
  async function append(kind: LogKind, stream: string, entry: object, taken?: Taken): Promise<number> {
    for (let next = taken; ; next = undefined) {
      const { value: seq, at } = next ?? (await counters.nextStamped(stream));
      try {
        await inserts[kind]({ timestamp: at, ...entry, _id: streamKey(stream, seq), seq } as Position);
        return seq;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    }
  }

  const tombstone = (kind: LogKind, stream: string, seq: number) => putTombstone(inserts[kind], kind, stream, seq);

  return {
    appendActivity: (e) => append("activity", activityStream(e.environmentId), e),
    async reserve(environmentId) {
      const stream = activityStream(environmentId);
      const taken = await counters.nextStamped(stream);
      return {
        // The fields in the order every other entry has them (timestamp, projectId, environmentId, …).
        put: ({ projectId, ...rest }) => append("activity", stream, { projectId, environmentId, ...rest }, taken),
        release: async () => void (await tombstone("activity", stream, taken.value)),
      };
    },
    appendAdmin: (e) => append("admin", adminStream(e.organizationId, e.projectId), e),
    counter: (stream) => counters.current(stream),
    watermark: (stream) => counters.current(watermarkId(stream)),
    raiseWatermark: (stream, pos) => counters.raise(watermarkId(stream), pos),
    ...logReads(colls),
    tombstone,
  };
}
