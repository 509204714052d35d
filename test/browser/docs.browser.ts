// GET /docs in a real browser: Debian's chromium, headless, driven by playwright-core (never a
// browser of playwright's own: none can be downloaded here). The page must render the
// webhook and the activity-logs operations from the gateway's own assets, with no request
// leaving this machine and no error in the console (a CSP violation is one), the webhook's
// examples, the activity logs' published parameters and the marks of runhook's additions must
// show, and "Try it out" must reach the server (PUBLIC_BASE_URL, the document's server, allowed
// by the page's CSP). A screenshot is saved under the OS temp directory.
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { browserForFile, consoleServerForFile } from "./lib.js";

const SCREENSHOT = join(tmpdir(), "runhook-browser", "docs.png");

// The document names PUBLIC_BASE_URL as its server: the console's test server is on that address.
const server = consoleServerForFile();
const browser = browserForFile();

/** Whether a URL stays on this machine (or in the page itself). */
function local(url: string): boolean {
  const u = new URL(url);
  return u.protocol === "data:" || u.protocol === "blob:" || u.hostname === "127.0.0.1" || u.hostname === "localhost";
}

it("renders the webhook and activity-logs operations with their examples, from local assets only", { timeout: 60_000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const requests: string[] = [];
  const problems: string[] = [];
  context.on("request", (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));

  const res = await page.goto(`${server.baseUrl}/docs`);
  expect(res?.status()).toBe(200);

  const webhook = page.locator('.opblock-summary-path[data-path="/hooks/{key}"]');
  const activityLogs = page.locator('.opblock-summary-path[data-path="/v1/project/{projectName}/environment/{environmentName}/activity-logs"]');
  await webhook.waitFor({ state: "visible", timeout: 30_000 });
  await activityLogs.waitFor({ state: "visible" });
  expect(await page.locator(".info .title").textContent()).toContain("runhook");

  // Open the webhook: its request example and its 409 answer (with the ongoing run) are shown.
  await webhook.click();
  const opened = page.locator(".opblock.is-open");
  await opened.locator(".responses-table").first().waitFor({ state: "visible" });
  expect(await opened.textContent()).toContain("A-1001");
  expect(await opened.locator('.response[data-code="409"]').textContent()).toContain("already_exists");

  // The published activity-logs operation: the document's parameters and runhook's additions (none of the old from/collection);
  // the added ones show their mark, the published ones none.
  await activityLogs.click();
  const logsOp = page.locator(".opblock.is-open", { has: page.locator('[data-path="/v1/project/{projectName}/environment/{environmentName}/activity-logs"]') });
  const cursorRow = logsOp.locator('tr[data-param-name="cursor"]');
  await cursorRow.waitFor({ state: "visible" });
  expect(await cursorRow.textContent()).toContain("x-runhook-addition");
  expect(await logsOp.locator('tr[data-param-name="userEmail"]').textContent()).not.toContain("x-runhook-addition");
  const names = (await logsOp.locator(".parameters .parameter__name").allTextContents()).map((n) => n.replace(/\s*\*$/, "").trim()); // "*": required
  expect(names).toEqual(
    expect.arrayContaining(["projectName", "limit", "userId", "teamName", "collectionName", "action", "createdAt.lt", "cursor", "order", "runId"]),
  );
  expect(names).not.toContain("from");
  expect(names).not.toContain("collection");

  // "Try it out" on GET /healthz: the browser calls the server the document names.
  const healthz = page.locator('.opblock-summary-path[data-path="/healthz"]');
  await healthz.click();
  const healthzOp = page.locator(".opblock.is-open", { has: page.locator('[data-path="/healthz"]') });
  await healthzOp.locator("button.try-out__btn").click();
  await healthzOp.locator("button.execute").click();
  await healthzOp.locator(".live-responses-table tr.response .response-col_status").first().waitFor({ state: "visible" });
  expect(await healthzOp.locator(".live-responses-table tr.response .response-col_status").first().textContent()).toContain("200");
  expect(requests).toContain(`${server.baseUrl}/healthz`);

  mkdirSync(join(tmpdir(), "runhook-browser"), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  console.log(`screenshot of /docs: ${SCREENSHOT}`);
  await context.close();

  expect(requests.length).toBeGreaterThan(3);
  expect(requests.filter((u) => !local(u))).toEqual([]);
  expect(requests).toContain(`${server.baseUrl}/docs/json`);
  expect(problems).toEqual([]);
});
