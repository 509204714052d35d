// Finding runs and entries in the console by what an operator knows (Debian's chromium, headless):
// the runs of a workflow picked by its name, of a record id alone, each row naming its workflow
// and why it failed and opening its run wherever it is clicked; a workflow filter that names
// nothing says so in words; the activity log's action picked among runhook's actions, its details
// as fields; "Open a run" with a run id or a start's pasted answer, and a value that is neither
// explained on the page. No request leaves the machine and the page logs no error.
import { beforeAll, expect, it } from "vitest";
import { RUNHOOK_ACTIVITY_ACTIONS } from "../../src/lib/activity-actions.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { waitForRun } from "../helpers/runs.js";
import { postHook } from "../helpers/webhook.js";
import { browserForFile, consoleServerForFile, LONG, signedIn } from "./lib.js";

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;
/** A run that failed (its record does not exist) and one that succeeded, both by a webhook call. */
let failed: string;
let succeeded: string;

beforeAll(async () => {
  w = await createWorld(server);
  const hook = `${server.baseUrl}${w.hookPath}`;
  failed = (await postHook(hook, w.userToken, { record_id: "no-such-record" })).body.runId!;
  succeeded = (await postHook(hook, w.userToken, { record_id: "r1" })).body.runId!;
  await waitForRun(server.deps.store, failed);
  await waitForRun(server.deps.store, succeeded);
});

const REFUSED = /^Failed to load resource: the server responded with a status of 400 \(Bad Request\)$/;
const runsRoute = (query = "") => `${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/runs${query}`;

it("an admin picks a workflow by name, finds a record's runs by its id alone, reads why a run failed, and opens it from its row", {
  timeout: 90_000,
}, async () => {
  const { page, done } = await signedIn(browser, server, w.adminToken, w.admin.email);
  await page.goto(runsRoute());
  const picker = page.locator("select[name=workflow]");
  await picker.waitFor(LONG);
  expect(await picker.locator("option").allTextContents()).toEqual(["any", "test workflow"]);
  await picker.selectOption("test workflow");
  await page.getByRole("button", { name: "Search" }).click();
  await page.waitForURL(/workflow=test\+workflow/);
  const failedRow = page.locator(`tr[data-run="${failed}"]`);
  await failedRow.waitFor(LONG);
  expect(await page.locator(`tr[data-run="${succeeded}"]`).count()).toBe(1);
  // Each row names its workflow and version; a failed one says why, in its first line.
  expect(await failedRow.locator("td", { hasText: "test workflow v1" }).count()).toBe(1);
  expect(await failedRow.locator(".run-failure").textContent()).toMatch(/record "no-such-record" of collection "orders" not found/);
  expect(await page.locator(`tr[data-run="${succeeded}"] .run-failure`).count()).toBe(0);

  // The record id alone, without its collection.
  await page.locator("input[name=record]").fill("no-such-record");
  await page.getByRole("button", { name: "Search" }).click();
  await page.waitForURL(/record=no-such-record/);
  await page.locator(`tr[data-run="${succeeded}"]`).waitFor({ state: "detached", ...LONG });
  await failedRow.waitFor(LONG);
  expect(await page.locator("tr.run-row").count()).toBe(1);

  // The record and the workflow are links to their own pages.
  expect(await failedRow.locator("a.record-link").getAttribute("href")).toBe(`#/p/${w.projectId}/env/${w.environmentName}/records/orders/no-such-record`);
  // The rest of the row opens the run: a click where its user shows, away from the time that is the link's text.
  const cell = (await failedRow.locator("td", { hasText: ", webhook" }).boundingBox())!;
  await page.mouse.click(cell.x + cell.width / 2, cell.y + cell.height / 2);
  await page.locator(".run h1 .state.failed").waitFor(LONG);
  expect(page.url()).toContain(`#/runs/${failed}`);
  await done();
});

it("a workflow filter that names no workflow (the list's short id, a wrong name) says so in words", { timeout: 60_000 }, async () => {
  // The refused search is a 400, which the browser logs.
  const { page, done } = await signedIn(browser, server, w.userToken, w.user.email, { allowErrors: REFUSED });
  // A user who lists no renderings types the workflow: a name or an id.
  await page.goto(runsRoute());
  const typed = page.locator("input[name=workflow]");
  await typed.waitFor(LONG);
  await typed.fill(w.workflowId.slice(0, 8));
  await page.getByRole("button", { name: "Search" }).click();
  await page
    .getByRole("alert")
    .getByText(`no workflow of this environment whose runs you see is named "${w.workflowId.slice(0, 8)}"`)
    .waitFor(LONG);
  expect(await page.getByText("No run matches").count()).toBe(0);
  // Its name finds its runs.
  await page.locator("input[name=workflow]").fill("test workflow");
  await page.getByRole("button", { name: "Search" }).click();
  await page.locator(`tr[data-run="${failed}"]`).waitFor(LONG);
  expect(await page.getByRole("alert").count()).toBe(0);
  await done();
});

it("the activity log's action is picked among runhook's actions, and an entry's details read as fields", { timeout: 60_000 }, async () => {
  const { page, done } = await signedIn(browser, server, w.adminToken, w.admin.email);
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/activity`);
  const action = page.locator("select[name=action]");
  await action.waitFor(LONG);
  expect(await action.locator("option").allTextContents()).toEqual(["any", ...RUNHOOK_ACTIVITY_ACTIONS]);
  await action.selectOption("workflow.run.failed");
  await page.getByRole("button", { name: "Search" }).click();
  const entry = page.locator('tr[data-action="workflow.run.failed"]');
  await entry.waitFor(LONG);
  expect(await page.locator("table.log tbody tr:not([data-action='workflow.run.failed'])").count()).toBe(0);
  // The details: `error` and `step` as fields, no JSON.
  const terms = await entry.locator("dl.details dt").allTextContents();
  expect(terms).toEqual(expect.arrayContaining(["error", "step"]));
  const error = entry.locator("dl.details dt", { hasText: "error" }).locator("xpath=following-sibling::dd[1]");
  expect(await error.textContent()).toMatch(/^[^{"]*record "no-such-record" of collection "orders" not found/);
  expect(await entry.locator("dl.details").textContent()).not.toContain("{");
  await done();
});

it("opens a run by its id or by a start's pasted answer, and explains a value that is neither", { timeout: 60_000 }, async () => {
  const { page, done } = await signedIn(browser, server, w.userToken, w.user.email);
  const input = page.locator("form.open-run input[name=runId]");
  const open = page.locator("form.open-run button[type=submit]");
  // Neither: the form says why, and the page stays.
  await input.fill("b7633e71");
  await open.click();
  await page.locator("form.open-run").getByRole("alert").getByText("That is not a run id").waitFor();
  expect(page.url()).toMatch(/console#?\/?$/);
  // A 202 body, pasted whole.
  await input.fill(JSON.stringify({ runId: failed }));
  await open.click();
  await page.locator(".run h1 .state.failed").waitFor(LONG);
  expect(page.url()).toContain(`#/runs/${failed}`);
  // An address that names no run: explained, with the form to open one.
  await page.goto(`${server.baseUrl}/console#/runs/not-a-run`);
  await page.getByRole("heading", { name: "Not a run id" }).waitFor(LONG);
  await page.getByText("This address names no run").waitFor();
  await page.locator("form.open-run input[name=runId]").fill(succeeded);
  await page.locator("form.open-run button[type=submit]").click();
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);
  await done();
});
