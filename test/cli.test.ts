// The integrator commands (`runhook trigger`, `runhook runs watch`, `runhook logs tail`) run as
// child processes, as users run them, against the real server and the demo world.
import type { ChildProcess } from "node:child_process";
import { storeFixtures } from "../src/store/index.js";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SeedOutput } from "../src/cli/demo.js";
import { apiClient } from "./helpers/api.js";
import { spawnCli, type Cli } from "./helpers/cli.js";
import { seed, startServer, type TestServer } from "./helpers/server.js";
import { adminClient, local, UUID_RE } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";
import { sleep } from "../src/lib/sleep.js";
import { errorBody } from "../src/rpc/errors.js";

let server: TestServer;
let demo: SeedOutput;
let demoUrl: string;
const tmp = mkdtempSync(join(tmpdir(), "runhook-cli-"));
const children = new Set<ChildProcess>();

beforeAll(async () => {
  server = await startServer();
  demo = await seed(server);
  demoUrl = local(demo.webhookUrl, server.deps.config.publicBaseUrl, server.baseUrl);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await server?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

/** `node bin/runhook.js …args` with a clean RUNHOOK_* environment plus `env`; killed after `timeoutMs`. */
function start(args: string[], env: Record<string, string> = {}, opts: { timeoutMs?: number; nodeArgs?: string[] } = {}): Cli {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNHOOK_") && k !== "MONGODB_URI"));
  // cwd: nothing may be written to the working directory (.data/ …)
  return spawnCli(args, {
    env: { ...base, RUNHOOK_URL: server.baseUrl, ...env },
    cwd: tmp,
    timeoutMs: opts.timeoutMs ?? 30_000,
    nodeArgs: opts.nodeArgs,
    children,
  });
}

const run = (args: string[], env?: Record<string, string>, opts?: Parameters<typeof start>[2]) => start(args, env, opts).exited;

async function until(what: string, cond: () => boolean, cli: Cli, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; stdout:\n${cli.out()}\nstderr:\n${cli.err()}`);
    await sleep(50);
  }
}

/** A world whose workflow is quick, with its webhook URL pointed at the test server. */
/**
 * The wait outlasts starting a CLI process (seconds on a loaded machine), so that a watcher
 * started after the trigger still sees the run ongoing.
 */
const WAIT_S = 4;

async function quickWorld(): Promise<World & { url: string }> {
  const w = await createWorld(server, {
    steps: [{ type: "load_record" }, { type: "wait", seconds: WAIT_S }, { type: "update_record", set: { status: "done" } }],
  });
  const got = await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
  return { ...w, url: local(got.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl) };
}

describe("runhook trigger", () => {
  it("prints the runId (202); a second call on the same record exits 8 naming the ongoing run (409)", async () => {
    const [record] = demo.recordIds;
    const first = await run(["trigger", demoUrl, record!], { RUNHOOK_TOKEN: demo.userToken });
    expect(first.code).toBe(0);
    const runId = first.stdout.trim();
    expect(runId).toMatch(UUID_RE);

    // The demo workflow waits 5 s: the run is still ongoing for both calls, made at once so that
    // two process start-ups on a busy machine fit in that wait (--json: the raw answer body on
    // stdout, same exit code).
    const [second, json] = await Promise.all([
      run(["trigger", demoUrl, record!, "--token", demo.userToken]),
      run(["trigger", demoUrl, record!, "--json"], { RUNHOOK_TOKEN: demo.userToken }),
    ]);
    expect(second.code).toBe(8);
    expect(second.stdout).toBe("");
    expect(second.stderr).toContain(`already ongoing on record "${record}": ${runId}`);
    expect(second.stderr).toContain(`runhook runs watch ${runId}`);

    expect(json.code).toBe(8);
    expect(JSON.parse(json.stdout)).toEqual({ ...errorBody("already_exists", "a run of this workflow is already ongoing on this record"), runId });

    const api = await fetch(`${server.baseUrl}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${demo.userToken}` } });
    expect(((await api.json()) as { recordId: string }).recordId).toBe(record);
  });

  it("explains a bad token (401, exit 5), a project API token in its place, and usage errors (exit 2)", async () => {
    const bad = await run(["trigger", demoUrl, "1002"], { RUNHOOK_TOKEN: "rh_app_nope" });
    expect(bad.code).toBe(5);
    expect(bad.stdout).toBe("");
    expect(bad.stderr).toMatch(/401 unauthenticated: missing, expired or invalid bearer token/);
    expect(bad.stderr).toMatch(/missing, unknown, expired or revoked: use a valid application token/);

    const apiToken = await run(["trigger", demoUrl, "1002", "--token", demo.apiToken]);
    expect(apiToken.code).toBe(5);
    expect(apiToken.stderr).toMatch(/this is a project API token .* needs an application token/);

    const noToken = await run(["trigger", demoUrl, "1002"]);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/no token: set RUNHOOK_TOKEN or pass --token/);

    const tampered = await run(["trigger", `${demoUrl.slice(0, -3)}xyz`, "1002", "--token", demo.userToken]);
    expect(tampered.code).toBe(4);
    expect(tampered.stderr).toMatch(/400 invalid_argument: .*\n.*copy it again/);

    const help = await run(["trigger", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: runhook trigger <webhook-url> <record-id>/);
  });
});

describe("runhook trigger: idempotency keys", () => {
  it("sends a fresh key by default; --idempotency-key K repeats the first call's run and says it was a replay; --no-idempotency-key sends none", async () => {
    const w = await quickWorld();
    const env = { RUNHOOK_TOKEN: w.userToken };
    const keys = () => storeFixtures(server.deps.store).idempotencyKeys.estimatedDocumentCount();
    const before = await keys();
    const fresh = await run(["trigger", w.url, "r1"], env);
    expect(fresh.code).toBe(0);
    expect(await keys()).toBe(before + 1);

    const first = await run(["trigger", w.url, "r2", "--idempotency-key", "order-42"], env);
    expect(first.code).toBe(0);
    expect(first.stderr).not.toMatch(/replayed/);
    const again = await run(["trigger", w.url, "r2", "--idempotency-key", "order-42"], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(first.stdout);
    expect(again.stdout.trim()).toMatch(UUID_RE);
    expect(again.stderr).toMatch(/replayed: an earlier call with this idempotency key started run .*; nothing new was started/);

    const mismatch = await run(["trigger", w.url, "r3", "--idempotency-key", "order-42"], env);
    expect(mismatch.code).toBe(4);
    expect(mismatch.stderr).toMatch(/400 failed_precondition: .*Idempotency-Key was already used[\s\S]*give a new --idempotency-key/);

    const countBefore = await keys();
    const none = await run(["trigger", w.url, "r3", "--no-idempotency-key"], env);
    expect(none.code).toBe(0);
    expect(await keys()).toBe(countBefore);

    const both = await run(["trigger", w.url, "r3", "--no-idempotency-key", "--idempotency-key", "x"], env);
    expect(both.code).toBe(2);
    // No answer: the hint names the key to retry with.
    const unreachable = await run(["trigger", "http://127.0.0.1:1/hooks/x", "r4"], env);
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toMatch(
      /may or may not have been created; retry with --idempotency-key '[0-9a-f-]{36}' to get that call's run if it was started/,
    );

    const badKey = await run(["trigger", w.url, "r4", "--idempotency-key", "k".repeat(256)], env);
    expect(badKey.code).toBe(4);
    expect(badKey.stderr).toMatch(/1 to 255 printable ASCII/);
  });
});

describe("runhook runs watch", () => {
  let w: World & { url: string };
  beforeAll(async () => {
    w = await quickWorld();
  });

  it("follows a run's steps until it SUCCEEDED (exit 0), one line per change off a terminal", async () => {
    const t = await run(["trigger", w.url, "r1"], { RUNHOOK_TOKEN: w.userToken });
    expect(t.code).toBe(0);
    const runId = t.stdout.trim();
    const watched = await run(["runs", "watch", runId], { RUNHOOK_TOKEN: w.userToken });
    expect(watched.stderr).toBe("");
    expect(watched.code).toBe(0);
    const lines = watched.stdout.trim().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^run ${runId} on orders/r1: (QUEUED|RUNNING)$`));
    expect(lines).toContainEqual(expect.stringMatching(/^step 1\/3 load_record: SUCCEEDED in \d+ ms$/));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^step 2/3 wait: SUCCEEDED in ${WAIT_S}\\.\\d s$`)));
    expect(lines).toContainEqual(expect.stringMatching(/^step 3\/3 update_record: SUCCEEDED in \d+ ms$/));
    expect(lines.at(-1)).toMatch(/^run SUCCEEDED in \d+(\.\d)? s$/);
    // The wait step was seen running: the long-poll reports changes as they happen.
    expect(lines).toContain("step 2/3 wait: RUNNING");
    // …and parked, with the time its wait ends.
    expect(lines.filter((l) => /^run waiting until \d{4}-\d\d-\d\dT[\d:.]+Z \(\d+(\.\d)? (ms|s) left\)$/.test(l))).toHaveLength(1);

    const r = await (await fetch(`${server.baseUrl}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${w.apiToken}` } })).json();
    expect((r as { state: string }).state).toBe("SUCCEEDED");
  });

  it("exits 10 on a FAILED run (a record that does not exist) printing the step's error; 7 on an unknown run", async () => {
    const t = await run(["trigger", w.url, "no-such-record"], { RUNHOOK_TOKEN: w.userToken });
    expect(t.code).toBe(0);
    const runId = t.stdout.trim();
    // A project API token of the run's project may follow it too; --base-url wins over RUNHOOK_URL.
    const watched = await run(["runs", "watch", runId, "--token", w.apiToken, "--base-url", server.baseUrl], { RUNHOOK_URL: "http://127.0.0.1:9" });
    expect(watched.code).toBe(10);
    expect(watched.stdout).toMatch(/step 1\/3 load_record: FAILED in \d+ ms: record "no-such-record" of collection "orders" not found or not accessible/);
    expect(watched.stderr).toBe(
      `runhook runs watch: run FAILED at step 1/3 (load_record): record "no-such-record" of collection "orders" not found or not accessible\n`,
    );

    const unknown = await run(["runs", "watch", "6f1c0a8e-1d2b-4c3d-8e4f-5a6b7c8d9e0f"], { RUNHOOK_TOKEN: w.userToken });
    expect(unknown.code).toBe(7);
    expect(unknown.stderr).toMatch(/404 not_found: .*\n.*no run with this id/);
  });
});

describe("runhook logs tail", () => {
  it("prints NDJSON entries; killed and restarted with --cursor-file, it resumes without repeating any", async () => {
    const w = await createWorld(server);
    const api = apiClient(server.baseUrl, w.apiToken);
    const notesPath = `/v1/project/${w.projectName}/environment/${w.environmentName}/notes`;
    const note = async (i: number) =>
      expect((await api.post(notesPath, { collection: "orders", recordId: `r${i}`, content: `<p>note ${i}</p>` })).status).toBe(201);
    for (let i = 1; i <= 5; i++) await note(i);

    const cursorFile = join(tmp, "activity.cursor");
    const args = [
      "logs",
      "tail",
      "--project",
      w.projectName,
      "--environment",
      w.environmentName,
      "--action",
      "createNote",
      "--cursor-file",
      cursorFile,
      "--limit",
      "2",
      "--interval",
      "0.2",
    ];
    const env = { RUNHOOK_TOKEN: w.apiToken };
    const parse = (out: string) =>
      out
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { object: string; id: string; action: string; recordIds: string[]; user: { email: string } });

    const first = start(args, env);
    await until("the 5 entries", () => first.out().split("\n").filter(Boolean).length >= 5, first);
    await sleep(500); // caught up: polling an empty page
    first.child.kill("SIGTERM");
    const a = await first.exited;
    expect(a.code).toBe(0);
    const got1 = parse(a.stdout);
    // Each line is an item as the /v1 list shows it.
    expect(got1.map((e) => e.recordIds)).toEqual([["r1"], ["r2"], ["r3"], ["r4"], ["r5"]]);
    expect(got1.every((e) => e.object === "activityLog" && e.action === "createNote" && e.user.email === w.admin.email)).toBe(true);
    expect(readFileSync(cursorFile, "utf8").trim()).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(existsSync(`${cursorFile}.${first.child.pid}.tmp`)).toBe(false);

    for (let i = 6; i <= 8; i++) await note(i);
    const second = start(args, env);
    await until("the 3 new entries", () => second.out().split("\n").filter(Boolean).length >= 3, second);
    await sleep(500);
    second.child.kill("SIGINT");
    const b = await second.exited;
    expect(b.code).toBe(0);
    expect(b.stderr).toContain(`from the cursor in ${cursorFile}`);
    const got2 = parse(b.stdout);
    expect(got2.map((e) => e.recordIds)).toEqual([["r6"], ["r7"], ["r8"]]);
    const ids = [...got1, ...got2].map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(new Set(ids).size).toBe(8);
  });

  it("--admin tails the project's admin log; a cursor of other filters, a bad token and bad flags stop with the reason", async () => {
    const admin = start(["logs", "tail", "--project", demo.projectName, "--admin", "--limit", "100"], { RUNHOOK_TOKEN: demo.apiToken });
    await until("admin entries", () => admin.out().includes("\n"), admin);
    admin.child.kill("SIGTERM");
    const out = await admin.exited;
    expect(out.code).toBe(0);
    const first = JSON.parse(out.stdout.split("\n")[0]!) as { object: string; id: string; user: { email: string } };
    expect(first).toMatchObject({ object: "adminLog", id: "1", user: { email: "admin@demo.example" } });

    // The cursor saved for one filter does not fit another: 400 (exit 4), with the way out.
    const cursorFile = join(tmp, "other.cursor");
    const base = ["logs", "tail", "--project", demo.projectName, "--environment", demo.environmentName, "--cursor-file", cursorFile];
    const env = { RUNHOOK_TOKEN: demo.apiToken };
    const t = start([...base, "--action", "triggerWorkflow"], env);
    await until("the cursor file", () => existsSync(cursorFile), t);
    t.child.kill("SIGTERM");
    expect((await t.exited).code).toBe(0);
    const other = await run([...base, "--action", "createNote"], env);
    expect(other.code).toBe(4);
    expect(other.stderr).toMatch(/400 invalid_argument: .*cursor.*\n.*the cursor saved in .*other\.cursor was issued for another log, other filters/);

    const bad = await run(["logs", "tail", "--project", demo.projectName, "--environment", demo.environmentName], { RUNHOOK_TOKEN: demo.userToken });
    expect(bad.code).toBe(5);
    expect(bad.stderr).toMatch(/this is an application token .* needs a project API token/);

    const noEnv = await run(["logs", "tail", "--project", demo.projectName], env);
    expect(noEnv.code).toBe(2);
    expect(noEnv.stderr).toMatch(/--environment is required/);
    const unknown = await run(["logs", "tail", "--project", demo.projectName, "--environment", "staging"], env);
    expect(unknown.code).toBe(7);
    const typo = await run(["logs", "tail", "--project", demo.projectName, "--admin", "--record-id", "1"], env);
    expect(typo.code).toBe(2);
    const adminOnly = await run(["logs", "tail", "--project", demo.projectName, "--environment", demo.environmentName, "--initiator", "administrator"], env);
    expect(adminOnly.code).toBe(2);
    expect(adminOnly.stderr).toMatch(/--initiator filters the admin log only/);
    // The /v1 lists' pages hold at most 100 entries.
    const tooMany = await run(["logs", "tail", "--project", demo.projectName, "--admin", "--limit", "101"], env);
    expect(tooMany.code).toBe(2);
    // A filter value the server refuses stops with its message (an action runhook's own name, not the published one).
    const refused = await run([...base.slice(0, -2), "--action", "note.created"], env);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(/400 invalid_argument: action must be one of .*\n.*a filter value was refused/);
  });
});

it("the integrator commands load neither the server's configuration nor the database driver", async () => {
  // A resolve hook, registered before tsx, that records every module the command resolves.
  const record = join(tmp, "resolved.txt");
  const hooks = join(tmp, "hooks.mjs");
  writeFileSync(
    hooks,
    `import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(${JSON.stringify(record)}, r.url + "\\n");
  return r;
}
`,
  );
  const register = join(tmp, "register.mjs");
  writeFileSync(register, `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  const nodeArgs = ["--import", pathToFileURL(register).href];

  for (const args of [
    ["trigger", demoUrl, "1003", "--token", demo.userToken],
    ["runs", "watch", "6f1c0a8e-1d2b-4c3d-8e4f-5a6b7c8d9e0f", "--token", demo.userToken],
    ["logs", "tail", "--project", demo.projectName, "--environment", "nope"],
  ]) {
    writeFileSync(record, "");
    const r = await run(args, { RUNHOOK_TOKEN: demo.apiToken }, { nodeArgs });
    expect([0, 7]).toContain(r.code);
    const urls = readFileSync(record, "utf8").split("\n").filter(Boolean);
    expect(urls.some((u) => u.endsWith("/src/cli/common.ts"))).toBe(true);
    expect(urls.filter((u) => /\/node_modules\/mongodb\/|\/src\/(config|main)\.ts$|\/src\/(db|runs|logs|gateway)\//.test(u))).toEqual([]);
  }
  // Nothing was written where the commands ran (loadConfig would create .data/secrets.json).
  expect(existsSync(join(tmp, ".data"))).toBe(false);
});
