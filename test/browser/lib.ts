// What the browser scenarios share: Debian's chromium launched headless, a test server on a free
// loopback port (each for the whole file), and a browser context signed in to the console that
// records every request and every error the page logs, checked when the context is done.
import { createRequire } from "node:module";
import { createServer } from "node:net";
import type { Browser, BrowserContext, BrowserContextOptions, Locator, Page } from "playwright-core";
import { launchChromium } from "../../fixtures/chromium.js";
import { expect } from "vitest";
import { forFile, startServer, type TestServer } from "../helpers/server.js";

export const LONG = { timeout: 20_000 };

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A test server whose public base URL is its own loopback address (the console's origin). */
async function consoleServer(): Promise<TestServer> {
  const port = await freePort();
  return startServer({ env: { PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}` } });
}

/** consoleServer for the whole test file. */
export const consoleServerForFile = () => forFile(consoleServer, (server) => server.stop());

/** The headless chromium of the whole test file. */
export const browserForFile = () => forFile(launchChromium, (browser) => browser.close());

export interface Session {
  page: Page;
  context: BrowserContext;
  /** Closes the browser context and checks that nothing left the machine and nothing was logged as an error. */
  done(): Promise<void>;
}

export interface SessionOptions extends BrowserContextOptions {
  /** Console errors this scenario expects (each matched in full); any other fails it. */
  allowErrors?: RegExp;
}

/** A fresh browser context on the console's sign-in page. */
export async function openConsole(browser: Browser, server: TestServer, opts: SessionOptions = {}): Promise<Session> {
  const { allowErrors, ...contextOptions } = opts;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...contextOptions });
  const requests: string[] = [];
  const problems: string[] = [];
  context.on("request", (r) => requests.push(r.url()));
  const page = await context.newPage();
  page.on("console", (m) => m.type() === "error" && !allowErrors?.test(m.text()) && problems.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  expect((await page.goto(`${server.baseUrl}/console`))?.status()).toBe(200);
  await page.locator("form.sign-in").waitFor(LONG);
  return {
    page,
    context,
    async done() {
      await context.close();
      expect(requests.filter((u) => !u.startsWith(server.baseUrl) && !u.startsWith(`blob:${server.baseUrl}`))).toEqual([]);
      expect(problems).toEqual([]);
    },
  };
}

/** Signs in on the sign-in page with `token`; waits for `email` in the header. */
export async function signIn(page: Page, token: string, email: string): Promise<void> {
  await page.locator("input[name=token]").fill(token);
  await page.locator("form.sign-in button[type=submit]").click();
  await page.locator("header .who").waitFor(LONG);
  expect(await page.locator("header .who").textContent()).toBe(email);
}

/** A fresh browser context signed in to the console with `token`. */
export async function signedIn(browser: Browser, server: TestServer, token: string, email: string, opts: SessionOptions = {}): Promise<Session> {
  const session = await openConsole(browser, server, opts);
  await signIn(session.page, token, email);
  return session;
}

const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; failureSummary?: string }[];
}

/** axe's violations on the page as it is (axe injected once per document). */
export async function violations(page: Page): Promise<Violation[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.addScriptTag({ path: AXE });
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[] }> } }).axe;
    const { violations } = await axe.run(document);
    return violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })),
    }));
  });
}

/** Presses Tab (or Shift+Tab) until `target` has the focus; how many presses it took. */
export async function tabTo(page: Page, target: Locator, back = false): Promise<number> {
  for (let presses = 1; presses <= 40; presses++) {
    await page.keyboard.press(back ? "Shift+Tab" : "Tab");
    if (await isFocused(target)) return presses;
  }
  throw new Error(`${target} cannot be reached with ${back ? "Shift+Tab" : "Tab"}`);
}

export const isFocused = (target: Locator) => target.evaluate((el) => el === document.activeElement);

/** `target` has the focus (once the page has moved it), and shows it: :focus-visible, with an outline drawn. */
export async function expectVisibleFocus(target: Locator) {
  await expect.poll(() => isFocused(target), LONG).toBe(true);
  expect(await target.evaluate((el) => el.matches(":focus-visible") && getComputedStyle(el).outlineStyle !== "none")).toBe(true);
}
