// Documents that never change once created — renderings, environments and collections: no
// API updates or deletes them — read once per process and kept. What grants or revokes access
// (tokens, roles, team members, projects, workflows) is cached only under the directory's
// version (directory-cache.ts). If these documents ever become changeable, move them there.
import type { Database } from "./connection.js";
import type { CollectionDoc, EnvironmentDoc, RenderingDoc } from "./types.js";

/** Per kind; beyond it the oldest entries are dropped. */
const MAX_ENTRIES = 10_000;

export interface ImmutableStore {
  rendering(id: string): Promise<RenderingDoc | null>;
  environment(id: string): Promise<EnvironmentDoc | null>;
  collection(id: string): Promise<CollectionDoc | null>;
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

export function immutableStore(d: Database): ImmutableStore {
  return {
    rendering: cached((id) => d.renderings.findOne({ _id: id })),
    environment: cached((id) => d.environments.findOne({ _id: id })),
    collection: cached((id) => d.collections.findOne({ _id: id })),
  };
}
