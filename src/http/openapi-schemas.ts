// The pieces of the OpenAPI document: JSON Schemas generated from the protobuf message
// descriptors (the REST bodies are the ProtoJSON of those messages, so they cannot drift
// from the implementation), and the request body and error answers every route shares.
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { MAX_JSON_DEPTH } from "../lib/json-depth.js";

export type Schema = Record<string, unknown>;

export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

/** The one extension that marks runhook's additions to the published document (`x-runhook-addition: true`). */
export const ADDITION = "x-runhook-addition";

/** This part of the document (an operation, parameter, header, media type, property or schema) marked as runhook's addition. */
export const addition = <T extends Schema>(part: T): T => ({ ...part, [ADDITION]: true });

/** The published document's security scheme, which every authenticated operation uses. */
export const BEARER: Schema[] = [{ bearerAuth: [] }];

/** Component name of a message: its name for runhook's own, the full name otherwise. */
export function nameOf(desc: DescMessage): string {
  return desc.typeName.startsWith("runhook.v1.") ? desc.typeName.slice("runhook.v1.".length) : desc.typeName.replace(/\./g, "_");
}

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int64", minimum: 0 };
    default:
      // 64-bit integers are strings in ProtoJSON.
      return { type: "string", format: "int64", pattern: "^-?[0-9]+$" };
  }
}

/** JSON Schemas of messages, collected into `schemas` by name as they are reached. */
export class SchemaBuilder {
  readonly schemas: Record<string, Schema> = {};

  messageRef(desc: DescMessage): Schema {
    switch (desc.typeName) {
      case "google.protobuf.Timestamp":
        return { type: "string", format: "date-time" };
      case "google.protobuf.Duration":
        return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" };
      case "google.protobuf.Struct":
        return { type: "object", additionalProperties: true };
      case "google.protobuf.Value":
        return {};
      case "google.protobuf.ListValue":
        return { type: "array" };
      case "google.protobuf.Empty":
        return { type: "object", additionalProperties: false };
    }
    const name = nameOf(desc);
    if (!this.schemas[name]) {
      this.schemas[name] = {}; // placeholder against recursion
      this.schemas[name] = this.response(desc);
    }
    return ref(name);
  }

  /** The message as an object schema; `omit` drops fields that the REST path carries elsewhere. */
  object(desc: DescMessage, omit: string[] = []): Schema {
    const properties: Record<string, Schema> = {};
    for (const f of desc.fields) if (!omit.includes(f.name)) properties[f.jsonName] = this.field(f);
    return { type: "object", properties };
  }

  /**
   * The message as the gateway answers it (ProtoJSON with implicit defaults emitted): fields
   * with implicit presence (plain scalars, enums, lists, maps) are always there; `optional`
   * scalars, messages and oneof members only when set; nothing else.
   */
  response(desc: DescMessage): Schema {
    const required = desc.fields
      .filter(
        (f) =>
          f.fieldKind === "list" ||
          f.fieldKind === "map" ||
          ((f.fieldKind === "scalar" || f.fieldKind === "enum") && !f.oneof && f.presence === FeatureSet_FieldPresence.IMPLICIT),
      )
      .map((f) => f.jsonName);
    return { ...this.object(desc), ...(required.length ? { required } : {}), additionalProperties: false };
  }

  field(f: DescField): Schema {
    switch (f.fieldKind) {
      case "scalar":
        return scalarSchema(f.scalar);
      case "enum":
        return { type: "string", enum: f.enum.values.map((v) => v.name) };
      case "message":
        return this.messageRef(f.message);
      case "list":
        return {
          type: "array",
          items:
            f.listKind === "scalar"
              ? scalarSchema(f.scalar)
              : f.listKind === "enum"
                ? { type: "string", enum: f.enum.values.map((v) => v.name) }
                : this.messageRef(f.message),
        };
      case "map":
        return {
          type: "object",
          additionalProperties:
            f.mapKind === "scalar"
              ? scalarSchema(f.scalar)
              : f.mapKind === "enum"
                ? { type: "string", enum: f.enum.values.map((v) => v.name) }
                : this.messageRef(f.message),
        };
    }
  }
}

/**
 * A JSON request body as the /v1 routes read it: required fields are non-empty strings; an
 * optional field may also be null, which counts as absent (ProtoJSON); unknown fields are ignored.
 */
export function requestBody(obj: Schema, required: string[]): Schema {
  const properties = obj.properties as Record<string, Schema>;
  for (const [name, p] of Object.entries(properties)) {
    if (required.includes(name)) properties[name] = { ...p, minLength: 1 };
    else properties[name] = { ...p, nullable: true };
  }
  return { ...obj, ...(required.length ? { required } : {}) };
}

export const json = (schema: Schema, example?: Schema): Schema => ({ "application/json": { schema, ...(example ? { example } : {}) } });

const BODY_NOTE =
  "Send `Content-Type: application/json` (parameters such as `; charset=utf-8` are fine, in any case; no Content-Type is read as JSON); any other media type is a 400.";

/** A required JSON request body with this schema. */
export const jsonBody = (schema: Schema, example?: Schema): Schema => ({ required: true, description: BODY_NOTE, content: json(schema, example) });

const ERROR_STATUS: Record<number, string> = {
  400: `Bad parameter or body (not JSON, a Content-Type other than application/json, JSON nested deeper than ${MAX_JSON_DEPTH} levels), a cursor issued for other filters (invalid_argument), or one into log entries removed by retention (failed_precondition)`,
  401: "Missing, expired, revoked or invalid bearer token",
  403: "Token of another project (or its creator is no longer a project admin)",
  404: "Unknown environment, note or run",
  409: "Conflict",
  413: "Request body too large",
  429: "Throttled: over a rate limit (on /v1, any of the token's windows, a minute, an hour or a day, whose budget its LogService, NoteService and RunService RPCs share; on a webhook, its requests per minute); wait Retry-After seconds, until the refusing window ends (apply exponential backoff)",
};

/** An example answer per status: the code and a message as the gateway gives them. */
const ERROR_EXAMPLE: Record<number, { code: string; message: string }> = {
  400: { code: "invalid_argument", message: 'limit must be a whole number from 1 to 1000, got "0"' },
  401: { code: "unauthenticated", message: "missing, expired or invalid bearer token" },
  403: { code: "permission_denied", message: "the token does not belong to this project" },
  404: { code: "not_found", message: 'unknown environment "staging"' },
  409: { code: "aborted", message: "the run kept changing; try again" },
  413: { code: "resource_exhausted", message: "request body larger than 262144 bytes" },
  429: { code: "resource_exhausted", message: "rate limit of 1000 requests per hour exceeded; retry after 1234 s" },
};

/** A JSON error answer with this description and example body. */
export const errorAnswer = (description: string, example: { code: string; message: string; runId?: string }): Schema => ({
  description,
  content: json(ref("Error"), { ...example, error: example.message }),
});

/** runhook's `error` of the error bodies, beside the published `code` and `message`. */
export const ERROR_PROPERTY: Schema = addition({
  type: "string",
  description: "The same message (the webhook's error bodies have always carried it as `error`)",
});

/** The body of every error answer of runhook's own operations. */
export const ERROR_SCHEMA: Schema = {
  type: "object",
  required: ["code", "message", "error"],
  properties: {
    code: { type: "string", description: "Connect error code, e.g. not_found, invalid_argument, resource_exhausted" },
    message: { type: "string", description: "Human-readable message" },
    error: ERROR_PROPERTY,
    runId: { type: "string", description: "The ongoing run (webhook 409 only)" },
  },
  additionalProperties: false,
};

const RETRY_AFTER_HEADER = { "Retry-After": { description: "Seconds to wait", schema: { type: "integer" } } };

/** `{code, message, error}` answers for these statuses, with these headers (and Retry-After on 429). */
export function errorResponses(codes: number[], headers?: Schema): Schema {
  const answer = (c: number): Schema => {
    const all = { ...(headers ?? {}), ...(c === 429 ? RETRY_AFTER_HEADER : {}) };
    return { ...errorAnswer(ERROR_STATUS[c]!, ERROR_EXAMPLE[c]!), ...(headers || c === 429 ? { headers: all } : {}) };
  };
  return Object.fromEntries(codes.map((c) => [String(c), answer(c)]));
}

/** A path parameter: a string unless its schema says more. */
export const pathParam = (name: string, description: string, schema: Schema = { type: "string" }): Schema => ({
  name,
  in: "path",
  required: true,
  description,
  schema,
});
