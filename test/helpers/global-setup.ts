// Provides the database server for all tests: the embedded mongo-java-server (memory), or
// MONGODB_URI when set (then the same suite runs on that server); and one directory under
// which the tests' servers keep their data directories, removed when the run ends.
import type { TestProject } from "vitest/node";
import { mkdtempSync, rmSync } from "node:fs";
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
  const serversDir = mkdtempSync(join(tmpdir(), "runhook-test-servers-"));
  project.provide("serversDir", serversDir);
  const removeServersDir = () => rmSync(serversDir, { recursive: true, force: true });
  if (process.env.MONGODB_URI) {
    project.provide("mongoUri", process.env.MONGODB_URI);
    return removeServersDir;
  }
  const dataDir = mkdtempSync(join(tmpdir(), "runhook-test-"));
  const config = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
  // Every query the suite makes must be served by an index: the database refuses a scan.
  const server = await startEmbeddedServer({
    dataDir,
    cacheDir: config.cacheDir,
    persistent: false,
    noTableScan: true,
    progress: (m) => console.log(`[test database] ${m}`),
  });
  project.provide("mongoUri", server.uri);
  return async () => {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
    removeServersDir();
  };
}
