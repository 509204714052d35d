// The console's first minutes on the demo world (`runhook seed`) and its polish, in a real browser
// (Debian's chromium, headless): each page titles the document; the light and dark palettes follow
// prefers-color-scheme; at 390 px the header wraps with Sign out on screen and the run's timeline
// keeps its bars; `/` focuses the page's search field and `?` lists the shortcuts (Escape closes
// the list); a failed run's page shows its error once, its trail names the project and the
// environment, its times are relative with the full date on hover, and its timeline shows the
// time queued and an axis; an environment and a workflow with no run say what to do next (with no
// accessibility violation, axe-core, in either scheme).
// Screenshots of the pages at 1280 and 390 px in both schemes go to $TMPDIR/runhook-browser/polish-*.png.
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { beforeAll, expect, it } from "vitest";
import type { SeedOutput } from "../../src/cli/demo.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { seed } from "../helpers/server.js";
import { adminClient, local, postHook } from "../helpers/webhook.js";
import { LONG, browserForFile, consoleServerForFile, isFocused, openConsole, signedIn, signIn, violations } from "./lib.js";

const SHOTS = join(tmpdir(), "runhook-browser");
const ADMIN = "admin@demo.example";
const MISSING_RECORD_ERROR = 'record "9999" of collection "orders" not found or not accessible';
const server = consoleServerForFile();
const browser = browserForFile();
let demo: SeedOutput;
let projectId: string;
let failedRun: string;
let succeededRun: string;
/** A world of its own with a workflow and no run yet. */
let empty: World;

beforeAll(async () => {
  demo = await seed(server);
  projectId = (await adminClient(server.baseUrl, demo.adminToken).listProjects({})).projects.find((p) => p.name === demo.projectName)!.id;
  const hook = local(demo.webhookUrl, server.deps.config.publicBaseUrl, server.baseUrl);
  const failed = await postHook(hook, demo.userToken, { record_id: "9999" });
  const succeeded = await postHook(hook, demo.userToken, { record_id: "1002" });
  expect([failed.status, succeeded.status]).toEqual([202, 202]);
  failedRun = failed.body.runId!;
  succeededRun = succeeded.body.runId!;
  empty = await createWorld(server);
  mkdirSync(SHOTS, { recursive: true });
}, 120_000);

const runsRoute = () => `${server.baseUrl}/console#/p/${projectId}/env/${demo.environmentName}/runs`;
const runRoute = (runId: string) => `${server.baseUrl}/console#/runs/${runId}`;

/** A run's page, once the run is `state` and its place (environment, workflow) is named. */
async function openRun(page: Page, runId: string, state: string) {
  await page.goto(runRoute(runId));
  await page.locator(`.run h1 .state.${state}`).waitFor({ timeout: 30_000 });
  await page.getByRole("navigation", { name: "Breadcrumb" }).getByRole("link", { name: demo.environmentName }).waitFor(LONG);
  await page.locator(".facts").getByRole("link", { name: "process-order" }).waitFor(LONG);
}

it("titles the document after each page", { timeout: 90_000 }, async () => {
  const { page, done } = await openConsole(browser, server);
  expect(await page.title()).toBe("Sign in — runhook");
  await page.locator("input[name=token]").fill(demo.adminToken);
  await page.locator("form.sign-in button[type=submit]").click();
  await page.locator("table.projects").waitFor(LONG);
  await expect.poll(() => page.title()).toBe("Projects — runhook");
  await openRun(page, failedRun, "failed");
  await expect.poll(() => page.title()).toBe(`Run ${failedRun.slice(0, 8)}… · orders/9999 — runhook`);
  await page.goto(runsRoute());
  await expect.poll(() => page.title()).toBe(`Runs in ${demo.environmentName} — runhook`);
  await page.goto(`${server.baseUrl}/console#/p/${projectId}/env/${demo.environmentName}/activity`);
  await expect.poll(() => page.title()).toBe(`Activity log of ${demo.environmentName} — runhook`);
  await page.goto(`${server.baseUrl}/console#/p/${projectId}`);
  await expect.poll(() => page.title()).toBe(`Project ${demo.projectName} — runhook`);
  await page.goto(`${server.baseUrl}/console#/account`);
  await expect.poll(() => page.title()).toBe("Account settings — runhook");
  await page.goto(`${server.baseUrl}/console#/nothing-here`);
  await expect.poll(() => page.title()).toBe("No such page — runhook");
  await done();
});

it("shows a failed run's error once, names its project and environment in the trail, dates its times and draws the time queued and an axis", {
  timeout: 90_000,
}, async () => {
  const { page, done } = await signedIn(browser, server, demo.adminToken, ADMIN);
  await openRun(page, failedRun, "failed");
  await page.locator(".run-error").waitFor(LONG);
  expect(await page.locator("main").getByText(MISSING_RECORD_ERROR).count()).toBe(1);
  expect(await page.locator(".run-error").textContent()).toBe(`Step 1 (load_record) failed: ${MISSING_RECORD_ERROR}`);
  // The trail: Projects › demo › production › Run 1a2b3c4d…, the environment leading to its runs.
  const trail = page.getByRole("navigation", { name: "Breadcrumb" });
  await trail.getByRole("link", { name: demo.environmentName }).waitFor(LONG);
  expect((await trail.textContent())?.replaceAll(/\s+/g, " ")).toBe(`Projects › ${demo.projectName} › ${demo.environmentName} › Run ${failedRun.slice(0, 8)}…`);
  expect(await trail.getByRole("link", { name: demo.environmentName }).getAttribute("href")).toBe(`#/p/${projectId}/env/${demo.environmentName}/runs`);
  // Created and Finished: relative, with the full date and time on hover (the year among it).
  const times = page.locator(".facts time");
  expect(await times.count()).toBe(2);
  for (const time of await times.all()) {
    expect(await time.textContent()).toMatch(/ago|now/);
    expect(await time.getAttribute("title")).toContain(String(new Date().getFullYear()));
  }
  // The time queued, before the first step, and an axis from 0 s to the run's length.
  await page.locator(".lane.queue .bar").waitFor();
  expect(await page.locator(".lane.queue .step-name").textContent()).toBe("Queued");
  expect(await page.locator(".lane.axis .tick").first().textContent()).toBe("0 s");
  expect(await page.locator(".lane.axis .tick").count()).toBe(5);
  await done();
});

it("at 390 px wide the header wraps with Sign out on screen, and the timeline keeps its bars", { timeout: 90_000 }, async () => {
  const { page, done } = await signedIn(browser, server, demo.adminToken, ADMIN, { viewport: { width: 390, height: 844 } });
  for (const [runId, state] of [
    [succeededRun, "succeeded"],
    [failedRun, "failed"],
  ]) {
    await openRun(page, runId!, state!);
    const signOut = page.getByRole("button", { name: "Sign out" });
    const box = (await signOut.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    // Nothing wider than the screen.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    // Every step that ran has a bar of some width, inside the screen.
    const bars = page.locator(".timeline .step .bar");
    expect(await bars.count()).toBeGreaterThan(0);
    for (const bar of await bars.all()) {
      const b = (await bar.boundingBox())!;
      expect(b.width).toBeGreaterThan(0);
      expect(b.x + b.width).toBeLessThanOrEqual(390);
    }
  }
  await done();
});

it("follows prefers-color-scheme: a light and a dark palette", { timeout: 60_000 }, async () => {
  const colors: Record<string, string[]> = {};
  for (const colorScheme of ["light", "dark"] as const) {
    const { page, done } = await signedIn(browser, server, demo.adminToken, ADMIN, { colorScheme });
    await openRun(page, failedRun, "failed");
    colors[colorScheme] = await page.evaluate(() => {
      const of = (selector: string) => getComputedStyle(document.querySelector(selector)!);
      return [of("html").backgroundColor, of("h1").color, of(".run-error").color];
    });
    await done();
  }
  expect(colors).toEqual({
    light: ["rgb(247, 248, 250)", "rgb(29, 35, 48)", "rgb(179, 38, 30)"],
    dark: ["rgb(15, 19, 24)", "rgb(227, 231, 238)", "rgb(255, 155, 145)"],
  });
});

it("`/` focuses the page's search field, `?` lists the shortcuts and Escape closes the list", { timeout: 60_000 }, async () => {
  const { page, done } = await signedIn(browser, server, demo.adminToken, ADMIN);
  await page.goto(runsRoute());
  await page.locator("table.runs").waitFor(LONG);
  const first = page.locator("form.filters input[type=text]").first();
  await page.locator("h1").click();
  await page.keyboard.press("/");
  await expect.poll(() => isFocused(first)).toBe(true);
  // In a field, `/` and `?` are typed as they are.
  await page.keyboard.type("a/b?");
  expect(await first.inputValue()).toBe("a/b?");
  expect(await page.getByRole("dialog").count()).toBe(0);

  await page.locator("h1").click();
  await page.keyboard.press("?");
  const list = page.getByRole("dialog", { name: "Keyboard shortcuts" });
  await list.waitFor();
  expect(await list.locator("dt").allTextContents()).toEqual(["/", "?", "Esc"]);
  await page.keyboard.press("Escape");
  await list.waitFor({ state: "detached" });

  // On the activity log, its first filter.
  await page.goto(`${server.baseUrl}/console#/p/${projectId}/env/${demo.environmentName}/activity`);
  await page.locator("table.log").waitFor(LONG);
  await page.locator("h1").click();
  await page.keyboard.press("/");
  await expect.poll(() => isFocused(page.locator("form.filters input[type=text]").first())).toBe(true);
  await done();
});

it("an environment and a workflow with no run say what to do next: the webhook command, Start run", { timeout: 60_000 }, async () => {
  const { page, done } = await signedIn(browser, server, empty.adminToken, empty.admin.email);
  const url = (await adminClient(server.baseUrl, empty.adminToken).getWebhook({ workflowId: empty.workflowId })).webhook!.url;
  await page.goto(`${server.baseUrl}/console#/p/${empty.projectId}/env/${empty.environmentName}/runs`);
  const next = page.locator(".next-steps");
  await next.getByRole("heading", { name: "test workflow" }).waitFor(LONG);
  expect(await next.textContent()).toContain(`There is no run in ${empty.environmentName} yet`);
  expect(await next.locator(".webhook-command pre").textContent()).toBe(
    `curl -i -X POST '${url}' -H "Authorization: Bearer $APPLICATION_TOKEN" -H 'Content-Type: application/json' -d '{"record_id":"RECORD_ID"}'`,
  );
  await next.getByRole("link", { name: "test workflow" }).click();
  await page.getByRole("heading", { name: "Trigger settings" }).waitFor(LONG);
  await page.getByText("No run of this workflow yet: start one on a record below").waitFor(LONG);
  await page.getByRole("button", { name: "Start run" }).waitFor();
  expect(await page.locator(".trigger .webhook-command pre").textContent()).toContain(url);
  await done();
});

it("the pages that say what to do next have no accessibility violation (axe-core), light and dark", { timeout: 90_000 }, async () => {
  for (const colorScheme of ["light", "dark"] as const) {
    const { page, done } = await openConsole(browser, server, { colorScheme, bypassCSP: true });
    await signIn(page, empty.adminToken, empty.admin.email);
    await page.goto(`${server.baseUrl}/console#/p/${empty.projectId}/env/${empty.environmentName}/runs`);
    await page.locator(".next-steps .webhook-command").waitFor(LONG);
    expect(await violations(page), `${colorScheme}: the environment with no run`).toEqual([]);
    await page.goto(`${server.baseUrl}/console#/p/${empty.projectId}/r/${empty.renderingId}/w/${empty.workflowId}`);
    await page.locator(".next-steps").waitFor(LONG);
    expect(await violations(page), `${colorScheme}: the workflow with no run`).toEqual([]);
    await done();
  }
});

it("screenshots its pages at 1280 and 390 px, light and dark", { timeout: 240_000 }, async () => {
  for (const colorScheme of ["light", "dark"] as const)
    for (const width of [1280, 390]) {
      const { page, done } = await signedIn(browser, server, demo.adminToken, ADMIN, { viewport: { width, height: 900 }, colorScheme });
      const shoot = async (name: string) => {
        const path = join(SHOTS, `polish-${name}-${width}-${colorScheme}.png`);
        await page.screenshot({ path, fullPage: true });
        console.log(`screenshot: ${path}`);
      };
      await page.locator("table.projects").waitFor(LONG);
      await shoot("projects");
      await openRun(page, failedRun, "failed");
      await shoot("run-failed");
      await openRun(page, succeededRun, "succeeded");
      await shoot("run-succeeded");
      await page.keyboard.press("?");
      await page.getByRole("dialog").waitFor();
      await shoot("shortcuts");
      await page.keyboard.press("Escape");
      await page.goto(runsRoute());
      await page.locator("table.runs").waitFor(LONG);
      await shoot("runs");
      await page.goto(`${server.baseUrl}/console#/p/${projectId}/env/${demo.environmentName}/activity`);
      await page.locator("table.log tbody tr").first().waitFor(LONG);
      await shoot("activity");
      await done();
      const other = await signedIn(browser, server, empty.adminToken, empty.admin.email, { viewport: { width, height: 900 }, colorScheme });
      await other.page.goto(`${server.baseUrl}/console#/p/${empty.projectId}/env/${empty.environmentName}/runs`);
      await other.page.locator(".next-steps .webhook-command").waitFor(LONG);
      await other.page.screenshot({ path: join(SHOTS, `polish-empty-runs-${width}-${colorScheme}.png`), fullPage: true });
      await other.page.goto(`${server.baseUrl}/console#/p/${empty.projectId}/r/${empty.renderingId}/w/${empty.workflowId}`);
      await other.page.locator(".next-steps").waitFor(LONG);
      await other.page.screenshot({ path: join(SHOTS, `polish-workflow-${width}-${colorScheme}.png`), fullPage: true });
      await other.done();
    }
});
