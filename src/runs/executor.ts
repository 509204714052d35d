// Executors: placeholder until the runs issue lands.
import type { Deps } from "../deps.js";

export interface Executors {
  stop(): Promise<void>;
}

export function startExecutors(_deps: Deps): Executors {
  return { stop: async () => {} };
}
