// The console's files: built by the project from a fresh clone (no bundle is committed), within
// their size budget, and served with headers that keep the page to itself (a strict CSP with no
// inline script, no framing, no sniffing). Real server.
import { afterAll, beforeAll, expect, it } from "vitest";
import { CONSOLE_BUDGET_GZIP_BYTES, consoleAssets } from "../src/http/console-assets.js";
import { startServer, type TestServer } from "./helpers/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => server?.stop());

it("is within its size budget (script and style, gzipped)", async () => {
  const assets = await consoleAssets(server.deps.config.cacheDir, () => {});
  console.log(`console: ${assets.gzipBytes} bytes gzipped (budget ${CONSOLE_BUDGET_GZIP_BYTES})`);
  expect(assets.gzipBytes).toBeGreaterThan(1000);
  expect(assets.gzipBytes).toBeLessThanOrEqual(CONSOLE_BUDGET_GZIP_BYTES);
});

it("serves its page and files with a strict CSP, and nothing else under /console/assets", async () => {
  const page = await fetch(`${server.baseUrl}/console`);
  expect(page.status).toBe(200);
  const html = await page.text();
  expect(html).toContain('<script type="module" src="/console/assets/app.js"></script>');
  expect(html).not.toMatch(/<script>|<script type="module">|\son[a-z]+=/i); // no inline script or handler
  const csp = page.headers.get("content-security-policy")!;
  for (const directive of ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"])
    expect(csp).toContain(directive);
  expect(csp).not.toContain("unsafe");
  expect([page.headers.get("x-frame-options"), page.headers.get("x-content-type-options"), page.headers.get("referrer-policy")]).toEqual([
    "DENY",
    "nosniff",
    "no-referrer",
  ]);

  const script = await fetch(`${server.baseUrl}/console/assets/app.js`);
  expect([script.status, script.headers.get("content-type")]).toEqual([200, "text/javascript; charset=utf-8"]);
  // Sent gzipped to a client that accepts it (fetch does, and unzips), as is to one that does not.
  expect(script.headers.get("content-encoding")).toBe("gzip");
  const plain = await server.gateway.inject({ method: "GET", url: "/console/assets/app.js" });
  expect([plain.headers["content-encoding"], plain.body]).toEqual([undefined, await script.text()]);
  const etag = script.headers.get("etag")!;
  expect((await fetch(`${server.baseUrl}/console/assets/app.js`, { headers: { "if-none-match": etag } })).status).toBe(304);
  for (const name of ["index.html", "../package.json", "nope.js"]) expect((await fetch(`${server.baseUrl}/console/assets/${name}`)).status).toBe(404);
});
