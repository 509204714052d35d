// GET /openapi.json: a valid OpenAPI 3.0.3 document that describes exactly the plain-HTTP
// routes the gateway serves (collected from Fastify with an onRoute hook). That it is the
// published document plus runhook's marked additions: test/openapi-published.test.ts.
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

// The validator holds schemas to 3.0's: a 3.1 form (a `type` list, `const`, a numeric `exclusiveMinimum`) fails it.
it("is a valid OpenAPI 3.0.3 document", async () => {
  expect(doc.openapi).toBe("3.0.3");
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

it("generates runhook's own schemas from the proto descriptors (lowerCamelCase, WKTs) and the published items", () => {
  const s = doc.components.schemas;
  expect(s.Run.properties).toMatchObject({
    id: { type: "string" },
    createdAt: { type: "string", format: "date-time" },
    recordId: { type: "string" },
    user: { $ref: "#/components/schemas/UserRef" },
    steps: { type: "array", items: { $ref: "#/components/schemas/StepResult" } },
    // 64-bit integers are strings in ProtoJSON.
    version: { type: "string", format: "int64" },
  });
  expect(s.ListRunsResponse.properties).toHaveProperty("hasMore", { type: "boolean" });
  expect(s.ListRunsResponse.properties).toHaveProperty("nextCursor");
  expect(s.Error).toMatchObject({ required: ["code", "message", "error"], additionalProperties: false });
  // The notes' routes answer the published items, which the published lists hold.
  expect(s.note.properties.messages.items).toEqual({ ...s["note-message"], "x-runhook-addition": undefined });
  const notes = "/v1/project/{projectName}/environment/{environmentName}/notes";
  expect(doc.paths[notes].post.responses["201"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/note" });
  expect(doc.paths[`${notes}/{noteId}/messages`].post.responses["201"].content["application/json"].schema).toEqual({
    $ref: "#/components/schemas/note-message",
  });
  expect(doc.paths[`${notes}/{noteId}`].get.parameters).toContainEqual(
    expect.objectContaining({ name: "noteId", in: "path", schema: { type: "integer", minimum: 1 } }),
  );
  expect(s.CreateNoteBody.properties).toHaveProperty("collectionName");
  expect(s.CreateNoteBody.properties.title).toEqual({ type: "string", nullable: true });
  expect(s.CreateNoteBody.properties).not.toHaveProperty("scope");
  // One security scheme, the published one, for every authenticated operation.
  expect(Object.keys(doc.components.securitySchemes)).toEqual(["bearerAuth"]);
  expect(doc.paths["/v1/runs/{runId}"].get.security).toEqual([{ bearerAuth: [] }]);
  const org = doc.paths["/v1/organization/admin-logs"].get;
  expect(org.parameters.map((p: any) => p.name)).not.toContain("projectName");
  expect(org.responses["200"].content["application/json"].schema.properties.parameters.properties).not.toHaveProperty("projectName");
  // The NDJSON export: the published items, and the signed digests as lines of their own.
  expect(org.responses["200"].content["application/x-ndjson"].schema).toEqual({
    oneOf: [{ $ref: "#/components/schemas/adminLog" }, { $ref: "#/components/schemas/LogDigestLine" }],
  });
  expect(s.LogDigestLine.properties.digest.required).toContain("signature");
  const keys = doc.paths["/v1/project/{projectName}/environment/{environmentName}/log-keys"].get;
  expect(keys.responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/ListLogKeysResponse" });
  expect(s.LogKey.properties).toMatchObject({ id: { type: "string" }, publicKey: { type: "string" }, current: { type: "boolean" } });
  const hook = doc.paths["/hooks/{key}"].post;
  expect(Object.keys(hook.responses).sort()).toEqual(["202", "400", "401", "403", "404", "409", "413", "429"]);
  expect(hook.parameters).toContainEqual(expect.objectContaining({ name: "Idempotency-Key", in: "header", required: false }));
  expect(hook.responses["202"].headers).toHaveProperty("Idempotent-Replayed");
  expect(s.WebhookAccepted).toMatchObject({ required: ["runId"], additionalProperties: false });
  expect(Object.keys(s.WebhookAccepted.properties)).toEqual(["runId"]);
});
