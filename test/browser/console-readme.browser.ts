// The README's screenshots of the console, made in a real browser (Debian's chromium, headless):
// a finished run with a wait on its page, and a workflow's trigger settings as an admin sees
// them, each 1280×720. They are written to $TMPDIR/runhook-browser/readme-*.png on every run, and into
// docs/images/ (the files README.md shows) with RUNHOOK_README_IMAGES=1:
//   RUNHOOK_README_IMAGES=1 npx vitest run --config test/browser/vitest.config.ts test/browser/console-readme.browser.ts
import { mkdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { beforeAll, expect, it } from "vitest";
import { createWorld, type World } from "../../fixtures/world.js";
import { postHook } from "../helpers/webhook.js";
import { LONG, browserForFile, consoleServerForFile, signedIn } from "./lib.js";

/** Where the images go: $TMPDIR/runhook-browser/readme-<name> always, docs/images/<name> when asked. */
const PATHS = (name: string) => [
  join(tmpdir(), "runhook-browser", `readme-${name}`),
  ...(process.env.RUNHOOK_README_IMAGES === "1" ? [resolve(import.meta.dirname, "../../docs/images", name)] : []),
];
const VIEWPORT = { width: 1280, height: 720 };
/** A README image stays small. */
const MAX_BYTES = 150 * 1024;

const server = consoleServerForFile();
const browser = browserForFile();
let w: World;

beforeAll(async () => {
  w = await createWorld(server, {
    steps: [{ type: "load_record" }, { type: "wait", seconds: 2 }, { type: "update_record", set: { status: "shipped" } }],
  });
  for (const path of PATHS("x")) mkdirSync(dirname(path), { recursive: true });
});

it("screenshots a finished run with a wait on its page, and the trigger settings as an admin sees them", { timeout: 90_000 }, async () => {
  const hook = await postHook(`${server.baseUrl}${w.hookPath}`, w.userToken, { record_id: "r1" });
  expect(hook.status).toBe(202);
  const { page, done } = await signedIn(browser, server, w.adminToken, w.admin.email, { viewport: VIEWPORT });
  const shoot = async (name: string) => {
    for (const path of PATHS(name)) {
      await page.screenshot({ path });
      expect(statSync(path).size).toBeLessThanOrEqual(MAX_BYTES);
      console.log(`screenshot: ${path}`);
    }
  };

  await page.goto(`${server.baseUrl}/console#/runs/${hook.body.runId}`);
  await page.locator(".run h1 .state.succeeded").waitFor(LONG);
  expect(await page.locator(".timeline .step.wait.succeeded .bar").count()).toBe(1);
  await shoot("console-run.png");

  await page.goto(`${server.baseUrl}/console#/p/${w.projectId}/r/${w.renderingId}/w/${w.workflowId}`);
  await page.locator(".version.active").waitFor(LONG);
  await page.getByRole("button", { name: "Copy URL" }).waitFor();
  await shoot("console-trigger-settings.png");
  await done();
});
