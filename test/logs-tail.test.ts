// Tailing is exact: while 4 writers in 2 other processes append 20,000 entries, a
// consumer polling nextCursor (order asc) receives each exactly once, in order. The published
// items name an entry by its id (its number in the stream); what each writer wrote there (its
// loop and counter, in the entry's details) is read from the store once the writers are done.
import { spawn } from "node:child_process";
import { storeFixtures } from "../src/store/index.js";
import { activityStream } from "../src/store/logs.js";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { apiClient, qs } from "./helpers/api.js";
import { ROOT, startServer, uriFor, type TestServer } from "./helpers/server.js";
import { createWorld, type World } from "../fixtures/world.js";
import { sleep } from "../src/lib/sleep.js";

const PROCESSES = 2;
const LOOPS = 2;
const PER_LOOP = Number(process.env.TAIL_PER_LOOP ?? 5000);

let server: TestServer;
let w: World;
beforeAll(async () => {
  server = await startServer();
  w = await createWorld(server);
});
afterAll(async () => {
  await server?.stop();
});

function writerProcess(name: string): Promise<void> {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "scripts/append-activity.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      MONGODB_URI: uriFor(server.dbName),
      COUNT: String(PER_LOOP),
      LOOPS: String(LOOPS),
      WRITER: name,
      PROJECT_ID: w.projectId,
      ENV_ID: w.environmentId,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`writer ${name} exited ${code}: ${out}`)))));
}

it(`delivers ${PROCESSES * LOOPS * PER_LOOP} concurrently written entries exactly once, in order`, { timeout: 1_200_000 }, async () => {
  const total = PROCESSES * LOOPS * PER_LOOP;
  const c = apiClient(server.baseUrl, w.apiToken);
  const path = `/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`;
  const tail = { order: "asc", limit: 100 };
  let cursor = (await c.get(path + qs({ ...tail, limit: 1 }))).body.nextCursor as string;
  expect(cursor).toBeTypeOf("string");

  let writersDone = false;
  const t0 = Date.now();
  const writers = Promise.all(Array.from({ length: PROCESSES }, (_, i) => writerProcess(`p${i}`))).finally(() => (writersDone = true));
  writers.catch(() => {});

  /** The ids received, in the order received. */
  const received: number[] = [];
  let polls = 0;
  for (;;) {
    const doneBefore = writersDone;
    const r = await c.get(path + qs({ ...tail, cursor }));
    polls++;
    expect(r.status).toBe(200);
    expect(r.body.nextCursor).toBeTypeOf("string");
    cursor = r.body.nextCursor;
    received.push(...r.body.data.map((e: { id: string }) => Number(e.id)));
    if (doneBefore && !r.body.hasMore) break;
    if (!r.body.hasMore) await sleep(500); // caught up: poll again shortly
  }
  await writers;
  const ms = Date.now() - t0;
  const fx = storeFixtures(server.deps.store);
  // What each writer wrote at each position of the environment's stream.
  const written = new Map<number, { w: string; i: number }>();
  for (const d of await fx.activityLogs.find({ environmentId: w.environmentId }).toArray()) written.set(d.seq, d.details as { w: string; i: number });
  const seen = new Set<string>();
  const nextI = new Map<string, number>();
  let lastId = 0;
  let dupes = 0;
  let outOfOrder = 0;
  for (const id of received) {
    if (id <= lastId) {
      outOfOrder++;
      if (outOfOrder < 5) console.log("id order", lastId, id);
    }
    lastId = id;
    const e = written.get(id);
    expect(e, `entry ${id}`).toBeDefined();
    const key = `${e!.w}:${e!.i}`;
    if (seen.has(key)) dupes++;
    seen.add(key);
    // Each writer loop writes i = 0, 1, 2, … sequentially: they must arrive in that order.
    const expectNext = nextI.get(e!.w) ?? 0;
    if (e!.i !== expectNext) {
      outOfOrder++;
      if (outOfOrder < 5) console.log("writer order", e!.w, expectNext, e!.i, id);
    }
    nextI.set(e!.w, e!.i + 1);
  }
  // The stream's positions (its `_id` range) that hold a tombstone.
  const stream = activityStream(w.environmentId);
  const tombs = await fx.activityLogs.countDocuments({ _id: { $gt: `${stream}:`, $lt: `${stream};` }, tomb: true });
  console.log(`tail: ${total} entries, ${polls} polls, ${ms} ms, ${tombs} tombstones`);
  expect(written.size).toBe(total);
  expect(received.length).toBe(total);
  expect(dupes).toBe(0);
  expect(outOfOrder).toBe(0);
  expect(seen.size).toBe(total);
  expect([...nextI.values()].every((n) => n === PER_LOOP)).toBe(true);
  expect(nextI.size).toBe(PROCESSES * LOOPS);
});
