// Schemathesis (property-based HTTP testing from the OpenAPI document) against the real
// server: GET /openapi.json drives over a thousand generated requests to every documented
// operation, once with a valid project API token and once with an invalid one.
//
// Asserted, from schemathesis's JSON and JUnit reports and from one line per response that
// our hook writes (test/schemathesis/hooks.py), never from its console text:
// - no answer with a status of 500 or more (check `not_a_server_error`);
// - every error answer is exactly {code, message, error} (+ runId on 409), the code matching
//   the status (our check `runhook_error_body`);
// - the answers conform to the document: status codes, content types, headers and bodies
//   (`status_code_conformance`, `content_type_conformance`, `response_headers_conformance`,
//   `response_schema_conformance` — the response schemas are closed and name the fields
//   ProtoJSON always emits), schema-invalid requests are refused (`negative_data_rejection`),
//   requests without the token are refused (`missing_required_header`, `ignored_auth`),
//   and deleted notes stay deleted (`use_after_free`, `ensure_resource_availability`);
// - with the invalid token no /v1 operation and no webhook call ever succeeds.
//
// Not used, with the reason:
// - `positive_data_acceptance`: "schema-valid" is not "acceptable" for values that are
//   signed or opaque (webhook keys, cursors), exist only in the database (collections), or
//   relate to each other (`from` after `to`); a document cannot say that.
// - `unsupported_method`: a method a path does not serve answers 404 (as does a path that
//   matches no route), not 405.
// - `missing_required_header` on the webhook: its key is checked before the token, so a
//   missing token behind a malformed key is a 400 (the key is checked first), not a 401.
//
// Schemathesis is installed from PyPI, pinned, into a cached venv on first use (about
// 30 s); the file is skipped without python3.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildOpenApi } from "../../src/http/openapi.js";
import { parseRfc3339, parseWait } from "../../src/http/params.js";
import { MAX_WAIT_SECONDS } from "../../src/services/runs.js";
import { apiClient } from "../helpers/api.js";
import { queueRun, waitForRun } from "../helpers/runs.js";
import { byStatus, expectClean, type Run, runSchemathesis, schemathesisVenv } from "../helpers/schemathesis.js";
import { startServer, type TestServer } from "../helpers/server.js";
import { hasPython } from "../helpers/venv.js";
import { adminClient, local } from "../helpers/webhook.js";
import { createWorld, type World } from "../../fixtures/world.js";

/** Per operation and phase (13 operations; coverage, fuzzing and stateful phases): about 900 requests a run. */
const MAX_EXAMPLES = 25;
/** The time limit of each run: it takes 15–30 s on a 2-core machine (up to about 60 s while another test file loads both cores). */
const TIME_LIMIT_S = 150;
const SEEDS = { valid: 20251, invalid: 20252 };

let server: TestServer;
let w: World;
let venv: string;
let work: string;
let dict: { noteId: string; runId: string; key: string };

function schemathesis(name: string, token: string, seed: number, extraToml = ""): Promise<Run> {
  return runSchemathesis({
    venv,
    work,
    name,
    location: `${server.baseUrl}/openapi.json`,
    token,
    seed,
    maxExamples: MAX_EXAMPLES,
    timeLimitS: TIME_LIMIT_S,
    config: [
      // Real identifiers most of the time, so that requests reach the handlers past the
      // project / note / webhook look-ups; generated ones the rest of the time.
      "[dictionaries]",
      `projectName = { values = [${JSON.stringify(w.projectName)}] }`,
      `environmentName = { values = [${JSON.stringify(w.environmentName)}] }`,
      `noteId = { values = [${JSON.stringify(dict.noteId)}] }`,
      `runId = { values = [${JSON.stringify(dict.runId)}] }`,
      `key = { values = [${JSON.stringify(dict.key)}] }`,
      `collection = { values = [${JSON.stringify(w.collection)}] }`,
      "",
      "[parameters]",
      `"path.projectName" = { dictionary = "projectName", probability = 0.8 }`,
      `"path.environmentName" = { dictionary = "environmentName", probability = 0.8 }`,
      `"path.noteId" = { dictionary = "noteId", probability = 0.5 }`,
      `"path.runId" = { dictionary = "runId", probability = 0.5 }`,
      `"path.key" = { dictionary = "key", probability = 0.5 }`,
      `"body.collection" = { dictionary = "collection", probability = 0.8 }`,
      "",
      "[checks]",
      "positive_data_acceptance.enabled = false",
      "unsupported_method.enabled = false",
      "",
      "[[operations]]",
      `include-operation-id = "triggerWebhook"`,
      "checks.missing_required_header.enabled = false",
      extraToml,
    ],
  });
}

const runs: Partial<Record<keyof typeof SEEDS, Run>> = {};

describe.skipIf(!hasPython())("schemathesis against GET /openapi.json", () => {
  beforeAll(async () => {
    venv = await schemathesisVenv();
    work = mkdtempSync(join(tmpdir(), "runhook-schemathesis-"));
    // The per-token limits are out of reach (testEnv), so that a thousand calls reach the handlers rather than 429.
    server = await startServer();
    w = await createWorld(server, { steps: [{ type: "load_record" }] });
    await server.deps.store.directory.workflows.setWebhookRateLimit(w.orgId, w.workflowId, 1_000_000);
    const note = await apiClient(server.baseUrl, w.apiToken).post(`/v1/project/${w.projectName}/environment/${w.environmentName}/notes`, {
      collection: w.collection,
      recordId: "r1",
      content: "<p>first</p>",
    });
    expect(note.status).toBe(201);
    const run = await queueRun(server.deps.store, w, "r1");
    await waitForRun(server.deps.store, run._id); // finished: a long-poll on it answers at once
    const wf = await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
    const url = local(wf.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl);
    dict = { noteId: note.body.id, runId: run._id, key: url.slice(url.lastIndexOf("/") + 1) };
  }, 600_000);
  afterAll(async () => {
    await server?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("with a valid project API token: no 5xx, {code, message, error} errors, answers as documented", { timeout: (TIME_LIMIT_S + 15) * 1000 }, async () => {
    // The webhook takes an application token: the user's, so that its bodies are parsed too.
    const run = await schemathesis("valid", w.apiToken, SEEDS.valid, `headers = { Authorization = ${JSON.stringify(`Bearer ${w.userToken}`)} }`);
    runs.valid = run;
    console.log(
      `[schemathesis] valid token: ${run.calls.length} requests, ${run.report.test_cases.generated} test cases, statuses ${JSON.stringify(byStatus(run.calls))}`,
    );
    expectClean(run);
    // It got past authentication and the look-ups: successes on the main operations.
    const succeeded = new Set(run.calls.filter((c) => c.status < 300).map((c) => c.op));
    for (const op of [
      "GET /v1/project/{projectName}/environment/{environmentName}/activity-logs",
      "GET /v1/project/{projectName}/admin-logs",
      "GET /v1/project/{projectName}/environment/{environmentName}/notes",
      "POST /v1/project/{projectName}/environment/{environmentName}/notes",
      "GET /v1/project/{projectName}/environment/{environmentName}/notes/{noteId}",
      "PATCH /v1/project/{projectName}/environment/{environmentName}/notes/{noteId}",
      "POST /v1/project/{projectName}/environment/{environmentName}/notes/{noteId}/messages",
      "GET /v1/runs/{runId}",
      "POST /hooks/{key}",
    ]) {
      expect(succeeded, op).toContain(op);
    }
    await expect(fetch(`${server.baseUrl}/healthz`).then((r) => r.status)).resolves.toBe(200);
  });

  it("with an invalid token: the same, and nothing ever succeeds", { timeout: (TIME_LIMIT_S + 15) * 1000 }, async () => {
    const run = await schemathesis("invalid", "rh_api_00000000000000000000000000000000_not-a-real-token", SEEDS.invalid);
    runs.invalid = run;
    console.log(
      `[schemathesis] invalid token: ${run.calls.length} requests, ${run.report.test_cases.generated} test cases, statuses ${JSON.stringify(byStatus(run.calls))}`,
    );
    expectClean(run);
    const open = new Set(["GET /healthz", "GET /readyz", "GET /openapi.json", "GET /docs"]);
    expect(run.calls.filter((c) => c.status < 300 && !open.has(c.op))).toEqual([]);
    expect(run.calls.filter((c) => c.status === 401).length).toBeGreaterThan(run.calls.length / 3);
    await expect(fetch(`${server.baseUrl}/healthz`).then((r) => r.status)).resolves.toBe(200);
  });

  it("sent at least 1,000 generated requests in all", () => {
    const total = (runs.valid?.calls.length ?? 0) + (runs.invalid?.calls.length ?? 0);
    console.log(`[schemathesis] ${total} requests in all`);
    expect(total).toBeGreaterThanOrEqual(1000);
  });
});

// What negative_data_rejection relies on, checked exhaustively where a generator might miss:
// the document's patterns admit exactly what the server parses.
describe("the OpenAPI document describes the parameters as the server parses them", () => {
  const doc = buildOpenApi() as { paths: Record<string, Record<string, { parameters: { name: string; schema: Record<string, unknown> }[] }>> };
  const param = (path: string, name: string) => doc.paths[path]!.get!.parameters.find((p) => p.name === name)!.schema;

  it("wait: empty, or at most 60 s in seconds, ms or minutes, in up to 6 digits", () => {
    const pattern = new RegExp(param("/v1/runs/{runId}", "wait").pattern as string);
    const candidates = [""];
    for (let n = 0; n <= 70; n++) for (const unit of ["", "s", "m", "ms"]) candidates.push(`${n}${unit}`, `0${n}${unit}`, `0000${n}${unit}`);
    for (const n of [999, 1000, 1001, 59_999, 60_000, 60_001, 60_999, 61_000, 99_999, 100_000, 999_999]) candidates.push(`${n}ms`, `0${n}ms`, `${n}`, `${n}s`);
    candidates.push("0000000", "0000001s", "1h", "-1", "+1", " 1", "1 ", "1.5s", "1e1", "s", "ms", "60S", "١");
    for (const c of candidates) {
      const seconds = parseWait(c);
      const accepted = c === "" || (seconds !== undefined && seconds <= MAX_WAIT_SECONDS);
      expect(pattern.test(c), JSON.stringify(c)).toBe(accepted);
    }
  });

  it("from / to: RFC 3339 with at most 9 fractional digits and real dates, or empty", () => {
    const schema = param("/v1/project/{projectName}/environment/{environmentName}/runs", "from") as {
      anyOf: { pattern?: string; format?: string; maxLength?: number }[];
    };
    const pattern = new RegExp(schema.anyOf.find((s) => s.pattern)!.pattern!);
    expect(schema.anyOf.find((s) => s.pattern)!.format).toBe("date-time");
    expect(schema.anyOf.find((s) => s.maxLength === 0)).toBeDefined();
    const cases: [string, boolean][] = [
      ["2025-01-31T12:00:00Z", true],
      ["2025-01-31t12:00:00z", true],
      ["2025-01-31T12:00:00.123456789+14:00", true],
      ["2024-02-29T00:00:00-23:59", true],
      ["0000-01-01T00:00:00Z", true],
      ["2025-01-31T12:00:00.1234567890Z", false],
      ["2025-02-29T00:00:00Z", false],
      ["2025-02-30T00:00:00Z", false],
      ["2025-04-31T00:00:00Z", false],
      ["2025-13-01T00:00:00Z", false],
      ["2025-00-01T00:00:00Z", false],
      ["2025-01-00T00:00:00Z", false],
      ["2025-01-01T24:00:00Z", false],
      ["2025-01-01T23:60:00Z", false],
      ["2025-01-01T23:59:60Z", false],
      ["2025-01-01T00:00:00+24:00", false],
      ["2025-01-01T00:00:00+00:60", false],
      ["2025-01-01T00:00:00", false],
      ["2025-01-01 00:00:00Z", false],
      ["2025-01-01T00:00Z", false],
      ["2025-01-01T00:00:00+0100", false],
    ];
    for (const [s, ok] of cases) {
      expect(parseRfc3339(s) !== undefined, s).toBe(ok);
      // The pattern alone admits every accepted value (the format refuses the impossible dates).
      if (ok) expect(pattern.test(s), s).toBe(true);
    }
    expect(parseRfc3339("2025-01-31T12:00:00.5+02:30")?.toISOString()).toBe("2025-01-31T09:30:00.500Z");
    expect(parseRfc3339("0050-03-01T00:00:00Z")?.toISOString()).toBe("0050-03-01T00:00:00.000Z");
  });
});
