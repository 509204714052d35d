// The console's pages in a real browser (Debian's chromium, headless, through playwright-core),
// as a user would go through them: from the projects to a workflow's trigger settings (copy its
// URL, disable it, regenerate it), the run search updating live, a run's page, the activity log
// with its live tail and export, notes, account settings and API access; and what a user who is
// not an admin does not see. In every scenario no request leaves the machine and the page logs
// no error (a CSP violation is one). Webhook calls are made outside the browser.
import { mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { beforeAll, expect, it } from "vitest";
import { NoteService } from "../../gen/runhook/v1/note_pb.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { browserForFile, consoleServerForFile, LONG, signedIn as signedInTo, type Session } from "./lib.js";
import { adminClient, postHook } from "../helpers/webhook.js";

const SHOTS = join(tmpdir(), "runhook-browser");

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;

beforeAll(async () => {
  w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 2 }, { type: "update_record", set: { status: "done" } }] });
  mkdirSync(SHOTS, { recursive: true });
});

/** A fresh browser signed in to the console with `token`, which may download and use the clipboard. */
async function signedIn(token: string, email: string): Promise<Session> {
  const session = await signedInTo(browser, server, token, email, { acceptDownloads: true });
  await session.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.baseUrl });
  return session;
}

const hookUrl = async () => (await adminClient(server.baseUrl, w.adminToken).getWebhook({ workflowId: w.workflowId })).webhook!.url;
const workflowRoute = () => `${server.baseUrl}/console#/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`;

it("an admin goes from the projects to the workflow, copies its URL, and sees a webhook call in the run list and on its page, live", {
  timeout: 90_000,
}, async () => {
  const { page, done } = await signedIn(w.adminToken, w.admin.email);
  // Projects → project → rendering → workflow, by the links.
  await page.getByRole("link", { name: w.projectName }).click();
  await page.locator("table.environments").getByText(w.environmentName).waitFor();
  await page.locator("table.renderings a", { hasText: "Workflows" }).click();
  await page.getByRole("link", { name: "test workflow" }).click();
  await page.getByRole("heading", { name: "Trigger settings" }).waitFor();

  // The URL shown is GetWebhook's, and the copy button puts it on the clipboard.
  const url = await hookUrl();
  expect(await page.locator("input.webhook-url").inputValue()).toBe(url);
  await page.getByRole("button", { name: "Copy URL" }).click();
  await page.getByText("Copied").waitFor();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(url);
  // Its version, with steps as sentences.
  expect(await page.locator(".version.active .steps li").allTextContents()).toEqual(["Load the record", "Wait 2 s", 'Update the record: status = "done"']);
  await page.screenshot({ path: join(SHOTS, "console-trigger-settings.png"), fullPage: true });

  // The run search of the environment, then a webhook call from outside: it appears without a reload.
  await page.getByRole("link", { name: "Its runs" }).click();
  await page.getByRole("heading", { name: `Runs in ${w.environmentName}` }).waitFor();
  const hook = await postHook(url, w.userToken, { record_id: "r1" });
  expect(hook.status).toBe(202);
  const row = page.locator(`tr[data-run="${hook.body.runId}"]`);
  await row.waitFor(LONG);
  await page.locator(`tr[data-run="${hook.body.runId}"].succeeded`).waitFor(LONG);
  await page.screenshot({ path: join(SHOTS, "console-runs.png"), fullPage: true });
  // Its page: the steps on a timeline, SUCCEEDED.
  await row.locator("a.row-link").click();
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);
  expect(await page.locator(".timeline .step.succeeded").count()).toBe(3);
  // The filters: a state that does not match hides it.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/runs?state=FAILED`);
  await page.getByText("No run matches.").waitFor(LONG);
  console.log(`screenshots: ${join(SHOTS, "console-trigger-settings.png")}, ${join(SHOTS, "console-runs.png")}`);
  await done();
});

it("cancels an ongoing run from its page, after a confirmation", { timeout: 90_000 }, async () => {
  // A workflow of the same rendering that waits a minute: the run is ongoing whatever the pace of the page.
  const a = adminClient(server.baseUrl, w.adminToken);
  const slow = await a.createWorkflow({
    renderingId: w.renderingId,
    collectionId: w.collectionId,
    name: "slow workflow",
    steps: [{ kind: { case: "loadRecord", value: {} } }, { kind: { case: "wait", value: { seconds: 60 } } }],
  });
  const { webhook } = await a.enableWebhook({ workflowId: slow.workflow!.id });
  const hook = await postHook(webhook!.url, w.userToken, { record_id: "r1" });
  expect(hook.status).toBe(202);
  const { page, done } = await signedIn(w.adminToken, w.admin.email);
  await page.goto(`${server.baseUrl}/console#/runs/${hook.body.runId}`);
  await page.locator(".run h1 .state.running, .run h1 .state.queued").first().waitFor(LONG);
  await page.getByRole("button", { name: "Cancel run" }).click();
  await page.getByRole("alertdialog").getByText("the run ends CANCELLED").waitFor();
  await page.getByRole("button", { name: "Cancel the run" }).click();
  await page.locator(".run h1 .state.cancelled").waitFor(LONG);
  expect(await page.getByRole("button", { name: "Cancel run" }).count()).toBe(0);
  await done();
});

it("an admin's activity log shows a run's entries, its tail picks up new ones, and it exports NDJSON", { timeout: 90_000 }, async () => {
  const url = await hookUrl();
  const first = await postHook(url, w.userToken, { record_id: "r2" });
  expect(first.status).toBe(202);
  const { page, done } = await signedIn(w.adminToken, w.admin.email);
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/activity?runId=${first.body.runId}`);
  await page.locator('tr[data-action="workflow.run.triggered"]').waitFor(LONG);
  // The tail (on by default): the run's later entries arrive without a reload.
  await page.locator('tr[data-action="workflow.run.succeeded"]').waitFor(LONG);
  expect(await page.locator('tr[data-action="record.updated"]').count()).toBe(1);

  // Unfiltered, with the tail on: a new run's entry appears on top.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/activity`);
  await page.locator("table.log tbody tr").first().waitFor(LONG);
  const second = await postHook(url, w.userToken, { record_id: "r3" });
  expect(second.status).toBe(202);
  await page.locator(`table.log a[href="#/runs/${second.body.runId}"]`).first().waitFor(LONG);
  await page.screenshot({ path: join(SHOTS, "console-activity-log.png"), fullPage: true });
  console.log(`screenshot: ${join(SHOTS, "console-activity-log.png")}`);

  // The export: a file download of NDJSON, made from the streamed RPC (no token in any URL).
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export NDJSON" }).click()]);
  const lines = readFileSync((await download.path())!, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  expect(download.suggestedFilename()).toMatch(/^activity-.*\.ndjson$/);
  expect(lines.some((l) => l.runId === first.body.runId && l.action === "workflow.run.triggered")).toBe(true);
  await page.getByText(/Exported \d+ entries/).waitFor();

  // The admin log: the webhook's settings in the fixture are there.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/admin-log`);
  await page.locator('tr[data-action="webhook.enabled"]').first().waitFor(LONG);
  await done();
});

it("a user who is not an admin sees its workflows' runs and state, but no URL, no changes and no admin pages", { timeout: 90_000 }, async () => {
  const hook = await postHook(await hookUrl(), w.userToken, { record_id: "r4" });
  expect(hook.status).toBe(202);
  const { page, done } = await signedIn(w.userToken, w.user.email);
  await page.getByRole("link", { name: w.projectName }).click();
  await page.getByText("Your role: user").waitFor();
  for (const hidden of ["Renderings", "Project settings"]) expect(await page.getByRole("heading", { name: hidden }).count()).toBe(0);
  // The environments, with the runs of the workflows the user may trigger: no logs, no notes.
  await page.getByRole("heading", { name: "Environments" }).waitFor();
  for (const hidden of ["Activity log", "Notes"]) expect(await page.getByRole("link", { name: hidden }).count()).toBe(0);
  await page.getByRole("link", { name: "Runs", exact: true }).click();
  await page.locator(`tr[data-run="${hook.body.runId}"]`).waitFor(LONG);
  // From the run to its workflow: state and rate limit, no URL, no buttons that change it.
  await page.locator(`tr[data-run="${hook.body.runId}"] a.row-link`).click();
  await page.locator(".run h1").waitFor();
  await page.locator(".facts").getByRole("link", { name: "test workflow" }).click();
  await page.getByRole("heading", { name: "Trigger settings" }).waitFor();
  await page.getByText("Only the project's editors and admins may copy the webhook URL.").waitFor();
  expect(await page.locator("input.webhook-url").count()).toBe(0);
  for (const name of ["Disable", "Enable", "Regenerate URL", "Set rate limit"]) expect(await page.getByRole("button", { name }).count()).toBe(0);
  // Typing the admin pages' addresses shows no data.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/activity`);
  await page.getByText("Only the project's admins read its logs.").waitFor();
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/api-access`);
  await page.getByText("Only the project's admins generate and revoke its API tokens.").waitFor();
  expect(await page.locator("table").count()).toBe(0);
  await done();
});

it("creates an application token in account settings, shows it once, and revokes it: then it answers 401", { timeout: 90_000 }, async () => {
  const { page, done } = await signedIn(w.userToken, w.user.email);
  await page.getByRole("link", { name: "Account" }).click();
  await page.getByRole("heading", { name: "Application tokens" }).waitFor();
  await page.locator("input[name=tokenName]").fill("browser test");
  await page.getByRole("button", { name: "Generate token" }).click();
  const secret = (await page.locator("code.secret-value").textContent({ timeout: 20_000 }))!;
  expect(secret).toMatch(/^rh_app_/);
  // It works from outside the browser.
  const outside = adminClient(server.baseUrl, secret);
  expect((await outside.whoAmI({})).user?.email).toBe(w.user.email);
  // Shown once: gone once acknowledged, and not in the list.
  await page.getByRole("button", { name: "I have copied it" }).click();
  expect(await page.locator("code.secret-value").count()).toBe(0);
  expect(await page.content()).not.toContain(secret);
  const row = page.locator("tr.token", { hasText: "browser test" });
  await row.getByRole("button", { name: "Revoke" }).click();
  await page.getByRole("alertdialog").getByText("answer 401 at once").waitFor();
  await page.getByRole("button", { name: "Revoke the token" }).click();
  await page.locator("tr.token.revoked", { hasText: "browser test" }).waitFor(LONG);
  await expect(outside.whoAmI({})).rejects.toThrow(/unauthenticated|revoked|token/i);
  await done();
});

it("an admin generates a project API token under API access, uses it on /v1, and revokes it", { timeout: 90_000 }, async () => {
  const { page, done } = await signedIn(w.adminToken, w.admin.email);
  await page.getByRole("link", { name: w.projectName }).click();
  await page.getByRole("link", { name: "API access" }).click();
  await page.getByRole("heading", { name: "Project API tokens" }).waitFor();
  await page.locator("input[name=tokenName]").fill("siem");
  await page.getByRole("button", { name: "Generate new token" }).click();
  const secret = (await page.locator("code.secret-value").textContent({ timeout: 20_000 }))!;
  const adminLogs = () => fetch(`${server.baseUrl}/v1/project/${w.projectName}/admin-logs?limit=1`, { headers: { authorization: `Bearer ${secret}` } });
  const listed = await adminLogs();
  expect(listed.status).toBe(200);
  // The published list: the newest entry, the token's own creation.
  expect(await listed.json()).toMatchObject({
    hasMore: true,
    parameters: { projectName: w.projectName, limit: 1 },
    data: [{ object: "adminLog", type: "update", resource: "user-project" }],
  });
  await page.getByRole("button", { name: "I have copied it" }).click();
  const row = page.locator("tr.token", { hasText: "siem" });
  await row.getByRole("button", { name: "Revoke" }).click();
  await page.getByRole("button", { name: "Revoke the token" }).click();
  await page.locator("tr.token.revoked", { hasText: "siem" }).waitFor(LONG);
  expect((await adminLogs()).status).toBe(401);
  await done();
});

it("an admin reads a record's notes as text (HTML and script in them run nothing), replies and archives", { timeout: 90_000 }, async () => {
  const api = createClient(NoteService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
  const scope = { projectName: w.projectName, environmentName: w.environmentName };
  const headers = { authorization: `Bearer ${w.apiToken}` };
  const html = '<p>Hello <b>there</b></p><img src="x" onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  const made = await api.createNote(
    { scope, collection: w.collection, recordId: "<img src=x onerror=window.__pwned=3>", title: "Plain title", content: html },
    { headers },
  );
  const { page, done } = await signedIn(w.adminToken, w.admin.email);
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/env/${w.environmentName}/notes`);
  const note = page.locator(`li.note[data-note="${made.note!.id}"]`);
  await note.waitFor(LONG);
  expect(await note.locator(".message .content").first().textContent()).toBe("Hello there");
  expect(await note.locator("h3").textContent()).toContain("Plain title");
  expect(await note.locator("h3 code").textContent()).toBe("<img src=x onerror=window.__pwned=3>");
  expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
  // A reply, typed with markup: shown as typed.
  await note.locator("textarea[name=reply]").fill("ok <b>noted</b>");
  await note.getByRole("button", { name: "Reply" }).click();
  await note.locator(".message .content", { hasText: "ok <b>noted</b>" }).waitFor(LONG);
  // Archive: the note is archived (the list hides archived notes unless asked).
  await note.getByRole("button", { name: "Archive" }).click();
  await page.locator(`li.note.archived[data-note="${made.note!.id}"]`).waitFor(LONG);
  const after = await api.getNote({ scope, noteId: made.note!.id }, { headers });
  expect(after.note?.archivedAt).toBeDefined();
  expect(after.note?.messages.length).toBe(2);
  await done();
});

it("disabling the webhook in the page makes calls 404, and regenerating it makes the old URL 400", { timeout: 90_000 }, async () => {
  const { page, done } = await signedIn(w.adminToken, w.admin.email);
  await page.goto(workflowRoute());
  await page.getByRole("heading", { name: "Trigger settings" }).waitFor();
  const oldUrl = await page.locator("input.webhook-url").inputValue();

  await page.getByRole("button", { name: "Disable" }).click();
  await page.getByRole("button", { name: "Disable the webhook" }).click();
  await page.getByText("The webhook is disabled.").waitFor(LONG);
  expect((await postHook(oldUrl, w.userToken, { record_id: "r5" })).status).toBe(404);
  await page.getByRole("button", { name: "Enable" }).click();
  await page.getByText("The webhook is enabled.").waitFor(LONG);

  // Regenerate: the confirmation says the old URL stops at once.
  await page.getByRole("button", { name: "Regenerate URL" }).click();
  await page.getByRole("alertdialog").getByText("The current URL stops working at once").waitFor();
  await page.getByRole("button", { name: "Regenerate now" }).click();
  await page.getByText("A new URL replaces the old one").waitFor(LONG);
  const newUrl = await page.locator("input.webhook-url").inputValue();
  expect(newUrl).not.toBe(oldUrl);
  expect(newUrl).toBe(await hookUrl());
  expect((await postHook(oldUrl, w.userToken, { record_id: "r5" })).status).toBe(400);
  expect((await postHook(newUrl, w.userToken, { record_id: "r5" })).status).toBe(202);

  // The rate limit.
  await page.locator("input[name=rateLimit]").fill("120");
  await page.getByRole("button", { name: "Set rate limit" }).click();
  await page.getByText("The rate limit is 120 per minute.").waitFor(LONG);
  expect((await adminClient(server.baseUrl, w.adminToken).getWebhook({ workflowId: w.workflowId })).webhook?.rateLimitPerMinute).toBe(120);
  await done();
});
