// The console in a real browser (Debian's chromium, headless, through playwright-core): sign in
// with an application token, open a run that a webhook call made outside the browser started,
// and watch it step to SUCCEEDED on its timeline without a reload; then sign out. No request
// leaves this machine, nothing is refused by the page's CSP, and the token is nowhere the page's
// scripts can read it afterwards (only an HttpOnly cookie holds the session).
import { existsSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createWorld, type World } from "../../fixtures/world.js";
import { startServer, type TestServer } from "../helpers/server.js";
import { postHook } from "../helpers/webhook.js";

const CHROMIUM = "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const SCREENSHOT = join(tmpdir(), "runhook-browser", "console-run.png");

let server: TestServer;
let browser: Browser;
let w: World;

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium; .ci/run does)`);
  const port = await freePort();
  server = await startServer({ env: { PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}` } });
  w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 2 }, { type: "update_record", set: { status: "done" } }] });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

it("signs in, follows a run started by a webhook call to SUCCEEDED on its timeline, and signs out", { timeout: 60_000 }, async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const requests: string[] = [];
  const problems: string[] = [];
  context.on("request", (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));

  expect((await page.goto(`${server.baseUrl}/console`))?.status()).toBe(200);
  await page.locator("input[name=token]").fill(w.userToken);
  await page.locator("form.sign-in button[type=submit]").click();
  await page.locator("header .who").waitFor();
  expect(await page.locator("header .who").textContent()).toBe(w.user.email);
  // The session is an HttpOnly cookie: the page's scripts see neither it nor the token.
  expect(await page.evaluate(() => document.cookie)).toBe("");
  expect(await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }))).toBe("{}{}");

  // A webhook call made outside the browser.
  const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: "r1" });
  expect(hook.status).toBe(202);
  await page.locator("input[name=runId]").fill(hook.body.runId!);
  await page.locator("form.open-run button[type=submit]").click();
  await page.locator(".run h1 .state").waitFor();
  // Live: the wait shows as RUNNING, then the run ends SUCCEEDED, with no reload.
  await page.locator(".step.wait.running, .step.wait.succeeded").first().waitFor({ timeout: 15_000 });
  await page.locator(".run h1 .state.succeeded").waitFor({ timeout: 20_000 });
  expect(await page.locator(".timeline .step").count()).toBe(3);
  expect(await page.locator(".timeline .step.succeeded .bar").count()).toBe(3);
  expect(await page.locator("button.danger").count()).toBe(0); // nothing to cancel once finished

  mkdirSync(join(tmpdir(), "runhook-browser"), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  console.log(`screenshot of a run in the console: ${SCREENSHOT}`);

  await page.locator("header button").click();
  await page.locator("form.sign-in").waitFor();
  await page.reload();
  await page.locator("form.sign-in").waitFor();
  await context.close();

  expect(requests.filter((u) => !u.startsWith(server.baseUrl))).toEqual([]);
  expect(problems).toEqual([]);
});
