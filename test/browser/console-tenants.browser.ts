// Tenant isolation in the console, in a real browser: a second organization's users (its
// organization admin, who administers every project of their own organization, and a project
// admin) sign in and find none of the first organization's projects, runs, logs or notes, even
// by typing their addresses: each page says it was refused or found nothing, and no name, id,
// e-mail or record id of the first organization appears anywhere in the page's text. The refused
// calls are logged by chromium as "Failed to load resource" errors: those are expected here (and
// only those); nothing leaves the machine.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Page } from "playwright-core";
import { beforeAll, expect, it } from "vitest";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { postHook } from "../helpers/webhook.js";
import { LONG, browserForFile, consoleServerForFile, signedIn } from "./lib.js";

/** The only console errors a refusal may cause: chromium's line for the refused call. */
const REFUSED = /^Failed to load resource: the server responded with a status of (403|404) \(.*\)$/;
const SECRET_RECORD = "t1-secret-record-7f3a";

const server = consoleServerForFile();
const browser = browserForFile();
let w1: World;
let w2: World;
let runId: string;
let noteId: string;

beforeAll(async () => {
  w1 = await createWorld(server, { records: [{ id: SECRET_RECORD, status: "new" }] });
  w2 = await createWorld(server);
  const hook = await postHook(`${server.baseUrl}${w1.hookPath}`, w1.userToken, { record_id: SECRET_RECORD });
  expect(hook.status).toBe(202);
  runId = hook.body.runId!;
  const notes = createClient(NoteService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const made = await notes.createNote(
    {
      scope: { projectName: w1.projectName, environmentName: w1.environmentName },
      collection: w1.collection,
      recordId: SECRET_RECORD,
      title: "first tenant's note",
      content: "<p>first tenant's secret</p>",
    },
    { headers: { authorization: `Bearer ${w1.apiToken}` } },
  );
  noteId = made.note!.id;
});

/** Everything of the first tenant that must not show in the second's pages. */
function secrets(): string[] {
  return [
    w1.orgId,
    w1.projectId,
    w1.projectName,
    w1.environmentId,
    w1.teamId,
    w1.renderingId,
    w1.collectionId,
    w1.workflowId,
    w1.dataDatabase,
    w1.owner.email,
    w1.admin.email,
    w1.user.email,
    w1.hookPath.slice("/hooks/".length),
    SECRET_RECORD,
    runId,
    noteId,
    "first tenant",
  ];
}

async function expectNothingOfTheFirstTenant(page: Page, where: string) {
  const text = (await page.locator("body").textContent()) ?? "";
  const html = await page.content();
  for (const s of secrets()) {
    expect(text, `${where}: page text shows ${s}`).not.toContain(s);
    // Nor in the markup (a link's address, an attribute), but for the address typed by the user.
    expect(html.replaceAll(server.baseUrl, ""), `${where}: page markup holds ${s}`).not.toContain(s);
  }
}

/** What each of the first tenant's pages, typed by its address, says to another tenant. */
const NOT_FOUND = /^No such (project|rendering|workflow|run) for you: it does not exist, or your account has no access to it\./;

function typedAddresses(): [string, RegExp][] {
  const env = w1.environmentName;
  const p = w1.projectId;
  return [
    [`#/p/${p}`, NOT_FOUND],
    [`#/p/${p}/env/${env}/runs`, NOT_FOUND],
    [`#/p/${p}/env/${env}/activity`, NOT_FOUND],
    [`#/p/${p}/env/${env}/notes`, NOT_FOUND],
    [`#/p/${p}/admin-log`, NOT_FOUND],
    [`#/p/${p}/api-access`, NOT_FOUND],
    [`#/p/${p}/r/${w1.renderingId}`, NOT_FOUND],
    [`#/p/${p}/r/${w1.renderingId}/w/${w1.workflowId}`, NOT_FOUND],
    // Its own project with the first tenant's rendering and workflow, or its own rendering with the first tenant's workflow.
    [`#/p/${w2.projectId}/r/${w1.renderingId}`, NOT_FOUND],
    [`#/p/${w2.projectId}/r/${w1.renderingId}/w/${w1.workflowId}`, NOT_FOUND],
    [`#/p/${w2.projectId}/r/${w2.renderingId}/w/${w1.workflowId}`, NOT_FOUND],
    // Its own run search, filtered on the first tenant's workflow and record.
    [`#/p/${w2.projectId}/env/${env}/runs?workflow=${w1.workflowId}`, /^No run matches\. Change the filters above, or show every run\.$/],
    [
      `#/p/${w2.projectId}/env/${env}/runs?collection=${w1.collection}&record=${SECRET_RECORD}`,
      /^No run matches\. Change the filters above, or show every run\.$/,
    ],
    [`#/runs/${runId}`, NOT_FOUND],
  ];
}

for (const who of ["organization admin", "project admin"] as const) {
  it(`the second organization's ${who} sees none of the first organization's projects, runs, logs or notes, even by their addresses`, {
    timeout: 120_000,
  }, async () => {
    const [token, email] = who === "organization admin" ? [w2.ownerToken, w2.owner.email] : [w2.adminToken, w2.admin.email];
    const { page, done } = await signedIn(browser, server, token, email, { allowErrors: REFUSED });
    // The projects: its own only.
    await page.getByRole("link", { name: w2.projectName }).waitFor(LONG);
    expect(await page.locator("table.projects tbody tr").count()).toBe(1);
    await expectNothingOfTheFirstTenant(page, "projects");
    // Its own run search and activity log hold nothing of the first tenant either.
    await page.goto(`${server.baseUrl}/console#/p/${w2.projectId}/env/${w2.environmentName}/runs`);
    await page.getByText("No run matches.").waitFor(LONG);
    await page.goto(`${server.baseUrl}/console#/p/${w2.projectId}/env/${w2.environmentName}/activity?recordId=${SECRET_RECORD}`);
    await page.getByText("No entry matches.").waitFor(LONG);

    for (const [address, says] of typedAddresses()) {
      // From a page of its own first, so that nothing of the page before is taken for the answer.
      await page.goto(`${server.baseUrl}/console#/account`);
      await page.getByRole("heading", { name: "Account settings" }).waitFor(LONG);
      await page.goto(`${server.baseUrl}/console${address}`);
      await page.getByText(says).waitFor(LONG);
      // What loads later cannot bring the data either: the page stays as it is.
      await page.waitForLoadState("networkidle");
      await expectNothingOfTheFirstTenant(page, address);
    }
    await done();
  });
}
