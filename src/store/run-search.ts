// The run search: one environment's runs, filtered, in the order (createdAt, _id), read by
// keyset after the last run of the previous page. Every query is equality on a prefix of one
// of the `{environmentId, <filter>…, createdAt, _id}` indexes and a range on the next field,
// so the index order serves the sort and a page reads about `limit` entries.
import type { Filter } from "mongodb";
import type { Database } from "./connection.js";
import type { RunDoc, RunState } from "./types.js";

export interface RunSelection {
  environmentId: string;
  /** The workflow filter as asked (what a cursor is bound to); the query reads `workflowIds` when set. */
  workflowId?: string;
  /** The workflow name asked for (what a cursor is bound to); the query reads the `workflowIds` it names. */
  workflowName?: string;
  /** Any of these workflows (empty: no run); absent: `workflowId`, or every workflow. */
  workflowIds?: string[];
  collection?: string;
  /** In `collection` when set, else in any collection of the environment (each has its index). */
  recordId?: string;
  /** Any of these; empty or absent: every state. */
  states?: RunState[];
  via?: string;
  userId?: string;
  /** Only these runs (a batch of selected runs). */
  runIds?: string[];
  /** Creation time: from (inclusive), to (exclusive). */
  createdFrom?: Date;
  createdTo?: Date;
  /** Finish time: from (inclusive), to (exclusive). */
  finishedFrom?: Date;
  finishedTo?: Date;
}

/** Where a page starts: after (in the list order) the run with this creation time and id. */
export interface RunKey {
  createdAt: Date;
  id: string;
}

/**
 * The longest a page's query may take: a finish range is served by its own index and sorted, so
 * a wide one over a large environment would read all of it (the caller is told to narrow it).
 */
export const RUN_SEARCH_TIME_LIMIT_MS = 5000;

export type RunSearch = (s: RunSelection, after: RunKey | undefined, order: 1 | -1, limit: number) => Promise<RunDoc[]>;

/**
 * The most queries one page makes (one per state and workflow, each served in index order);
 * past it, the workflows are one `$in` filtered along the environment's index.
 */
export const MAX_MERGED_QUERIES = 16;

/** The equality filters and the finish range of a selection, for one state and one workflow (or any). */
function baseFilter(s: RunSelection, state: RunState | undefined, workflow: string | string[] | undefined): Record<string, unknown> {
  const f: Record<string, unknown> = { environmentId: s.environmentId };
  if (typeof workflow === "string") f.workflowId = workflow;
  else if (workflow) f.workflowId = { $in: workflow };
  if (s.collection) f.collection = s.collection;
  if (s.recordId) f.recordId = s.recordId;
  if (state) f.state = state;
  if (s.via) f.via = s.via;
  if (s.userId) f.userId = s.userId;
  if (s.runIds) f._id = { $in: s.runIds };
  if (s.finishedFrom || s.finishedTo) f.finishedAt = { ...(s.finishedFrom ? { $gte: s.finishedFrom } : {}), ...(s.finishedTo ? { $lt: s.finishedTo } : {}) };
  return f;
}

/** Compares two runs in the list order. */
function compare(a: RunDoc, b: RunDoc, order: 1 | -1): number {
  const t = a.createdAt.getTime() - b.createdAt.getTime();
  return order * (t !== 0 ? t : a._id < b._id ? -1 : a._id > b._id ? 1 : 0);
}

/**
 * One page of the runs matching `base`: first the runs created at the very time of `after`
 * with a later id (equality on createdAt, a range on _id), then those created later (a range
 * on createdAt). Two queries rather than an `$or`, which no planner serves in index order.
 */
async function pageOf(d: Database, base: Record<string, unknown>, s: RunSelection, after: RunKey | undefined, order: 1 | -1, limit: number) {
  const sort = { createdAt: order, _id: order } as const;
  const later = order === 1 ? "$gt" : "$lt";
  const find = (f: Record<string, unknown>, n: number) =>
    d.runs
      .find(f as Filter<RunDoc>, { sort, maxTimeMS: RUN_SEARCH_TIME_LIMIT_MS })
      .limit(n)
      .toArray();
  const range: Record<string, unknown> = {};
  if (s.createdFrom) range.$gte = s.createdFrom;
  if (s.createdTo) range.$lt = s.createdTo;
  const ids = base._id as Record<string, unknown> | undefined; // selected runs: `$in` beside the range
  const same = after ? await find({ ...base, createdAt: after.createdAt, _id: { ...ids, [later]: after.id } }, limit) : [];
  if (same.length >= limit) return same;
  if (after) range[later] = after.createdAt;
  const rest = await find({ ...base, ...(Object.keys(range).length > 0 ? { createdAt: range } : {}) }, limit - same.length);
  return same.concat(rest);
}

/** The workflow filter of each query: each workflow alone while the queries stay few, else all of them at once. */
function workflowsOf(s: RunSelection, states: number): (string | string[] | undefined)[] {
  if (!s.workflowIds) return [s.workflowId || undefined];
  const ids = [...new Set(s.workflowIds)];
  return ids.length * states <= MAX_MERGED_QUERIES ? ids : [ids];
}

/** RunStore.search: several states or workflows are one query each (each served in index order), merged. */
export function runSearch(d: Database): RunSearch {
  return async (s, after, order, limit) => {
    if (s.workflowIds?.length === 0) return [];
    const states = s.states?.length ? [...new Set(s.states)] : [undefined];
    const filters = workflowsOf(s, states.length).flatMap((workflow) => states.map((state) => baseFilter(s, state, workflow)));
    const pages = await Promise.all(filters.map((filter) => pageOf(d, filter, s, after, order, limit)));
    if (pages.length === 1) return pages[0]!;
    return pages
      .flat()
      .sort((a, b) => compare(a, b, order))
      .slice(0, limit);
  };
}
