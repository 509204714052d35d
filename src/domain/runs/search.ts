// The run search: its filters checked, its cursor (the last run's creation time and id, in the
// one cursor format of every list, bound to the caller's environment, the filters, the order
// and the time ranges), and one page read by keyset. A run inserted while a caller pages
// sorts by its own creation time, so it never shifts the runs of pages not yet read: every
// run present when the search started appears exactly once.
import { isTimeLimitExceeded, type Store } from "../../store/index.js";
import type { RunKey, RunSelection } from "../../store/run-search.js";
import type { RunDoc, RunState } from "../../store/types.js";
import { fail } from "../errors.js";
import { isUuid } from "../ids.js";
import { bindingHash, type CursorCodec, type Paging } from "../logs/cursor.js";
import { RUN_STATES } from "./model.js";

/** How a run can have been started (RunDoc.via). */
export const RUN_VIAS = ["webhook", "grpc", "api", "console"] as const;

export interface RunFilterInput {
  workflowId: string;
  /** The workflows whose runs the caller sees, when not all (auth/run-scope.ts). */
  seenWorkflowIds: string[] | undefined;
  /** The workflow name asked for ("": none), and the workflows of the environment it names (workflowsNamed). */
  workflowName: string;
  namedWorkflowIds: string[] | undefined;
  collection: string;
  recordId: string;
  states: string[];
  via: string;
  userId: string;
  finishedFrom: Date | undefined;
  finishedTo: Date | undefined;
}

export interface RunPage {
  runs: RunDoc[];
  hasMore: boolean;
  nextCursor: string | undefined;
}

/** The states asked for, each checked; one filter may list several. */
function statesOf(raw: string[]): RunState[] {
  const states = raw.filter((s) => s !== "");
  for (const s of states) if (!RUN_STATES.includes(s as RunState)) throw fail.invalid(`state must be one of ${RUN_STATES.join(", ")}, got "${s}"`);
  return [...new Set(states as RunState[])].sort();
}

/** The workflow id asked for, checked: a full id, so that a prefix or a name is refused in words rather than matching nothing. */
function workflowIdOf(raw: string): string | undefined {
  if (!raw) return undefined;
  if (!isUuid(raw)) throw fail.invalid(`workflowId must be a workflow's full id (a UUID), got "${raw}": to find a workflow by its name, use workflowName`);
  return raw.toLowerCase();
}

/**
 * The workflows a search reads when it is restricted (to those the caller sees, to those a name
 * names): every one of each restriction, and the one asked for by id if among them.
 */
function workflowsRead(f: RunFilterInput, workflowId: string | undefined): { workflowIds?: string[] } {
  const named = f.workflowName ? f.namedWorkflowIds : undefined;
  if (!f.seenWorkflowIds && !named) return {};
  const [first = [], ...rest] = [f.seenWorkflowIds, named, workflowId ? [workflowId] : undefined].filter((ids) => ids !== undefined);
  return { workflowIds: first.filter((id) => rest.every((ids) => ids.includes(id))) };
}

/** The store's selection for a checked filter. */
export function runSelection(environmentId: string, f: RunFilterInput, p: Paging): RunSelection {
  if (f.workflowName && !f.namedWorkflowIds) throw new Error("a workflow name is resolved (workflowsNamed) before the search");
  if (f.via && !(RUN_VIAS as readonly string[]).includes(f.via)) throw fail.invalid(`via must be one of ${RUN_VIAS.join(", ")}, got "${f.via}"`);
  if (f.finishedFrom && f.finishedTo && f.finishedFrom.getTime() > f.finishedTo.getTime()) throw fail.invalid("finishedFrom must not be after finishedTo");
  const states = statesOf(f.states);
  const workflowId = workflowIdOf(f.workflowId);
  return {
    environmentId,
    ...(workflowId ? { workflowId } : {}),
    ...(f.workflowName ? { workflowName: f.workflowName } : {}),
    ...workflowsRead(f, workflowId),
    ...(f.collection ? { collection: f.collection } : {}),
    ...(f.recordId ? { recordId: f.recordId } : {}),
    ...(states.length ? { states } : {}),
    ...(f.via ? { via: f.via } : {}),
    ...(f.userId ? { userId: f.userId } : {}),
    createdFrom: p.from,
    createdTo: p.to,
    finishedFrom: f.finishedFrom,
    finishedTo: f.finishedTo,
  };
}

function bindingOf(s: RunSelection, p: Paging): string {
  return bindingHash({
    list: "runs",
    scope: s.environmentId,
    order: p.order,
    from: s.createdFrom?.toISOString(),
    to: s.createdTo?.toISOString(),
    workflowId: s.workflowId,
    workflowName: s.workflowName,
    collection: s.collection,
    recordId: s.recordId,
    states: s.states?.join(","),
    via: s.via,
    userId: s.userId,
    finishedFrom: s.finishedFrom?.toISOString(),
    finishedTo: s.finishedTo?.toISOString(),
  });
}

/** A position in a list ordered by (creation time, id) — runs, run batches: `<creation time in ms>|<id>`. */
export const positionKeyOf = (r: { createdAt: Date; _id: string }) => `${r.createdAt.getTime()}|${r._id}`;

/** The position a key names, or INVALID_ARGUMENT; "" is none (an ascending cursor before any run). */
export function parsePositionKey(key: string): RunKey {
  const [ms, id] = key.split("|");
  if (!ms || !/^\d{1,15}$/.test(ms) || !id || !isUuid(id)) throw fail.invalid("cursor is malformed or was not issued by this server");
  return { createdAt: new Date(Number(ms)), id };
}

/**
 * One page of runs. Ascending answers a cursor always (where a later call continues, as the
 * other lists do); descending only while more remain.
 */
export async function readRunPage(store: Store, codec: CursorCodec, s: RunSelection, p: Paging): Promise<RunPage> {
  const hash = bindingOf(s, p);
  const key = p.cursor ? codec.decodeKey(p.cursor, hash) : "";
  const after = key === "" ? undefined : parsePositionKey(key);
  const docs = await store.runs.search(s, after, p.order === "asc" ? 1 : -1, p.limit + 1).catch((err: unknown) => {
    if (isTimeLimitExceeded(err)) throw fail.invalid("the run search took too long: narrow the finished time range or add a filter");
    throw err;
  });
  const hasMore = docs.length > p.limit;
  const runs = hasMore ? docs.slice(0, p.limit) : docs;
  const last = runs[runs.length - 1];
  const nextKey = last ? positionKeyOf(last) : key;
  const nextCursor = hasMore || p.order === "asc" ? codec.encodeKey(nextKey, hash) : undefined;
  return { runs, hasMore, nextCursor };
}
