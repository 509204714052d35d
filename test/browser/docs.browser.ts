// GET /docs in a real browser: Debian's chromium, headless, driven by playwright-core (never a
// browser of playwright's own: none can be downloaded here). The page must render the
// webhook and the activity-logs operations from the gateway's own assets, with no request
// leaving this machine and no error in the console (a CSP violation is one), and the
// webhook's examples must show. A screenshot is saved under the OS temp directory.
import { existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startServer, type TestServer } from "../helpers/server.js";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const SCREENSHOT = join(tmpdir(), "runhook-browser", "docs.png");

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium; .ci/run does)`);
  server = await startServer();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

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

  mkdirSync(join(tmpdir(), "runhook-browser"), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  console.log(`screenshot of /docs: ${SCREENSHOT}`);
  await context.close();

  expect(requests.length).toBeGreaterThan(3);
  expect(requests.filter((u) => !local(u))).toEqual([]);
  expect(requests).toContain(`${server.baseUrl}/docs/json`);
  expect(problems).toEqual([]);
});
