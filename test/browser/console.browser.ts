// The console in a real browser (Debian's chromium, headless, through playwright-core): sign in
// with an application token, open a run that a webhook call made outside the browser started,
// and watch it step to SUCCEEDED on its timeline without a reload; then sign out. No request
// leaves this machine, nothing is refused by the page's CSP, and the token is nowhere the page's
// scripts can read it afterwards (only an HttpOnly cookie holds the session).
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, expect, it } from "vitest";
import { createWorld, type World } from "../../fixtures/world.js";
import { postHook } from "../helpers/webhook.js";
import { browserForFile, consoleServerForFile, signedIn } from "./lib.js";

const SCREENSHOT = join(tmpdir(), "runhook-browser", "console-run.png");

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;

beforeAll(async () => {
  w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 2 }, { type: "update_record", set: { status: "done" } }] });
});

it("signs in, follows a run started by a webhook call to SUCCEEDED on its timeline, and signs out", { timeout: 60_000 }, async () => {
  const { page, done } = await signedIn(browser, server, w.userToken, w.user.email);
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
  await done(); // nothing left the machine, no error was logged
});
