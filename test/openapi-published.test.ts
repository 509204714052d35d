// GET /openapi.json is the published document (openapi/forest-public-api-1.38.0.json, kept
// byte for byte as published) plus runhook's additions, each marked `x-runhook-addition: true`.
// Removing the marked parts gives back every published path, operation, parameter, answer,
// header and schema exactly (anything else that differs fails, with where); the published
// operations take the published query parameters and the marked ones, and the server's strict
// query parser accepts exactly the query parameters each operation documents.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADDITION } from "../src/http/openapi-schemas.js";
import { API_ROUTES } from "../src/http/routes.js";
import { apiClient } from "./helpers/api.js";
import { ROOT, startServer, type TestServer, uuid } from "./helpers/server.js";
import { adminClient } from "./helpers/webhook.js";
import { createWorld, type World } from "../fixtures/world.js";

const COMMITTED = join(ROOT, "openapi", "forest-public-api-1.38.0.json");
/** The copy the project was given, beside the repository (absent on a clean clone). */
const SHARED = resolve(ROOT, "..", "shared", "spec", "forest-public-api-1.38.0.json");
/** SHA-256 of the document as published. */
const PUBLISHED_SHA256 = "3e9126052519c2f717e14edb60658012e5e4999358de6e12c0d9353f17d2d703";

const published = JSON.parse(readFileSync(COMMITTED, "utf8"));

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const marked = (v: unknown) => isObject(v) && v[ADDITION] === true;
/** runhook's part: marked, or a map or list (headers, parameters, tags) made only of marked parts. */
const addedPart = (v: unknown) => marked(v) || ((isObject(v) || Array.isArray(v)) && Object.values(v).length > 0 && Object.values(v).every(marked));

/** A parameter's identity: where it goes and its name. */
const parameterKey = (p: unknown) => (isObject(p) && typeof p.name === "string" && typeof p.in === "string" ? `${p.in} ${p.name}` : undefined);
const byParameterKey = (list: unknown[]) => Object.fromEntries(list.map((p) => [String(parameterKey(p)), p]));

/**
 * Where `served` differs from `published` once runhook's marked additions are removed: a
 * published part missing, changed or marked as an addition; an unmarked part added.
 * Parameters are compared by location and name, other lists item by item (marked items left out).
 */
function differences(pub: unknown, served: unknown, at: string): string[] {
  if (Array.isArray(pub) && Array.isArray(served) && pub.length > 0 && pub.every(parameterKey)) {
    return differences(byParameterKey(pub), byParameterKey(served), at);
  }
  if (Array.isArray(pub) && Array.isArray(served)) {
    const kept = served.filter((item) => !marked(item));
    if (kept.length !== pub.length) return [`${at}: ${kept.length} unmarked items, published ${pub.length}`];
    return pub.flatMap((item, i) => differences(item, kept[i], `${at}/${i}`));
  }
  if (isObject(pub) && isObject(served)) {
    if (marked(served)) return [`${at}: published, but marked as an addition`];
    return [...new Set([...Object.keys(pub), ...Object.keys(served)])].flatMap((key) => {
      const where = `${at}/${key}`;
      if (!(key in served)) return [`${where}: missing`];
      if (!(key in pub)) return addedPart(served[key]) ? [] : [`${where}: added without ${ADDITION}`];
      return differences(pub[key], served[key], where);
    });
  }
  return Object.is(pub, served) ? [] : [`${at}: ${JSON.stringify(served)?.slice(0, 200)}, published ${JSON.stringify(pub)?.slice(0, 200)}`];
}

/** Every difference of a whole served document: its paths, components and tags (info and servers are runhook's). */
const documentDifferences = (doc: any) => ["paths", "components", "tags"].flatMap((part) => differences(published[part], doc[part], part));

const PUBLIC_BASE_URL = "https://runhook.example.test/base";

let server: TestServer;
let doc: any;
beforeAll(async () => {
  server = await startServer({ env: { RUNHOOK_EXECUTOR: "false", PUBLIC_BASE_URL } });
  const res = await server.gateway.inject({ method: "GET", url: "/openapi.json" });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});
afterAll(async () => server?.stop());

describe("the committed published document", () => {
  it("is the document as published (its SHA-256)", () => {
    expect(createHash("sha256").update(readFileSync(COMMITTED)).digest("hex")).toBe(PUBLISHED_SHA256);
    expect(published.openapi).toBe("3.0.0");
    expect(published.info).toEqual({ title: "Forest Admin public API", version: "1.38.0" });
  });

  it.skipIf(!existsSync(SHARED))("is byte-identical to ../shared/spec's copy", () => {
    expect(readFileSync(COMMITTED).equals(readFileSync(SHARED))).toBe(true);
  });
});

describe("GET /openapi.json", () => {
  it("is OpenAPI 3.0.3 with runhook's info and servers, and says which extension marks the additions", () => {
    expect(Object.keys(doc).sort()).toEqual(["components", "info", "openapi", "paths", "servers", "tags"]);
    expect(doc.openapi).toBe("3.0.3");
    expect(doc.servers).toEqual([{ url: PUBLIC_BASE_URL }]);
    expect(doc.info.description).toContain(`${ADDITION}: true`);
    expect(doc.info.description).toContain("1.38.0");
  });

  it("is the published document once the marked additions are removed", () => {
    expect(documentDifferences(doc)).toEqual([]);
  });

  it("marks the additions the contract names on each published operation", () => {
    const lists = Object.entries(published.paths).map(([path, ops]: [string, any]) => [path, Object.keys(ops)] as const);
    expect(lists.map(([path, methods]) => `${methods} ${path}`)).toEqual([
      "get /v1/project/{projectName}/environment/{environmentName}/activity-logs",
      "get /v1/project/{projectName}/admin-logs",
      "get /v1/project/{projectName}/environment/{environmentName}/notes",
    ]);
    for (const [path] of lists) {
      const op = doc.paths[path].get;
      const added = op.parameters.filter(marked).map((p: any) => p.name);
      expect(added, path).toEqual(path.endsWith("/activity-logs") ? ["cursor", "order", "runId"] : ["cursor", "order"]);
      const ok = op.responses["200"];
      expect(ok.content["application/json"].schema.properties.nextCursor, path).toMatchObject({ type: "string", [ADDITION]: true });
      expect(ok.headers["X-RateLimit-Remaining"], path).toMatchObject({ [ADDITION]: true });
      for (const code of ["429", "4XX", "5XX"]) {
        expect(op.responses[code].content["application/json"].schema.properties.error, `${path} ${code}`).toMatchObject({ type: "string", [ADDITION]: true });
        expect(op.responses[code].headers["X-RateLimit-Limit"], `${path} ${code}`).toMatchObject({ [ADDITION]: true });
      }
      expect(op.responses["429"].headers["Retry-After"]).toEqual(published.paths[path].get.responses["429"].headers["Retry-After"]);
      const exported = !path.endsWith("/notes");
      const lines = { oneOf: [{ $ref: expect.any(String) }, { $ref: "#/components/schemas/LogDigestLine" }] };
      expect(ok.content["application/x-ndjson"], path).toEqual(exported ? { schema: lines, [ADDITION]: true } : undefined);
      if (exported) {
        // Each NDJSON line is a published item, exactly, or a digest (a line of runhook's own).
        const line = ok.content["application/x-ndjson"].schema.oneOf[0].$ref.replace("#/components/schemas/", "");
        const { [ADDITION]: _, ...item } = doc.components.schemas[line];
        expect(item).toEqual(published.paths[path].get.responses["200"].content["application/json"].schema.properties.data.items);
      }
    }
    // Every operation of runhook's own is marked as a whole.
    const own = Object.entries(doc.paths).flatMap(([path, ops]: [string, any]) =>
      Object.entries(ops)
        .filter(([method]) => !published.paths[path]?.[method])
        .map(([, op]) => op as any),
    );
    expect(own.length).toBeGreaterThan(10);
    for (const op of own) expect(op, op.operationId).toHaveProperty(ADDITION, true);
  });

  it("would show a difference that is not a marked addition", () => {
    const path = "/v1/project/{projectName}/environment/{environmentName}/activity-logs";
    const mutations: [string, (d: any) => void][] = [
      ["a published enum changed", (d) => d.paths[path].get.parameters.find((p: any) => p.name === "action").schema.enum.pop()],
      ["a published parameter marked", (d) => (d.paths[path].get.parameters[2][ADDITION] = true)],
      ["a published parameter removed", (d) => d.paths[path].get.parameters.splice(3, 1)],
      ["an unmarked parameter added", (d) => d.paths[path].get.parameters.push({ name: "from", in: "query", schema: { type: "string" } })],
      [
        "additionalProperties dropped",
        (d) => delete d.paths[path].get.responses["200"].content["application/json"].schema.properties.data.items.additionalProperties,
      ],
      ["an unmarked property added", (d) => (d.paths[path].get.responses["4XX"].content["application/json"].schema.properties.runId = { type: "string" })],
      ["an unmarked header added", (d) => (d.paths[path].get.responses["200"].headers["X-Other"] = { schema: { type: "string" } })],
      ["a published schema changed", (d) => (d.components.schemas.team.properties.name.minLength = 0)],
      ["an unmarked operation added", (d) => delete d.paths["/v1/runs/{runId}"].get[ADDITION]],
      ["an unmarked component added", (d) => delete d.components.schemas.Run[ADDITION]],
    ];
    for (const [what, mutate] of mutations) {
      const copy = structuredClone(doc);
      mutate(copy);
      expect(documentDifferences(copy).length, what).toBeGreaterThan(0);
    }
  });

  it("documents for each /v1 route exactly the query parameters of its table entry: for the published ones, the published and the marked", () => {
    for (const r of API_ROUTES) {
      const op = doc.paths[r.path][r.method.toLowerCase()];
      const query = op.parameters.filter((p: any) => p.in === "query");
      const at = `${r.method} ${r.path}`;
      expect(
        query.map((p: any) => p.name),
        at,
      ).toEqual((r.query ?? []).map((q) => q.name));
      const pub = published.paths[r.path]?.[r.method.toLowerCase()];
      if (!pub) continue;
      expect(query.filter((p: any) => !marked(p)).map((p: any) => p.name)).toEqual(pub.parameters.filter((p: any) => p.in === "query").map((p: any) => p.name));
      expect(query.filter(marked).map((p: any) => p.name)).toEqual((r.query ?? []).filter((q) => q.addition).map((q) => q.name));
    }
  });
});

describe("the server's strict query parser", () => {
  let w: World;
  let orgToken: string;
  beforeAll(async () => {
    w = await createWorld(server);
    orgToken = (await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "openapi" })).plaintext;
  });

  it("accepts exactly the query parameters each /v1 operation documents (an unknown one is a 400 that lists them)", async () => {
    const values: Record<string, string> = { projectName: w.projectName, environmentName: w.environmentName, noteId: "1", runId: uuid() };
    const strict = API_ROUTES.filter((r) => !r.lenientQuery);
    expect(strict.length).toBeGreaterThan(8);
    for (const r of strict) {
      const url = r.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(values[name]!));
      const token = r.path.startsWith("/v1/organization/") ? orgToken : w.apiToken;
      const res = await apiClient(server.gateway, token).call(r.method, `${url}?notDocumented=1`);
      const at = `${r.method} ${r.path}`;
      expect(res.status, at).toBe(400);
      expect(res.body.message, at).toMatch(/^unknown query parameter "notDocumented" \(allowed: .*\)$/);
      const allowed = /\(allowed: (.*)\)$/.exec(res.body.message)![1]!.split(", ").filter(Boolean);
      const documented = doc.paths[r.path][r.method.toLowerCase()].parameters.filter((p: any) => p.in === "query").map((p: any) => p.name);
      expect(allowed, at).toEqual(documented);
    }
  });
});
