// Provides the database server for all tests: the embedded mongo-java-server (memory), or
// MONGODB_URI when set (then the same suite runs on that server); and the directory under which
// the tests' servers keep their data directories. Everything is under one directory, removed
// when the run ends.
import type { TestProject } from "vitest/node";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config.js";
import { startEmbeddedServer } from "../../src/embedded/index.js";

declare module "vitest" {
  export interface ProvidedContext {
    mongoUri: string;
    serversDir: string;
  }
}

export default async function setup(project: TestProject) {
  // One directory for the run: the embedded database's data, and the servers' under `servers/`.
  const runDir = mkdtempSync(join(tmpdir(), "runhook-test-"));
  const removeRunDir = () => rmSync(runDir, { recursive: true, force: true });
  const serversDir = join(runDir, "servers");
  mkdirSync(serversDir);
  project.provide("serversDir", serversDir);
  if (process.env.MONGODB_URI) {
    project.provide("mongoUri", process.env.MONGODB_URI);
    return removeRunDir;
  }
  try {
    const config = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: runDir });
    // Every query the suite makes must be served by an index: the database refuses a scan.
    const server = await startEmbeddedServer({
      dataDir: runDir,
      cacheDir: config.cacheDir,
      persistent: false,
      noTableScan: true,
      progress: (m) => console.log(`[test database] ${m}`),
    });
    project.provide("mongoUri", server.uri);
    return async () => {
      await server.stop();
      removeRunDir();
    };
  } catch (err) {
    removeRunDir();
    throw err;
  }
}
