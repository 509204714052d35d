// GET /openapi.json: a valid OpenAPI 3.1 document that describes exactly the plain-HTTP
// routes the gateway serves (collected from Fastify with an onRoute hook).
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { startServer, type TestServer } from "./helpers/server.js";

const served = new Set<string>();

// Wrap Fastify's factory so every instance the gateway builds reports its routes.
vi.mock("fastify", async (importOriginal) => {
  const mod = await importOriginal<typeof import("fastify")>();
  const wrapped = ((opts: unknown) => {
    const app = (mod.default as unknown as (o: unknown) => import("fastify").FastifyInstance)(opts);
    app.addHook("onRoute", (r) => {
      for (const m of [r.method].flat()) served.add(`${m.toUpperCase()} ${r.url}`);
    });
    return app;
  }) as unknown as typeof mod.default;
  return { ...mod, default: wrapped, fastify: wrapped };
});

let server: TestServer;
let doc: any;
beforeAll(async () => {
  server = await startServer();
  const res = await server.gateway.inject({ method: "GET", url: "/openapi.json" });
  expect(res.statusCode).toBe(200);
  expect(res.headers["content-type"]).toMatch(/application\/json/);
  doc = res.json();
});
afterAll(async () => server?.stop());

it("is a valid OpenAPI 3.1 document", async () => {
  expect(doc.openapi).toBe("3.1.0");
  const v = new Validator();
  const result = await v.validate(structuredClone(doc));
  expect(result.errors ?? [], JSON.stringify(result.errors, null, 1)?.slice(0, 2000)).toEqual([]);
  expect(result.valid).toBe(true);
});

it("resolves every $ref", () => {
  const refs: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k === "$ref" && typeof x === "string") refs.push(x);
        else walk(x);
      }
    }
  };
  walk(doc);
  expect(refs.length).toBeGreaterThan(10);
  for (const r of refs) {
    expect(r.startsWith("#/")).toBe(true);
    let node: any = doc;
    for (const part of r.slice(2).split("/")) node = node?.[part];
    expect(node, r).toBeTruthy();
  }
});

it("documents exactly the routes Fastify serves (Connect RPC paths aside)", () => {
  const routes = [...served]
    .filter((r) => !r.startsWith("HEAD ") && !r.startsWith("OPTIONS "))
    .filter((r) => !/ \/(runhook\.v1|grpc\.)/.test(r))
    // The reference page's assets (and its copy of this document at /docs/json) are not API.
    .filter((r) => !r.startsWith("GET /docs/"))
    // Nor are the console's page, files and sign-in (a browser's, behind its own origin).
    .filter((r) => !/ \/console(\/|$)/.test(r))
    .map((r) => r.replace(/:([A-Za-z]+)/g, "{$1}"))
    // The webhook route is a wildcard (the key is opaque); OpenAPI names it {key}.
    .map((r) => r.replace(/^POST \/hooks\/\*$/, "POST /hooks/{key}"));
  const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([p, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`),
  );
  expect(routes.length).toBeGreaterThan(5);
  const a = [...new Set(routes)].sort();
  const b = [...new Set(documented)].sort();
  expect({ servedButUndocumented: a.filter((x) => !b.includes(x)), documentedButNotServed: b.filter((x) => !a.includes(x)) }).toEqual({
    servedButUndocumented: [],
    documentedButNotServed: [],
  });
});

it("generates schemas from the proto descriptors (lowerCamelCase, WKTs)", () => {
  const s = doc.components.schemas;
  expect(s.ActivityLogEntry.properties).toMatchObject({
    id: { type: "string" },
    timestamp: { type: "string", format: "date-time" },
    recordId: { type: "string" },
    runId: { type: "string" },
    user: { $ref: "#/components/schemas/UserRef" },
    details: { type: "object" },
  });
  expect(s.Note.properties.messages).toEqual({ type: "array", items: { $ref: "#/components/schemas/NoteMessage" } });
  expect(s.ListNotesResponse.properties).toHaveProperty("hasMore", { type: "boolean" });
  expect(s.ListActivityLogsResponse.properties).toHaveProperty("nextCursor");
  expect(s.Error.required).toEqual(["error", "code"]);
  expect(s.CreateNoteBody.properties).not.toHaveProperty("scope");
  expect(doc.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
  const list = doc.paths["/v1/project/{projectName}/environment/{environmentName}/activity-logs"].get;
  expect(list.parameters.map((p: any) => p.name)).toEqual(
    expect.arrayContaining(["limit", "cursor", "order", "from", "to", "userId", "userEmail", "action", "collection", "recordId", "runId"]),
  );
  expect(list.responses["200"].headers).toHaveProperty("X-RateLimit-Remaining");
  const hook = doc.paths["/hooks/{key}"].post;
  expect(Object.keys(hook.responses).sort()).toEqual(["202", "400", "401", "403", "404", "409", "413", "429"]);
  expect(hook.parameters).toContainEqual(expect.objectContaining({ name: "Idempotency-Key", in: "header", required: false }));
  expect(hook.responses["202"].headers).toHaveProperty("Idempotent-Replayed");
  expect(s.WebhookAccepted).toMatchObject({ required: ["runId"], additionalProperties: false });
  expect(Object.keys(s.WebhookAccepted.properties)).toEqual(["runId"]);
});
