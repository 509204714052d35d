// A writer process for the tailing test and the log benchmark: LOOPS concurrent loops, each
// appending COUNT activity entries one after the other through the store (the real ordering
// protocol). Env: MONGODB_URI (the database in its path), COUNT, LOOPS, WRITER, PROJECT_ID,
// ENV_ID. Each entry says which loop wrote it and its count in that loop twice: in its details
// ({w, i}, read over gRPC) and as its record id (`<w>:<i>`, which the public API's items show).
// Prints one JSON line {writer, entries, ms} when done.
import { performance } from "node:perf_hooks";
import { openStore } from "../src/store/index.js";

const env = process.env;
const store = await openStore(env.MONGODB_URI!);
const logs = store.logs;
const count = Number(env.COUNT);
const loops = Number(env.LOOPS ?? 1);
const writer = env.WRITER ?? "w";
const t0 = performance.now();
await Promise.all(
  Array.from({ length: loops }, async (_, loop) => {
    for (let i = 0; i < count; i++) {
      await logs.appendActivity({
        projectId: env.PROJECT_ID!,
        environmentId: env.ENV_ID!,
        environment: "production",
        rendering: null,
        user: { id: "writer", email: "writer@example.test" },
        action: "tail",
        via: "api",
        collection: null,
        recordId: `${writer}.${loop}:${i}`,
        runId: null,
        details: { w: `${writer}.${loop}`, i },
      });
    }
  }),
);
const ms = Math.round(performance.now() - t0);
await store.close();
process.stdout.write(`${JSON.stringify({ writer, entries: count * loops, ms })}\n`);
