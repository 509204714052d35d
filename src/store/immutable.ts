// Documents that never change once created — renderings, environments, collections (no API
// updates or deletes them) and a workflow version's steps (a publish adds a version, never edits
// one) — read once per process and kept. What grants or revokes access (tokens, roles, team
// members, projects, workflows) is cached only under the directory's version
// (directory-cache.ts). If these documents ever become changeable, move them there.
import { BSON } from "mongodb";
import { deepFreeze } from "../lib/freeze.js";
import type { Database } from "./connection.js";
import type { CollectionDoc, EnvironmentDoc, RenderingDoc, StepDoc, WorkflowVersionDoc, WorkflowVersionWithSteps } from "./types.js";

/** Per kind; beyond it the oldest entries are dropped. */
const MAX_ENTRIES = 10_000;
/** The steps kept, in bytes (BSON), whatever size and number of versions are read; beyond, the oldest go. */
export const MAX_CACHED_STEPS_BYTES = 16 * 2 ** 20;

export interface ImmutableStore {
  rendering(id: string): Promise<RenderingDoc | null>;
  environment(id: string): Promise<EnvironmentDoc | null>;
  collection(id: string): Promise<CollectionDoc | null>;
  /**
   * A version's steps (null when they are not there): from its steps document, or, for a version
   * stored with its steps inside the workflow document, that version alone read from it.
   */
  workflowSteps(workflowId: string, version: WorkflowVersionDoc): Promise<StepDoc[] | null>;
}

function cached<T>(read: (id: string) => Promise<T | null>): (id: string) => Promise<T | null> {
  const kept = new Map<string, T>();
  return async (id) => {
    const hit = kept.get(id);
    if (hit) return hit;
    const doc = await read(id);
    // Only found documents: one created later must be found then.
    if (doc) {
      if (kept.size >= MAX_ENTRIES) kept.delete(kept.keys().next().value!);
      kept.set(id, doc);
    }
    return doc;
  };
}

/** Steps by key, bounded in bytes: the oldest entries go first. */
function stepsCache() {
  const kept = new Map<string, { steps: StepDoc[]; size: number }>();
  let bytes = 0;
  return {
    async get(key: string, read: () => Promise<StepDoc[] | null>): Promise<StepDoc[] | null> {
      const hit = kept.get(key);
      if (hit) return hit.steps;
      const steps = await read();
      if (!steps) return null;
      const size = BSON.calculateObjectSize({ steps }) + key.length;
      if (!kept.has(key)) {
        for (const [oldest, entry] of kept) {
          if (bytes + size <= MAX_CACHED_STEPS_BYTES) break;
          kept.delete(oldest);
          bytes -= entry.size;
        }
        kept.set(key, { steps: deepFreeze(steps), size });
        bytes += size;
      }
      return steps;
    },
  };
}

export function immutableStore(d: Database): ImmutableStore {
  const steps = stepsCache();
  return {
    rendering: cached((id) => d.renderings.findOne({ _id: id })),
    environment: cached((id) => d.environments.findOne({ _id: id })),
    collection: cached((id) => d.collections.findOne({ _id: id })),
    workflowSteps: (workflowId, v) =>
      v.stepsId !== undefined
        ? steps.get(`s\u0000${v.stepsId}`, async () => (await d.workflowSteps.findOne({ _id: v.stepsId! }))?.steps ?? null)
        : // A version number is never taken twice in a workflow, and its steps never change.
          steps.get(`w\u0000${workflowId}\u0000${v.version}`, async () => {
            const doc = await d.workflows.findOne({ _id: workflowId }, { projection: { _id: 1, versions: { $elemMatch: { version: v.version } } } });
            return (doc?.versions as WorkflowVersionWithSteps[] | undefined)?.[0]?.steps ?? null;
          }),
  };
}
