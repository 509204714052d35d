// Provides the database server for all tests: the embedded FerretDB, or MONGODB_URI when set.
import type { TestProject } from "vitest/node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config.js";
import { startEmbeddedDb } from "../../src/db/embedded.js";

declare module "vitest" {
  export interface ProvidedContext {
    mongoUri: string;
  }
}

export default async function setup(project: TestProject) {
  if (process.env.MONGODB_URI) {
    project.provide("mongoUri", process.env.MONGODB_URI);
    return;
  }
  const dataDir = mkdtempSync(join(tmpdir(), "runhook-test-"));
  const config = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
  const db = await startEmbeddedDb({ dataDir, cacheDir: config.cacheDir, progress: (m) => console.log(`[test database] ${m}`) });
  project.provide("mongoUri", db.uri);
  return async () => {
    await db.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}
