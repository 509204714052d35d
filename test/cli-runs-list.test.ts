// `runhook runs list` as a child process, as users run it: NDJSON when its stdout is a pipe (as
// here), a table with --format table, the filters as flags, and the exit codes of the
// integrator commands. The executors are off: runs are stored in the states each case needs.
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { timeArg } from "../src/cli/list.js";
import { finishedActiveKey, storeFixtures } from "../src/store/index.js";
import type { RunDoc, RunState } from "../src/store/types.js";
import { createWorld, worldRun, type World } from "../fixtures/world.js";
import { spawnCli } from "./helpers/cli.js";
import { startServer, type TestServer } from "./helpers/server.js";

let server: TestServer;
let w: World;
let other: World;
const runs: RunDoc[] = [];
const tmp = mkdtempSync(join(tmpdir(), "runhook-cli-list-"));
const children = new Set<ChildProcess>();

/** A failed run's error: its first line, then more. */
const FAILURE = "record not found\nthe collection orders has no record with this id";

function runDoc(o: { state: RunState; minutesAgo: number; recordId: string; user: World["user"] }): RunDoc {
  const createdAt = new Date(Date.now() - o.minutesAgo * 60_000);
  const doc = worldRun(w, o.recordId, [{ type: "load_record" }], { userId: o.user._id, userEmail: o.user.email, createdAt });
  const finishedAt = new Date(createdAt.getTime() + 1500);
  return { ...doc, state: o.state, finishedAt, activeKey: finishedActiveKey(doc._id, finishedAt), error: o.state === "FAILED" ? FAILURE : "" };
}

beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR: "false" } });
  w = await createWorld(server);
  other = await createWorld(server);
  // Failed and succeeded runs of the last hour and of the day before, on two records, by two users.
  const states: RunState[] = ["FAILED", "SUCCEEDED", "CANCELLED", "FAILED"];
  for (let i = 0; i < 12; i++) {
    runs.push(runDoc({ state: states[i % 4]!, minutesAgo: i < 8 ? 5 + i * 5 : 1500 + i, recordId: i % 2 ? "r1" : "r2", user: i % 3 ? w.user : w.admin }));
  }
  await storeFixtures(server.deps.store).insertRuns(runs);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await server?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

function run(args: string[], token: string | undefined = w.apiToken) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNHOOK_") && k !== "MONGODB_URI"));
  return spawnCli(["runs", "list", "--project", w.projectName, "--environment", w.environmentName, ...args], {
    env: { ...base, RUNHOOK_URL: server.baseUrl, ...(token ? { RUNHOOK_TOKEN: token } : {}) },
    cwd: tmp,
    timeoutMs: 30_000,
    children,
  }).exited;
}

const newestFirst = (docs: RunDoc[]) => [...docs].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime()).map((r) => r._id);
const ndjsonIds = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => (JSON.parse(l) as { id: string }).id);

describe("runhook runs list", () => {
  it("--state FAILED --since 1h prints the failed runs of the last hour as NDJSON when piped, newest first", async () => {
    const out = await run(["--state", "FAILED", "--since", "1h"]);
    expect(out.code, out.stderr).toBe(0);
    const hourAgo = Date.now() - 3_600_000;
    expect(ndjsonIds(out.stdout)).toEqual(newestFirst(runs.filter((r) => r.state === "FAILED" && r.createdAt.getTime() >= hourAgo)));
    // Each line is the run as GET /v1/runs/{runId} answers it.
    const first = JSON.parse(out.stdout.split("\n")[0]!);
    expect(first).toMatchObject({ state: "FAILED", collection: "orders", error: FAILURE, workflowName: "test workflow", user: { id: expect.any(String) } });
  });

  it("takes the record, several states (repeated or comma list), the order and a limit", async () => {
    const expected = newestFirst(runs.filter((r) => r.recordId === "r1" && ["FAILED", "CANCELLED"].includes(r.state)));
    const comma = await run(["--collection", "orders", "--record", "r1", "--state", "FAILED,CANCELLED"]);
    const repeated = await run(["--collection", "orders", "--record", "r1", "--state", "FAILED", "--state", "CANCELLED"]);
    expect(ndjsonIds(comma.stdout)).toEqual(expected);
    expect(ndjsonIds(repeated.stdout)).toEqual(expected);
    // The record alone: in any collection of the environment.
    expect(ndjsonIds((await run(["--record", "r1", "--state", "FAILED,CANCELLED"])).stdout)).toEqual(expected);
    // The workflow by its name, or by its full id.
    expect(ndjsonIds((await run(["--workflow", "test workflow", "--record", "r1"])).stdout)).toEqual(newestFirst(runs.filter((r) => r.recordId === "r1")));
    expect(ndjsonIds((await run(["--workflow", w.workflowId, "--record", "r2"])).stdout)).toEqual(newestFirst(runs.filter((r) => r.recordId === "r2")));
    const asc = await run(["--order", "asc", "--limit", "3"]);
    expect(ndjsonIds(asc.stdout)).toEqual(newestFirst(runs).reverse().slice(0, 3));
    const day = await run(["--since", "2d", "--until", "1h", "--user", w.admin._id]);
    const hourAgo = Date.now() - 3_600_000;
    expect(ndjsonIds(day.stdout)).toEqual(newestFirst(runs.filter((r) => r.userId === w.admin._id && r.createdAt.getTime() < hourAgo)));
  });

  it("--format table prints a table with a header and a row per run", async () => {
    const out = await run(["--format", "table", "--state", "FAILED"]);
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^CREATED\s+RUN\s+STATE\s+TOOK\s+RECORD\s+USER\s+VIA\s+WORKFLOW\s+ERROR$/);
    const failed = newestFirst(runs.filter((r) => r.state === "FAILED"));
    expect(lines.length).toBe(failed.length + 1);
    failed.forEach((id, i) => {
      expect(lines[i + 1]).toContain(id);
      expect(lines[i + 1]).toContain("FAILED");
      expect(lines[i + 1]).toContain("1.5 s");
      expect(lines[i + 1]).toContain("test workflow v1");
      // The failure's first line only: a row is one line.
      expect(lines[i + 1]).toMatch(/record not found$/);
    });
    expect((await run(["--format", "table", "--workflow", randomUUID()])).stdout).toBe("no runs\n");
  });

  it("an application token of a user who is no admin lists the runs of the workflows it may trigger, whoever started them", async () => {
    const out = await run([], w.userToken);
    expect(out.code, out.stderr).toBe(0);
    expect(ndjsonIds(out.stdout)).toEqual(newestFirst(runs));
    const theirs = await run(["--user", w.admin._id], w.userToken);
    expect(ndjsonIds(theirs.stdout)).toEqual(newestFirst(runs.filter((r) => r.userId === w.admin._id)));
  });

  it("exits 2 on usage errors, 4 on a 400, 5 on a bad token, 6 on another project's token", async () => {
    expect((await run([], "")).code).toBe(2);
    expect((await run(["--limit", "0"])).code).toBe(2);
    expect((await run(["--since", "yesterday"])).code).toBe(2);
    const bad = await run(["--state", "BROKEN"]);
    expect(bad.code).toBe(4);
    expect(bad.stderr).toMatch(/400 invalid_argument: state must be one of/);
    const unknown = await run(["--workflow", "no such workflow"]);
    expect([unknown.code, unknown.stderr]).toEqual([
      4,
      expect.stringMatching(/no workflow of this environment whose runs you see is named "no such workflow"/),
    ]);
    expect((await run([], `rh_api_${"0".repeat(32)}_${"A".repeat(43)}`)).code).toBe(5);
    expect((await run([], other.apiToken)).code).toBe(6);
  });

  it("reads durations back from now and passes RFC 3339 times through", () => {
    const now = Date.parse("2025-03-01T12:00:00Z");
    expect(timeArg("since", "1h", now)).toBe("2025-03-01T11:00:00.000Z");
    expect(timeArg("since", "30m", now)).toBe("2025-03-01T11:30:00.000Z");
    expect(timeArg("since", "2d", now)).toBe("2025-02-27T12:00:00.000Z");
    expect(timeArg("until", "2025-03-01T10:00:00+01:00", now)).toBe("2025-03-01T10:00:00+01:00");
    expect(() => timeArg("since", "1w", now)).toThrow(/duration/);
  });
});
