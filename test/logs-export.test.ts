// NDJSON export of 100,000 entries from a separate server process: complete, newest first (the
// published lists' order), one published item a line, and in constant memory (the server's peak
// RSS grows by less than 100 MB).
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openTestApp, spawnServer, testDbName, type ChildServer } from "./helpers/server.js";
import { addApiToken, createWorld, fillActivityLog, type World } from "../fixtures/world.js";
import { storeFixtures } from "../src/store/index.js";
import { sleep } from "../src/lib/sleep.js";

const N = Number(process.env.EXPORT_ENTRIES ?? 100_000);
let app: Awaited<ReturnType<typeof openTestApp>> | undefined;
let child: ChildServer;
let w: World;

function rssKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m![1]);
}

beforeAll(async () => {
  const dbName = testDbName();
  app = await openTestApp(dbName);
  w = await createWorld(app);
  await fillActivityLog(app, w, N);
  // A small heap: buffering the export (~38 MiB of published items for 100,000 entries) instead of
  // streaming it would run the server out of memory; it also keeps V8 from growing lazily.
  // The young generation is fixed at Node 20's default size (16 MB semi-spaces): Node 24
  // grows it further on its own, which raises the peak RSS without anything being kept.
  const heap = "--max-old-space-size=80 --max-semi-space-size=16";
  child = await spawnServer(dbName, { env: { RUNHOOK_EXECUTOR: "false", NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} ${heap}`.trim() } });
}, 600_000);

afterAll(async () => {
  await child?.stop();
  app?.stop();
  await app?.deps.store.close();
});

it(`streams ${N} entries as NDJSON in constant memory`, { timeout: 600_000 }, async () => {
  const pid = child.child.pid!;
  // Warm up the same path (one matching entry), so that the baseline is a server that has
  // already run an export, not one still compiling and sizing its heap.
  const warm = await fetch(`${child.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs?recordId=r1`, {
    headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
  });
  expect((await warm.text()).trim().split("\n")).toHaveLength(1);
  const before = rssKb(pid, "VmHWM");
  const t0 = Date.now();
  const res = await fetch(`${child.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs?limit=10`, {
    headers: { authorization: `Bearer ${w.apiToken}`, accept: "application/x-ndjson" },
  });
  expect(res.status).toBe(200);
  let count = 0;
  let bytes = 0;
  let last = N + 1;
  let ordered = true;
  let rest = "";
  let firstLine: any;
  const decoder = new TextDecoder();
  let paused: number | undefined;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    if (paused === undefined) {
      // A slow client: the server must stop producing (backpressure), not buffer the export.
      await sleep(3000);
      paused = rssKb(pid, "VmHWM");
    }
    bytes += chunk.byteLength;
    rest += decoder.decode(chunk, { stream: true });
    const lines = rest.split("\n");
    rest = lines.pop()!;
    for (const line of lines) {
      const e = JSON.parse(line);
      firstLine ??= e;
      const id = Number(e.id);
      if (id !== last - 1) ordered = false;
      last = id;
      count++;
    }
  }
  const ms = Date.now() - t0;
  const after = rssKb(pid, "VmHWM");
  console.log(
    `export: ${count} entries (${Math.round(bytes / 2 ** 20)} MiB) in ${ms} ms (${Math.round((count / ms) * 1000)}/s); server peak RSS ${Math.round(before / 1024)} → ${Math.round(paused! / 1024)} (client paused) → ${Math.round(after / 1024)} MB`,
  );
  expect(paused! - before).toBeLessThan(50 * 1024);
  expect(child.child.exitCode).toBeNull(); // still alive
  expect(rest).toBe("");
  expect(count).toBe(N);
  expect(ordered).toBe(true);
  // The newest entry (fillActivityLog: entry n at 1_700_000_000_000 + n ms, by the admin, no rendering, no run).
  const admin = (await storeFixtures(app!.deps.store).users.findOne({ _id: w.admin._id }))!;
  expect(firstLine).toEqual({
    object: "activityLog",
    id: String(N),
    type: "write",
    action: "update",
    label: "updated",
    recordIds: [`r${N}`],
    createdAt: new Date(1_700_000_000_000 + N).toISOString().replace("Z", "000Z"),
    user: { object: "user", id: admin.number, username: admin.name, email: w.admin.email },
    environment: { object: "environment", name: "production" },
    collection: { object: "collection", name: "orders" },
    team: { object: "team", name: "(no team)" },
  });
  expect(after - before).toBeLessThan(100 * 1024);
});

it("ends an export soon after its token's revoke, made through another process", { timeout: 120_000 }, async () => {
  const made = await addApiToken(app!, w.admin._id, w.projectId);
  const res = await fetch(`${child.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs`, {
    headers: { authorization: `Bearer ${made.plaintext}`, accept: "application/x-ndjson" },
  });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let bytes = (await reader.read()).value!.byteLength;
  // The token is revoked by this process (another instance on the same database) while the client reads slowly.
  await app!.deps.store.directory.apiTokens.revoke(w.orgId, made.id, new Date());
  const revokedAt = Date.now();
  let ended: "error" | "done" = "done";
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      bytes += r.value.byteLength;
      await sleep(20);
    }
  } catch {
    ended = "error";
  }
  // Cut short: far from the whole export (~38 MiB), within the notice of a change plus what the socket held.
  expect(ended).toBe("error");
  expect(bytes).toBeLessThan(20 * 2 ** 20);
  expect(Date.now() - revokedAt).toBeLessThan(10_000);
  const again = await fetch(`${child.baseUrl}/v1/project/${w.projectName}/environment/${w.environmentName}/activity-logs?limit=1`, {
    headers: { authorization: `Bearer ${made.plaintext}` },
  });
  expect(again.status).toBe(401);
});
