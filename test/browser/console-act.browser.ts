// Operators act on runs in the console, in a real browser against the real server: Retry and
// Retry from the failed step on a failed run's page (the new run then steps to SUCCEEDED live,
// and each run links the other), Start on a record on a workflow's page (a record with an
// ongoing run is refused in words, with a link to that run), no such control for a role the
// workflow does not allow, and batches from the runs list (selected rows, or every run the
// filters match): the dry run's count and its reasons, Confirm, the progress until finished.
// With the keyboard alone too, and axe-core finds no violation on these pages.
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Page } from "playwright-core";
import { beforeAll, expect, it } from "vitest";
import { createWorld, type World } from "../../fixtures/world.js";
import { RunService } from "../../gen/runhook/v1/run_pb.js";
import { storeFixtures } from "../../src/store/index.js";
import type { RunDoc } from "../../src/store/types.js";
import { waitForRun } from "../helpers/runs.js";
import { adminClient, postHook } from "../helpers/webhook.js";
import { LONG, browserForFile, consoleServerForFile, expectVisibleFocus, isFocused, signedIn, tabTo, violations } from "./lib.js";

const SHOTS = join(tmpdir(), "runhook-browser");
const STEPS = [{ type: "load_record" as const }, { type: "wait" as const, seconds: 1 }, { type: "update_record" as const, set: { status: "done" } }];
const EVERY_ROLE = ["admin", "editor", "user"] as const;
/** Chromium logs a refused call; these scenarios expect the 409 of a record with an ongoing run. */
const CONFLICT = /^Failed to load resource: the server responded with a status of 409 \(Conflict\)$/;

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;

beforeAll(async () => {
  w = await createWorld(server, { steps: STEPS });
  mkdirSync(SHOTS, { recursive: true });
});

const fixtures = () => storeFixtures(server.deps.store);

/** A run started by a webhook call (as the world's user), once finished. */
async function hookRun(world: World, recordId: string, token = world.userToken): Promise<RunDoc> {
  const hook = await postHook(`${server.baseUrl}${world.hookPath}`, token, { record_id: recordId });
  expect(hook.status).toBe(202);
  return waitForRun(server.deps.store, hook.body.runId!);
}

/** A run that failed at its first step: its record did not exist yet (it does now). */
async function failedRun(world: World, recordId: string, token?: string): Promise<RunDoc> {
  const run = await hookRun(world, recordId, token);
  expect(run.state).toBe("FAILED");
  await fixtures().insertRecords(world.dataDatabase, world.collection, [{ id: recordId, status: "new" }]);
  return run;
}

async function shot(page: Page, name: string) {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

/** axe-core finds nothing on the page as it is (every impact). */
async function expectNoViolations(page: Page, where: string) {
  const found = await violations(page);
  expect(
    found.map((v) => `${where}: ${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`),
    where,
  ).toEqual([]);
}

const runPage = (runId: string) => `${server.baseUrl}/console#/runs/${runId}`;
const newRunId = (page: Page) => decodeURIComponent(new URL(page.url()).hash.replace(/^#\/runs\//, ""));

it("a user retries a failed run from its page: the new run steps to SUCCEEDED live, and each run links the other", { timeout: 90_000 }, async () => {
  const failed = await failedRun(w, "late-1");
  const { page, done } = await signedIn(browser, server, w.userToken, w.user.email, { bypassCSP: true });
  await page.goto(runPage(failed._id));
  await page.locator(".run h1 .state.failed").waitFor(LONG);
  await page.getByRole("button", { name: "Retry", exact: true }).waitFor(LONG);
  expect(await page.getByRole("button", { name: "Retry from the failed step" }).count()).toBe(1);
  await expectNoViolations(page, "a failed run");
  await shot(page, "act-failed-run");

  await page.getByRole("button", { name: "Retry", exact: true }).click();
  await page.waitForURL((u) => !u.hash.includes(failed._id), LONG);
  const retryId = newRunId(page);
  // The new run's page, followed live: its wait step runs, then it ends SUCCEEDED.
  await page.locator(".step.wait.running, .step.wait.succeeded").first().waitFor(LONG);
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);
  await expect.poll(() => isFocused(page.locator(".run h1")), LONG).toBe(true);
  const retryOf = page.locator("dt:text-is('Retry of') + dd a");
  expect(await retryOf.getAttribute("href")).toBe(`#/runs/${failed._id}`);
  expect(await page.locator(".run dd").first().textContent()).toContain("late-1");
  expect(await page.locator("dt:text-is('Workflow') + dd a").textContent()).toBe("test workflow");
  expect(await page.locator("dt:text-is('As') + dd").textContent()).toContain("via console");
  await expectNoViolations(page, "a retry");
  await shot(page, "act-retry-succeeded");

  // The old run names its retry.
  await retryOf.click();
  await page.locator(".run h1 .state.failed").waitFor(LONG);
  const retriedBy = page.locator("dt:text-is('Retried by') + dd a");
  await retriedBy.first().waitFor(LONG);
  expect(await retriedBy.getAttribute("href")).toBe(`#/runs/${retryId}`);
  const stored = await waitForRun(server.deps.store, retryId);
  expect(stored).toMatchObject({ state: "SUCCEEDED", retryOf: failed._id, via: "console" });
  await done();
});

it("a user retries from the failed step: the steps before it are skipped, each naming the run it ran in", { timeout: 90_000 }, async () => {
  // The update step fails (the user's role may not edit), then the role may again.
  await fixtures().setEditRoles(w.renderingId, w.collectionId, ["admin"]);
  const failed = await hookRun(w, "r3");
  expect(failed.steps.map((s) => s.state)).toEqual(["SUCCEEDED", "SUCCEEDED", "FAILED"]);
  await fixtures().setEditRoles(w.renderingId, w.collectionId, [...EVERY_ROLE]);
  const { page, done } = await signedIn(browser, server, w.userToken, w.user.email, { bypassCSP: true });
  await page.goto(runPage(failed._id));
  await page.getByText("runs version 1 again from step 3 (update_record): the steps before it").waitFor(LONG);
  await page.getByRole("button", { name: "Retry from the failed step" }).click();
  await page.waitForURL((u) => !u.hash.includes(failed._id), LONG);
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);
  expect(await page.locator(".timeline .step").evaluateAll((steps) => steps.map((s) => s.querySelector(".step-state")?.textContent))).toEqual([
    "SKIPPED",
    "SKIPPED",
    "SUCCEEDED",
  ]);
  const doneIn = page.locator(".step.skipped .step-note a");
  expect(await doneIn.count()).toBe(2);
  for (const link of await doneIn.all()) expect(await link.getAttribute("href")).toBe(`#/runs/${failed._id}`);
  await expectNoViolations(page, "a retry from the failed step");
  await shot(page, "act-retry-from-failed-step");
  expect(await fixtures().records(w.dataDatabase, w.collection).findOne({ id: "r3" })).toMatchObject({ status: "done" });
  await done();
});

it("a user starts a run on a record from the workflow's page; a record with an ongoing run is refused in words, with a link to it", {
  timeout: 90_000,
}, async () => {
  const slow = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 60 }] });
  const ongoing = await postHook(`${server.baseUrl}${slow.hookPath}`, slow.userToken, { record_id: "r1" });
  expect(ongoing.status).toBe(202);
  const { page, done } = await signedIn(browser, server, slow.userToken, slow.user.email, { bypassCSP: true, allowErrors: CONFLICT });
  await page.goto(`${server.baseUrl}/console#/p/${slow.projectId}/r/${slow.renderingId}/w/${slow.workflowId}`);
  const record = page.getByRole("textbox", { name: "Record id" });
  await record.waitFor(LONG);
  await record.fill("r1");
  await page.getByRole("button", { name: "Start run" }).click();
  const refusal = page.getByRole("alert");
  await refusal.waitFor(LONG);
  expect(await refusal.textContent()).toContain("A run of this workflow is already ongoing on this record");
  expect(await refusal.locator("a").getAttribute("href")).toBe(`#/runs/${ongoing.body.runId}`);
  await expectNoViolations(page, "a workflow's page, a start refused");
  await shot(page, "act-start-refused");

  await record.fill("r2");
  await page.getByRole("button", { name: "Start run" }).click();
  await page.waitForURL((u) => u.hash.startsWith("#/runs/"), LONG);
  await page.locator(".run h1 .state").waitFor(LONG);
  expect(await page.locator(".run dd").first().textContent()).toContain("r2");
  expect((await server.deps.store.runs.get(newRunId(page)))?.via).toBe("console");
  await done();
});

it("whoever's role may not trigger the workflow sees no Start and no Retry; whoever's may sees both", { timeout: 60_000 }, async () => {
  const locked = await createWorld(server, { steps: STEPS });
  const failed = await failedRun(locked, "gone-1");
  // Only the user role may trigger it: the project admin sees the run, and no control.
  await fixtures().setTriggerRoles(locked.workflowId, ["user"]);
  const workflowPage = `${server.baseUrl}/console#/p/${locked.projectId}/r/${locked.renderingId}/w/${locked.workflowId}`;
  const admin = await signedIn(browser, server, locked.adminToken, locked.admin.email);
  await admin.page.goto(workflowPage);
  await admin.page.locator(".version.active").waitFor(LONG);
  expect(await admin.page.getByText("Who may trigger it: user.").count()).toBe(1);
  expect(await admin.page.getByRole("button", { name: "Start run" }).count()).toBe(0);
  await admin.page.goto(runPage(failed._id));
  await admin.page.locator("dt:text-is('Workflow') + dd a:text-is('test workflow')").waitFor(LONG);
  expect(await admin.page.getByRole("button", { name: /^Retry/ }).count()).toBe(0);
  await admin.done();
  const user = await signedIn(browser, server, locked.userToken, locked.user.email);
  await user.page.goto(workflowPage);
  await user.page.getByRole("button", { name: "Start run" }).waitFor(LONG);
  await user.page.goto(runPage(failed._id));
  await user.page.getByRole("button", { name: "Retry", exact: true }).waitFor(LONG);
  await user.done();
});

/** The runs list of `world`'s environment with `query`. */
const runsList = (world: World, query = "") => `${server.baseUrl}/console#/p/${world.projectId}/env/${world.environmentName}/runs${query}`;

it("an admin retries the selected runs from the runs list: the dry run's count, Confirm, the progress until finished", { timeout: 120_000 }, async () => {
  const world = await createWorld(server, { steps: STEPS });
  const [a, b, c] = [
    await failedRun(world, "m1", world.adminToken),
    await failedRun(world, "m2", world.adminToken),
    await failedRun(world, "m3", world.adminToken),
  ];
  const { page, done } = await signedIn(browser, server, world.adminToken, world.admin.email, { bypassCSP: true });
  await page.goto(runsList(world, "?state=FAILED"));
  await page.locator(`tr[data-run="${c!._id}"]`).waitFor(LONG);
  await page.locator(`tr[data-run="${a!._id}"] input[name=run]`).check();
  await page.locator(`tr[data-run="${b!._id}"] input[name=run]`).check();
  expect(await page.getByRole("status").filter({ hasText: "selected" }).textContent()).toBe("2 selected");
  await expectNoViolations(page, "the runs list, two selected");
  await page.getByRole("button", { name: "Retry the selected" }).click();
  const question = page.getByRole("alertdialog");
  await question.waitFor(LONG);
  expect(await page.locator("#batch-counts").textContent()).toBe("2 runs match: 2 would be retried.");
  await expectNoViolations(page, "the runs list, a batch's dry run");
  await shot(page, "act-batch-dry-run");
  await question.getByRole("button", { name: "Confirm: retry 2 runs" }).click();
  await page.locator(".batch-progress.succeeded").waitFor(LONG);
  expect(await page.locator(".batch-progress").textContent()).toBe("Finished: 2 runs matched, 2 retried, 0 skipped, 0 failed.");
  await expectNoViolations(page, "the runs list, a batch finished");
  await shot(page, "act-batch-finished");
  for (const run of [a!, b!]) {
    const [retry] = await retriesOfIn(world, run._id);
    expect(retry).toBeDefined();
    expect((await waitForRun(server.deps.store, retry!)).state).toBe("SUCCEEDED");
  }
  expect(await retriesOfIn(world, c!._id)).toEqual([]);
  await page.getByRole("button", { name: "Close" }).click();
  expect(await page.locator("section.batch").count()).toBe(0);
  await done();
});

it("an admin retries every run that matches from the failed step: a record with an ongoing run is skipped, with the reason and a link", {
  timeout: 120_000,
}, async () => {
  const world = await createWorld(server, { steps: STEPS });
  const [first, second] = [await failedRun(world, "n1", world.adminToken), await failedRun(world, "n2", world.adminToken)];
  // A newer version that waits: its run on n2 is ongoing while the batch works.
  await adminClient(server.baseUrl, world.ownerToken).publishWorkflow({
    workflowId: world.workflowId,
    steps: [{ kind: { case: "loadRecord", value: {} } }, { kind: { case: "wait", value: { seconds: 60 } } }],
  });
  const ongoing = await postHook(`${server.baseUrl}${world.hookPath}`, world.adminToken, { record_id: "n2" });
  await waitForRun(server.deps.store, ongoing.body.runId!, (r) => r.state === "RUNNING");
  const { page, done } = await signedIn(browser, server, world.adminToken, world.admin.email, { bypassCSP: true });
  await page.goto(runsList(world, "?state=FAILED"));
  await page.locator(`tr[data-run="${second!._id}"]`).waitFor(LONG);
  await page.getByRole("checkbox", { name: "Retries start from the failed step" }).check();
  await page.getByRole("button", { name: "Retry all that match" }).click();
  await page.getByRole("alertdialog").waitFor(LONG);
  expect(await page.locator("#batch-counts").textContent()).toMatch(/^2 runs match: 1 would be retried, 1 skipped: .*ongoing.*\.$/);
  await shot(page, "act-batch-all-dry-run");
  await page.getByRole("button", { name: "Confirm: retry 1 run" }).click();
  await page.locator(".batch-progress.succeeded").waitFor(LONG);
  expect(await page.locator(".batch-progress").textContent()).toBe("Finished: 2 runs matched, 1 retried, 1 skipped, 0 failed.");
  expect(await page.locator(".batch-reasons li").textContent()).toMatch(/^1 run skipped: .*ongoing/);
  expect(await page.locator(".batch-reasons a").getAttribute("href")).toBe(`#/runs/${second!._id}`);
  await expectNoViolations(page, "the runs list, a batch finished with a skip");
  await shot(page, "act-batch-all-finished");
  const [retry] = await retriesOfIn(world, first!._id);
  expect((await waitForRun(server.deps.store, retry!)).state).toBe("SUCCEEDED");
  expect(await retriesOfIn(world, second!._id)).toEqual([]);
  await done();
});

it("retry, start and a batch with the keyboard alone: the focus is visible and lands where the next step is", { timeout: 120_000 }, async () => {
  const world = await createWorld(server, { steps: STEPS });
  const failed = await failedRun(world, "k1", world.adminToken);
  const { page, done } = await signedIn(browser, server, world.adminToken, world.admin.email);

  // Retry on the failed run's page: Enter on Retry, and the new run's heading has the focus.
  await page.goto(runPage(failed._id));
  const retry = page.getByRole("button", { name: "Retry", exact: true });
  await retry.waitFor(LONG);
  await tabTo(page, retry);
  await expectVisibleFocus(retry);
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => !u.hash.includes(failed._id), LONG);
  await expectVisibleFocus(page.locator(".run h1"));
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);

  // Start on a record: its labelled field, typed, then Enter.
  await page.goto(`${server.baseUrl}/console#/p/${world.projectId}/r/${world.renderingId}/w/${world.workflowId}`);
  const record = page.getByRole("textbox", { name: "Record id" });
  await record.waitFor(LONG);
  await tabTo(page, record);
  await expectVisibleFocus(record);
  await page.keyboard.type("r4");
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.hash.startsWith("#/runs/"), LONG);
  await expectVisibleFocus(page.locator(".run h1"));
  const started = newRunId(page);
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);

  // A batch: select a row with Space, Retry the selected, Shift+Tab from the safe answer to Confirm.
  await page.goto(runsList(world));
  const row = page.locator(`tr[data-run="${started}"] input[name=run]`);
  await row.waitFor(LONG);
  await tabTo(page, row);
  await expectVisibleFocus(row);
  await page.keyboard.press("Space");
  const retrySelected = page.getByRole("button", { name: "Retry the selected" });
  await tabTo(page, retrySelected, true);
  await expectVisibleFocus(retrySelected);
  await page.keyboard.press("Enter");
  const keep = page.getByRole("alertdialog").getByRole("button", { name: "Keep as is" });
  await expectVisibleFocus(keep);
  expect(await page.locator("#batch-counts").textContent()).toBe("1 run match: 1 would be retried.");
  const confirm = page.getByRole("button", { name: "Confirm: retry 1 run" });
  await tabTo(page, confirm, true);
  await expectVisibleFocus(confirm);
  await page.keyboard.press("Enter");
  await expect.poll(() => isFocused(page.locator("section.batch h2")), LONG).toBe(true);
  await page.locator(".batch-progress.succeeded").waitFor(LONG);
  const close = page.getByRole("button", { name: "Close" });
  await tabTo(page, close);
  await page.keyboard.press("Enter");
  // The selection is gone with the batch: the focus is back on "Select all on this page".
  await expectVisibleFocus(page.getByRole("checkbox", { name: "Select all on this page" }));
  expect(await retriesOfIn(world, started)).toHaveLength(1);
  await done();
});

/** The ids of the runs that retry `runId` (GetRun's `retries`, as the world's admin sees them). */
async function retriesOfIn(world: World, runId: string): Promise<string[]> {
  const client = createClient(RunService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const { run } = await client.getRun({ runId }, { headers: { authorization: `Bearer ${world.adminToken}` } });
  return run!.retries;
}
