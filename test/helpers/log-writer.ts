// A separate writer process for the tailing test: LOOPS concurrent loops each append
// COUNT activity entries through the store (the real ordering protocol).
// Env: MONGODB_URI (with the database in its path), COUNT, LOOPS, WRITER, PROJECT_ID, ENV_ID.
import { connect, createStore } from "../../src/store/index.js";

const env = process.env;
const db = await connect(env.MONGODB_URI!);
const logs = createStore(db).logs;
const count = Number(env.COUNT);
const loops = Number(env.LOOPS ?? 1);
const writer = env.WRITER ?? "w";
await Promise.all(
  Array.from({ length: loops }, async (_, loop) => {
    for (let i = 0; i < count; i++) {
      await logs.appendActivity({
        projectId: env.PROJECT_ID!,
        environmentId: env.ENV_ID!,
        environment: "production",
        rendering: null,
        user: { id: "writer", email: "writer@example.test" },
        action: "test.tail",
        via: "api",
        collection: null,
        recordId: null,
        runId: null,
        details: { w: `${writer}.${loop}`, i },
      });
    }
  }),
);
await db.close();
process.stdout.write(JSON.stringify({ done: writer }) + "\n");
