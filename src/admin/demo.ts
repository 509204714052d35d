// The demo of CONTRACT §5: placeholder until the webhook issue lands.
import type { Deps } from "../deps.js";
import type { Services } from "../services.js";

export interface SeedOutput {
  baseUrl: string;
  projectName: string;
  environmentName: string;
  collection: string;
  recordIds: string[];
  webhookUrl: string;
  userToken: string;
  apiToken: string;
}

/** Creates the demo world (fresh tokens each call) and returns what a user needs. */
export async function seedDemo(_deps: Deps, _services: Services): Promise<SeedOutput> {
  throw new Error("demo seeding is not implemented yet");
}

/** On an empty database, seeds the demo and returns it; otherwise null. */
export async function seedDemoIfEmpty(_deps: Deps, _services: Services): Promise<SeedOutput | null> {
  return null;
}
