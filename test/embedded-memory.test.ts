// The embedded database's memory backend keeps every document on its heap, which is bounded:
// once it is nearly full, writes that add data are refused with a clear error (MongoDB's
// ExceededMemoryLimit), and reads and deletes go on, instead of the server pausing in
// collections and dropping its connections. Skipped on MONGODB_URI (a real MongoDB).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { startEmbeddedServer } from "../src/embedded/index.js";
import { openStore, storeFixtures } from "../src/store/index.js";

it.skipIf(Boolean(process.env.MONGODB_URI))("a full heap refuses writes with ExceededMemoryLimit; reads and deletes go on", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "runhook-heap-"));
  const { cacheDir } = loadConfig({ ...process.env, RUNHOOK_DATA_DIR: dataDir });
  const server = await startEmbeddedServer({ dataDir, cacheDir, persistent: false, heapMb: 128, noTableScan: true, progress: () => {} });
  const store = await openStore(`${server.uri}heap`, { dbName: "heap" });
  try {
    const docs = storeFixtures(store).scratch<{ _id: number; payload: string }>("docs");
    const payload = "x".repeat(256 * 1024);
    let refusal: { code?: unknown; message?: string } | undefined;
    let stored = 0;
    for (let i = 0; i < 2000 && !refusal; i++) {
      try {
        await docs.insertMany(Array.from({ length: 4 }, (_, j) => ({ _id: i * 4 + j, payload })));
        stored += 4;
      } catch (err) {
        refusal = err as { code?: unknown; message?: string };
      }
    }
    expect(refusal?.code, `no refusal after ${stored} documents of 256 KB`).toBe(146);
    expect(refusal?.message).toMatch(/memory is full \((8\d|9\d)% of \d+ MB after a collection\).* RUNHOOK_EMBEDDED_HEAP_MB/);
    // It refused well before the heap was exhausted: the server still answers reads and deletes.
    expect(await docs.findOne({ _id: 0 }, { projection: { _id: 1 } })).toEqual({ _id: 0 });
    expect((await docs.deleteMany({ _id: { $lt: stored / 2 } })).deletedCount).toBe(stored / 2);
  } finally {
    await store.close();
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
