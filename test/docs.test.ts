// GET /docs: the API reference page (Swagger UI) over the same document as /openapi.json,
// every asset served by the gateway itself, outside the /v1 rate limit, and switched off by
// RUNHOOK_DOCS=off. (test/browser/docs.browser.ts loads it in a real browser.)
import { describe, expect, it } from "vitest";
import { loadConfig, ConfigError } from "../src/config.js";
import { serverForFile, testEnv, testDbName } from "./helpers/server.js";
import { createWorld } from "../fixtures/world.js";

describe("GET /docs (on)", () => {
  // A budget of one /v1 request a minute: the page must not count against it.
  const server = serverForFile({ env: { RUNHOOK_API_RATE_LIMIT: "1" } });

  it("answers an HTML page whose scripts and styles the gateway serves, under a CSP of its own origin", async () => {
    const res = await server.gateway.inject({ method: "GET", url: "/docs" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    const csp = String(res.headers["content-security-policy"]);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    const assets = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(expect.arrayContaining(["/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css", "/docs/static/swagger-initializer.js"]));
    for (const url of assets) {
      expect(url, "no asset from another host").toMatch(/^\/docs\//);
      const asset = await server.gateway.inject({ method: "GET", url });
      expect(asset.statusCode, url).toBe(200);
      expect(asset.body.length, url).toBeGreaterThan(0);
    }
    const init = await server.gateway.inject({ method: "GET", url: "/docs/static/swagger-initializer.js" });
    expect(init.body).toContain("validatorUrl: null"); // the validator badge would call validator.swagger.io
  });

  it("shows the very document of /openapi.json, which documents /docs and has examples", async () => {
    const ui = (await server.gateway.inject({ method: "GET", url: "/docs/json" })).json();
    const doc = (await server.gateway.inject({ method: "GET", url: "/openapi.json" })).json();
    expect(ui).toEqual(doc);
    expect(doc.paths["/docs"].get.responses["200"].content).toHaveProperty("text/html");
    const hook = doc.paths["/hooks/{key}"].post;
    expect(hook.requestBody.content["application/json"].example).toEqual({ record_id: "A-1001" });
    expect(hook.responses["409"].content["application/json"].example).toMatchObject({ code: "already_exists", runId: expect.any(String) });
    // The published operations keep the published examples; runhook's own have theirs.
    const logs = doc.paths["/v1/project/{projectName}/environment/{environmentName}/activity-logs"].get;
    expect(logs.responses["200"].content["application/json"].example.data[0]).toMatchObject({ object: "activityLog" });
    const run = doc.paths["/v1/runs/{runId}"].get;
    expect(run.responses["429"].content["application/json"].example).toMatchObject({ code: "resource_exhausted" });
  });

  it("is not subject to the /v1 rate limit", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await server.gateway.inject({ method: "GET", url: "/docs" });
      expect(res.statusCode).toBe(200);
      expect(res.headers).not.toHaveProperty("x-ratelimit-remaining");
    }
    // The budget of one is real: a second /v1 request with the same (valid) token is throttled.
    const w = await createWorld(server);
    const get = () =>
      server.gateway.inject({ method: "GET", url: "/v1/runs/0b6f9d0e-3c1a-4e7b-9f2d-5a8c7b6e4d3f", headers: { authorization: `Bearer ${w.apiToken}` } });
    expect((await get()).statusCode).toBe(404);
    expect((await get()).statusCode).toBe(429);
  });
});

describe("GET /docs (RUNHOOK_DOCS=off)", () => {
  const server = serverForFile({ env: { RUNHOOK_DOCS: "off" } });

  it("is 404, with its assets, and the document no longer lists it", async () => {
    for (const url of ["/docs", "/docs/static/swagger-ui-bundle.js", "/docs/json"]) {
      const res = await server.gateway.inject({ method: "GET", url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json(), url).toMatchObject({ code: "not_found" });
    }
    const doc = (await server.gateway.inject({ method: "GET", url: "/openapi.json" })).json();
    expect(doc.paths).not.toHaveProperty("/docs");
    expect(doc.paths).toHaveProperty("/hooks/{key}");
  });

  it("takes only a yes or a no", () => {
    expect(() => loadConfig({ ...testEnv(testDbName()), RUNHOOK_DOCS: "maybe" })).toThrow(ConfigError);
  });
});
