// The console's accessibility, in a real browser: axe-core (node_modules/axe-core) checks every
// page — sign-in, projects, project, rendering, workflow with its trigger settings (and a
// confirmation open), runs, run, activity log, admin log, notes, account, API access, the
// keyboard shortcuts' list — in the light and the dark color scheme, and finds no serious or
// critical violation. The page's CSP refuses injected scripts, so this browser
// context alone bypasses it (`bypassCSP`) to load axe; the other scenarios keep the CSP. And the
// trigger settings with the keyboard alone: copy the URL, disable (through the confirmation,
// whose safe answer has the focus first) and enable the webhook, set the rate limit; the focus
// is always visible and lands where the next step is.
import { beforeAll, expect, it } from "vitest";
import { createWorld, type World } from "../../fixtures/world.js";
import { adminClient, postHook } from "../helpers/webhook.js";
import { LONG, type Violation, browserForFile, consoleServerForFile, expectVisibleFocus, openConsole, signIn, signedIn, tabTo, violations } from "./lib.js";

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;
let runId: string;

beforeAll(async () => {
  w = await createWorld(server, { steps: [{ type: "load_record" }, { type: "wait", seconds: 1 }, { type: "update_record", set: { status: "done" } }] });
  const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: "r1" });
  expect(hook.status).toBe(202);
  runId = hook.body.runId!;
});

/** Violations as lines a reader can act on: impact, rule, where, why, and on which pages (the same node on several pages once). */
function readable(found: [string, Violation][]): string[] {
  const lines = new Map<string, string[]>();
  for (const [where, v] of found)
    for (const n of v.nodes) {
      const line = `${v.impact} ${v.id} (${v.help}) at ${n.target.join(" ")}${n.failureSummary ? ` — ${n.failureSummary.replaceAll(/\s+/g, " ")}` : ""}`;
      lines.set(line, [...(lines.get(line) ?? []), where]);
    }
  return [...lines].map(([line, pages]) => `${line} [on: ${pages.join(", ")}]`);
}

/** axe-core on every page of the console in `colorScheme`: no serious or critical violation. */
async function checkEveryPage(colorScheme: "light" | "dark") {
  // A project that is not found: its refused call is logged by chromium, as it is meant to be.
  const { page, done } = await openConsole(browser, server, {
    colorScheme,
    bypassCSP: true,
    allowErrors: /^Failed to load resource: the server responded with a status of 404 \(Not Found\)$/,
  });
  const found: [string, Violation][] = [];
  const check = async (where: string) => {
    for (const v of await violations(page)) found.push([where, v]);
  };
  const visit = async (route: string, ready: string, where: string) => {
    await page.goto(`${server.baseUrl}/console#${route}`);
    await page.locator(ready).first().waitFor(LONG);
    await check(where);
  };

  await check("sign-in");
  await signIn(page, w.adminToken, w.admin.email);
  await page.locator("table.projects").waitFor(LONG);
  await check("projects");
  const env = w.environmentName;
  await visit(`/p/${w.projectId}`, "table.renderings tbody tr", "project");
  await visit(`/p/${w.projectId}/r/${w.renderingId}`, "table.workflows tbody tr", "rendering");
  await visit(`/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`, ".version.active", "workflow (trigger settings)");
  await page.getByRole("button", { name: "Disable" }).click();
  await page.getByRole("alertdialog").waitFor();
  await check("workflow (a confirmation open)");
  await visit(`/p/${w.projectId}/env/${env}/runs`, `tr[data-run="${runId}"]`, "runs");
  await visit(`/runs/${runId}`, ".run h1 .state.succeeded", "run");
  await page.keyboard.press("?");
  await page.getByRole("dialog", { name: "Keyboard shortcuts" }).waitFor();
  await check("keyboard shortcuts");
  await page.keyboard.press("Escape");
  await visit(`/p/${w.projectId}/env/${env}/activity`, "table.log tbody tr", "activity log");
  await visit(`/p/${w.projectId}/admin-log`, "table.log tbody tr", "admin log");
  await visit(`/p/${w.projectId}/env/${env}/notes`, "text=No note matches.", "notes");
  await page.getByRole("button", { name: "New note" }).click();
  await check("notes (a new note's form)");
  await visit("/account", "table.tokens", "account");
  await visit(`/p/${w.projectId}/api-access`, "table.tokens", "API access");
  await visit(`/p/${w.projectId}/nothing-here`, "text=No such page.", "no such page");
  await visit("/p/00000000-0000-4000-8000-000000000000", "text=No such project for you", "a project not found");

  const isSerious = ([, v]: [string, Violation]) => v.impact === "serious" || v.impact === "critical";
  const minor = readable(found.filter((f) => !isSerious(f)));
  if (minor.length) console.log(`moderate and minor (not failing):\n${minor.join("\n")}`);
  const serious = readable(found.filter(isSerious));
  expect(serious, `serious or critical violations:\n${serious.join("\n")}`).toEqual([]);
  await done();
}

for (const colorScheme of ["light", "dark"] as const)
  it(`every page of the console has no serious or critical accessibility violation (axe-core), ${colorScheme} color scheme`, { timeout: 180_000 }, () =>
    checkEveryPage(colorScheme),
  );

it("an admin copies the webhook URL, disables and enables the webhook and sets its rate limit with the keyboard alone", { timeout: 120_000 }, async () => {
  const a = adminClient(server.baseUrl, w.adminToken);
  const url = (await a.getWebhook({ workflowId: w.workflowId })).webhook!.url;
  const { page, context, done } = await signedIn(browser, server, w.adminToken, w.admin.email);
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.baseUrl });
  // The address typed, then no click: Tab, Shift+Tab, Enter, Space and typing only.
  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`);
  await page.locator(".version.active").waitFor(LONG);

  // Copy the URL.
  const copy = page.getByRole("button", { name: "Copy URL" });
  await tabTo(page, copy);
  await expectVisibleFocus(copy);
  await page.keyboard.press("Enter");
  await page.getByText("Copied").waitFor(LONG);
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(url);

  // Disable, through its confirmation: the safe answer has the focus first.
  const disable = page.getByRole("button", { name: "Disable", exact: true });
  await tabTo(page, disable);
  await expectVisibleFocus(disable);
  await page.keyboard.press("Enter");
  const keep = page.getByRole("alertdialog").getByRole("button", { name: "Keep as is" });
  await expectVisibleFocus(keep);
  // Keeping it as is changes nothing and gives the focus back to Disable.
  await page.keyboard.press("Space");
  await expectVisibleFocus(disable);
  expect((await a.getWebhook({ workflowId: w.workflowId })).webhook?.enabled).toBe(true);
  await page.keyboard.press("Enter");
  await expectVisibleFocus(keep);
  const yes = page.getByRole("button", { name: "Disable the webhook" });
  await tabTo(page, yes, true);
  await expectVisibleFocus(yes);
  await page.keyboard.press("Space");
  await page.getByText("The webhook is disabled.").waitFor(LONG);
  expect((await a.getWebhook({ workflowId: w.workflowId })).webhook?.enabled).toBe(false);
  expect((await postHook(url, w.userToken, { record_id: "r2" })).status).toBe(404);

  // Enable: the focus is already on it, where Disable was.
  const enable = page.getByRole("button", { name: "Enable", exact: true });
  await expectVisibleFocus(enable);
  await page.keyboard.press("Enter");
  await page.getByText("The webhook is enabled.").waitFor(LONG);
  expect((await a.getWebhook({ workflowId: w.workflowId })).webhook?.enabled).toBe(true);
  await expectVisibleFocus(disable);
  expect((await postHook(url, w.userToken, { record_id: "r2" })).status).toBe(202);

  // The rate limit: its field, typed, then Enter submits.
  const limit = page.getByRole("spinbutton", { name: "Requests per minute" });
  await tabTo(page, limit);
  await expectVisibleFocus(limit);
  await page.keyboard.press("Control+A");
  await page.keyboard.type("240");
  await page.keyboard.press("Enter");
  await page.getByText("The rate limit is 240 per minute.").waitFor(LONG);
  expect((await a.getWebhook({ workflowId: w.workflowId })).webhook?.rateLimitPerMinute).toBe(240);
  // The focus stays in the field; its button is the next stop.
  await expectVisibleFocus(limit);
  const set = page.getByRole("button", { name: "Set rate limit" });
  await page.keyboard.press("Control+A");
  await page.keyboard.type("300");
  expect(await tabTo(page, set)).toBe(1);
  await expectVisibleFocus(set);
  await page.keyboard.press("Space");
  await page.getByText("The rate limit is 300 per minute.").waitFor(LONG);
  expect((await a.getWebhook({ workflowId: w.workflowId })).webhook?.rateLimitPerMinute).toBe(300);
  await done();
});
