// A record's page in a real browser against the real server: its runs of every workflow (each
// a link to its run, naming its workflow), its notes (the one a run's step wrote links to that
// run, the one written by hand does not) and its activity entries; "Start a workflow" starts a
// run on it. Every mention leads to its page: the runs list's record and workflow, the run page's
// record, the activity log's record and run, the admin log's targets by their names. Another
// organization's record is "not found", with none of its names. axe-core finds no violation.
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Page } from "playwright-core";
import { beforeAll, expect, it } from "vitest";
import { createWorld, type World } from "../../fixtures/world.js";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { waitForRun } from "../helpers/runs.js";
import { postHook } from "../helpers/webhook.js";
import { LONG, browserForFile, consoleServerForFile, signedIn, violations } from "./lib.js";

const SHOTS = join(tmpdir(), "runhook-browser");
const RECORD = "order-4711";
const STEPS = [{ type: "load_record" as const }, { type: "add_note" as const, title: "Checked by the workflow", content: "<p>looks fine</p>" }];
/** Chromium logs each refused call; the other organization's scenario expects them. */
const REFUSED = /^Failed to load resource: the server responded with a status of (403|404) \(.*\)$/;

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;
let other: World;
let runId: string;
let handNoteId: string;

beforeAll(async () => {
  w = await createWorld(server, { steps: STEPS, records: [{ id: RECORD, status: "new" }] });
  other = await createWorld(server);
  mkdirSync(SHOTS, { recursive: true });
  const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: RECORD });
  expect(hook.status).toBe(202);
  runId = hook.body.runId!;
  expect((await waitForRun(server.deps.store, runId)).state).toBe("SUCCEEDED");
  const notes = createClient(NoteService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const made = await notes.createNote(
    {
      scope: { projectName: w.projectName, environmentName: w.environmentName },
      collection: w.collection,
      recordId: RECORD,
      title: "Written by hand",
      content: "<p>call the customer</p>",
    },
    { headers: { authorization: `Bearer ${w.apiToken}` } },
  );
  handNoteId = made.note!.id;
});

const recordHash = (world: World, recordId: string) => `#/p/${world.projectId}/env/${world.environmentName}/records/${world.collection}/${recordId}`;

async function shot(page: Page, name: string) {
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

async function expectNoViolations(page: Page, where: string) {
  const found = await violations(page);
  expect(found.map((v) => `${where}: ${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
}

/** Waits for the record's page: its runs, notes and activity entries listed. */
async function recordPageShown(page: Page) {
  await page.locator("h1", { hasText: `Record ${w.collection} / ${RECORD}` }).waitFor(LONG);
  await page.locator(`.record-runs tr[data-run="${runId}"]`).waitFor(LONG);
  await page.locator(".notes .note").nth(1).waitFor(LONG);
  await page.locator("table.log tr[data-action='workflow.run.succeeded']").first().waitFor(LONG);
}

it("a record's page lists its runs, its notes (the run's linked to the run) and its activity; Start a workflow starts one", { timeout: 90_000 }, async () => {
  const { page, done } = await signedIn(browser, server, w.adminToken, w.admin.email, { bypassCSP: true });
  await page.goto(`${server.baseUrl}/console${recordHash(w, RECORD)}`);
  await recordPageShown(page);
  const row = page.locator(`.record-runs tr[data-run="${runId}"]`);
  expect(await row.locator("td").first().locator("a").getAttribute("href")).toBe(`#/runs/${runId}`);
  expect(await row.locator("a.workflow-link").textContent()).toBe("test workflow");
  expect(await row.locator("a.workflow-link").getAttribute("href")).toBe(`#/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`);
  expect(await row.locator(".state").textContent()).toBe("SUCCEEDED");

  const byRun = page.locator(".note", { hasText: "Checked by the workflow" });
  expect(await byRun.locator(".note-run a").getAttribute("href")).toBe(`#/runs/${runId}`);
  const byHand = page.locator(`.note[data-note="${handNoteId}"]`);
  expect(await byHand.textContent()).toContain("call the customer");
  expect(await byHand.locator(".note-run").count()).toBe(0);

  const triggered = page.locator("table.log tr[data-action='workflow.run.triggered']");
  expect(await triggered.locator("a.run-link").getAttribute("href")).toBe(`#/runs/${runId}`);
  expect(await triggered.locator("a.workflow-link").textContent()).toBe("test workflow");
  await expectNoViolations(page, "a record's page");
  await shot(page, "record-1280");
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, "record-390");
  await page.setViewportSize({ width: 1280, height: 900 });

  await page.getByRole("button", { name: "Start test workflow" }).click();
  await page.waitForURL((u) => u.hash.startsWith("#/runs/") && !u.hash.includes(runId), LONG);
  const started = decodeURIComponent(new URL(page.url()).hash.slice("#/runs/".length));
  expect(await waitForRun(server.deps.store, started)).toMatchObject({ recordId: RECORD, via: "console", state: "SUCCEEDED" });
  await done();
});

it("records, runs, workflows and admin-log targets link to their pages from the runs list, run page and logs", { timeout: 90_000 }, async () => {
  const { page, done } = await signedIn(browser, server, w.adminToken, w.admin.email, { bypassCSP: true });
  // The runs list: the row's record and workflow are links of their own.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/runs`);
  const row = page.locator(`tr[data-run="${runId}"]`);
  await row.waitFor(LONG);
  expect(await row.locator("a.workflow-link").getAttribute("href")).toBe(`#/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`);
  await row.locator("a.record-link").click();
  await page.waitForURL((u) => u.hash === recordHash(w, RECORD), LONG);
  await recordPageShown(page);

  // The run page's record.
  await page.goto(`${server.baseUrl}/console#/runs/${runId}`);
  const record = page.locator("dt:text-is('Record') + dd a.record-link");
  await record.waitFor(LONG);
  await record.click();
  await page.waitForURL((u) => u.hash === recordHash(w, RECORD), LONG);
  await recordPageShown(page);

  // The activity log: the record, and the run.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/activity`);
  const entry = page.locator("table.log tr[data-action='workflow.run.succeeded']", { has: page.locator(`a.run-link[href="#/runs/${runId}"]`) });
  await entry.waitFor(LONG);
  expect(await entry.locator("a.record-link").getAttribute("href")).toBe(recordHash(w, RECORD));
  await entry.locator("a.run-link").click();
  await page.waitForURL((u) => u.hash === `#/runs/${runId}`, LONG);
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);

  // The admin log: a workflow's target by its name, to its page; the API token to the API access page.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/admin-log`);
  const hookEnabled = page.locator("table.log tr[data-action='webhook.enabled'] a.target-link");
  await hookEnabled.waitFor(LONG);
  expect(await hookEnabled.textContent()).toBe("workflow test workflow");
  const apiToken = page.locator("table.log tr[data-action='api_token.created'] a.target-link");
  expect(await apiToken.getAttribute("href")).toBe(`#/p/${w.projectId}/api-access`);
  await expectNoViolations(page, "the admin log");
  await hookEnabled.click();
  await page.waitForURL((u) => u.hash === `#/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`, LONG);
  await page.locator("h1", { hasText: "Workflow test workflow" }).waitFor(LONG);
  await done();
});

it("another organization's record is not found, and the page names nothing of it", { timeout: 60_000 }, async () => {
  const { page, done } = await signedIn(browser, server, other.ownerToken, other.owner.email, { allowErrors: REFUSED });
  await page.goto(`${server.baseUrl}/console${recordHash(w, RECORD)}`);
  await page.locator("h1", { hasText: "Not found" }).waitFor(LONG);
  // Give the page's other calls time to answer: none may add a name to it.
  await page.waitForLoadState("networkidle");
  const html = await page.content();
  for (const secret of [w.projectName, w.projectId, w.admin.email, w.user.email, RECORD, runId, handNoteId, "test workflow", "Checked by", "Written by hand"])
    expect(html, secret).not.toContain(secret);
  await done();
});
