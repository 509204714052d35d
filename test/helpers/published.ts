// The published document (openapi/forest-public-api-1.38.0.json, Forest Admin's public API) as
// the tests read it: its operations, their parameters and enums, and validators of their answers.
// Its schemas are OpenAPI 3.0's, that is JSON Schema draft 4 (`exclusiveMinimum: true` beside
// `minimum`): they are checked by Ajv's draft-04 class (bundled with
// @seriousme/openapi-schema-validator), in strict mode, every error reported.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ajvDraft04, { type ValidateFunction } from "ajv-draft-04";
import ajvFormats from "ajv-formats";

const ROOT = resolve(import.meta.dirname, "../..");

type Json = any;

/** The document, as published (byte for byte). */
export const PUBLISHED: Json = JSON.parse(readFileSync(join(ROOT, "openapi/forest-public-api-1.38.0.json"), "utf8"));

export interface PublishedParam {
  name: string;
  in: "path" | "query";
  required: boolean;
  schema: Json;
}

export interface PublishedOperation {
  operationId: string;
  method: string;
  /** OpenAPI form (`{projectName}`). */
  path: string;
  params: PublishedParam[];
  /** The query parameters, in the document's order. */
  query: PublishedParam[];
  /** The 200 answer's schema, and the schemas of one item of its `data` and of its `parameters`. */
  ok: Json;
  item: Json;
  parameters: Json;
  /** The 4XX answer's schema. */
  clientError: Json;
}

const JSON_MEDIA = "application/json";

/** Every operation of the document. */
export const OPERATIONS: PublishedOperation[] = Object.entries(PUBLISHED.paths as Record<string, Record<string, Json>>).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => {
    const ok = op.responses["200"].content[JSON_MEDIA].schema;
    const params = op.parameters as PublishedParam[];
    return {
      operationId: op.operationId as string,
      method: method.toUpperCase(),
      path,
      params,
      query: params.filter((p) => p.in === "query"),
      ok,
      item: ok.properties.data.items,
      parameters: ok.properties.parameters,
      clientError: op.responses["4XX"].content[JSON_MEDIA].schema,
    };
  }),
);

export function operation(operationId: string): PublishedOperation {
  const op = OPERATIONS.find((o) => o.operationId === operationId);
  if (!op) throw new Error(`the published document has no operation ${operationId}`);
  return op;
}

/** The enum of a query parameter of an operation, as the document has it. */
export function publishedEnum(operationId: string, param: string): string[] {
  const values = operation(operationId).query.find((p) => p.name === param)?.schema.enum;
  if (!Array.isArray(values)) throw new Error(`${operationId}'s ${param} has no enum in the published document`);
  return values as string[];
}

// Both packages are CommonJS: their classes are the `default` of what Node's ESM import gives.
const ajv = new ajvDraft04.default({ strict: true, allErrors: true });
ajvFormats.default(ajv);

/** The document's components, reachable from every schema compiled alone (`#/components/schemas/x` → `#/definitions/x`). */
const local = (schema: Json): Json => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"#/definitions/'));
const DEFINITIONS = local(PUBLISHED.components.schemas);

const compiled = new Map<Json, ValidateFunction>();

/** Where `value` breaks `schema` (one of the document's), one line each; empty when it conforms. */
export function violations(schema: Json, value: unknown): string[] {
  const validate = compiled.get(schema) ?? ajv.compile({ ...local(schema), definitions: DEFINITIONS });
  compiled.set(schema, validate);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`);
}
