// A writer that inserts one small document at a time and times each insert, on a thread of its
// own: its figures are the database's waits only, never a pause of the bench's event loop (a
// collection of the bench's heap, a sweep's batch being prepared). "start" begins a period,
// "stop" answers with the period's latencies (ms), "close" ends it.
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";

interface ProbeData {
  uri: string;
  dbName: string;
  collection: string;
}

export interface ProbeWriter {
  /** Starts timing the inserts. */
  start(): void;
  /** The latencies (ms) of the inserts since start(), and when the longest ended. */
  stop(): Promise<{ latencies: number[]; longestAt: string | null }>;
  close(): Promise<void>;
}

// The thread loads runhook's store (TypeScript, through tsx's CommonJS hook: a worker does not
// inherit the bench's loader) and writes to a scratch collection through it, as the bench does.
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const { performance } = require("node:perf_hooks");
require("tsx/cjs/api").register();
const { openStore, storeFixtures } = require(workerData.storePath);
let timed = null;
let longest = 0;
let longestAt = null;
let closing = false;
parentPort.on("message", (m) => {
  if (m === "start") { timed = []; longest = 0; longestAt = null; }
  if (m === "stop") { parentPort.postMessage({ latencies: timed || [], longestAt }); timed = null; }
  if (m === "close") closing = true;
});
(async () => {
  const store = await openStore(workerData.uri, { dbName: workerData.dbName });
  const probe = storeFixtures(store).scratch(workerData.collection);
  for (let n = 0; !closing; n++) {
    const t = performance.now();
    await probe.insertOne({ _id: n });
    const ms = performance.now() - t;
    if (timed) timed.push(ms);
    if (timed && ms > longest) { longest = ms; longestAt = new Date().toISOString(); }
  }
  await store.close();
  parentPort.postMessage("closed");
})().catch((err) => { setImmediate(() => { throw err; }); });
`;

export function probeWriter(data: ProbeData): ProbeWriter {
  const storePath = fileURLToPath(new URL("../../src/store/index.ts", import.meta.url));
  const worker = new Worker(WORKER, { eval: true, workerData: { ...data, storePath } });
  const replies: { resolve: (m: unknown) => void; reject: (err: Error) => void }[] = [];
  let failure: Error | undefined;
  worker.on("message", (m) => replies.shift()?.resolve(m));
  worker.on("error", (err) => {
    failure = err;
    for (const r of replies.splice(0)) r.reject(err);
  });
  const ask = (m: string) =>
    new Promise<unknown>((resolve, reject) => {
      if (failure) return reject(failure);
      replies.push({ resolve, reject });
      worker.postMessage(m);
    });
  return {
    start: () => worker.postMessage("start"),
    stop: async () => (await ask("stop")) as { latencies: number[]; longestAt: string | null },
    close: async () => {
      await ask("close");
      await worker.terminate();
    },
  };
}
