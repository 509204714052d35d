// Schemathesis runs the PUBLISHED document (openapi/forest-public-api-1.38.0.json, Forest
// Admin's public API, not runhook's /openapi.json) against a real server with the demo world,
// its workflow run on every record and notes with replies (test/helpers/published-world.ts):
// the three list operations, with the project API token, the path parameters fixed to the demo's
// project and environment, every query parameter generated, valid and invalid.
//
// Checks: not_a_server_error, status_code_conformance, content_type_conformance,
// response_headers_conformance and response_schema_conformance (the document's item schemas
// are closed: every field runhook answers must be one the document names, typed as it types
// it). Asserted from schemathesis's reports and the hook's line per response: no failure, no
// 5xx, every error body runhook's {code, message, error} (the document asks for code and
// message), and successes on each operation. One failure is accepted
// (test/schemathesis/published-baseline.json, schemathesis's baseline): the document's schema
// for `limit` contradicts its own description, and runhook follows the description (ACCEPTED).
//
// A second run goes through a server whose API limit is one request a minute, on the same
// database (the limit's buckets are there, already spent): its answers are 429s, which the
// document requires to carry Retry-After.
//
// Skipped without python3; schemathesis is installed as test/helpers/schemathesis.ts says.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUBLISHED_DOCUMENT, type PublishedWorld, seedPublishedWorld } from "../helpers/published-world.js";
import { byStatus, expectClean, type Run, runSchemathesis, schemathesisVenv } from "../helpers/schemathesis.js";
import { ROOT, startServer, type TestServer } from "../helpers/server.js";
import { hasPython } from "../helpers/venv.js";

const OPERATIONS = [
  "GET /v1/project/{projectName}/environment/{environmentName}/activity-logs",
  "GET /v1/project/{projectName}/admin-logs",
  "GET /v1/project/{projectName}/environment/{environmentName}/notes",
];
/**
 * The one failure accepted, on each operation: the document contradicts itself on `limit` (its
 * schema: more than 1; its description and runhook's contract: 1 to 100), so the answer to
 * limit=1 has parameters.limit = 1, which the document's response schema refuses.
 */
const ACCEPTED = join(ROOT, "test/schemathesis/published-baseline.json");
const CHECKS = ["not_a_server_error", "status_code_conformance", "content_type_conformance", "response_headers_conformance", "response_schema_conformance"];
/** Test cases per operation and phase (examples, coverage, fuzzing; the document has no links for a stateful phase). */
const MAX_EXAMPLES = 100;
/** Generated requests per operation when throttled (the fuzzing phase only: the coverage phase's hundreds would add nothing). */
const THROTTLED_MAX_EXAMPLES = 20;
const TIME_LIMIT_S = 240;
const SEEDS = { open: 20261, throttled: 20262 };

let venv: string;
let work: string;
let server: TestServer;
let world: PublishedWorld;

function published(name: string, target: TestServer, seed: number, more: { maxExamples: number; phases?: string[] }): Promise<Run> {
  return runSchemathesis({
    venv,
    work,
    name,
    location: PUBLISHED_DOCUMENT,
    baseUrl: target.baseUrl,
    token: world.apiToken,
    seed,
    ...more,
    timeLimitS: TIME_LIMIT_S,
    checks: CHECKS,
    baseline: ACCEPTED,
    config: ["[parameters]", `"path.projectName" = ${JSON.stringify(world.projectName)}`, `"path.environmentName" = ${JSON.stringify(world.environmentName)}`],
  });
}

function summary(name: string, run: Run): string {
  return `[schemathesis] published document, ${name}: ${run.report.test_cases.generated} test cases, ${run.calls.length} requests, statuses ${JSON.stringify(byStatus(run.calls))}, failures ${run.report.failures.length}`;
}

describe.skipIf(!hasPython())("schemathesis runs the published document against the server", () => {
  beforeAll(async () => {
    venv = await schemathesisVenv();
    work = mkdtempSync(join(tmpdir(), "runhook-schemathesis-published-"));
    // The per-token limits are out of reach (testEnv): the generated calls reach the handlers.
    server = await startServer();
    world = await seedPublishedWorld(server);
  }, 600_000);
  afterAll(async () => {
    await server?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("with the project API token: no 5xx, no schema violation, answers as the document says", { timeout: (TIME_LIMIT_S + 15) * 1000 }, async () => {
    const run = await published("open", server, SEEDS.open, { maxExamples: MAX_EXAMPLES });
    console.log(summary("open", run));
    expectClean(run);
    expect(run.report.operations.total).toBe(OPERATIONS.length);
    // The accepted failure was met on every operation (limit=1 is in the coverage phase), and nothing else.
    const accepted = (JSON.parse(readFileSync(ACCEPTED, "utf8")) as { entries: { id: string }[] }).entries.map((e) => e.id);
    expect(run.report.baseline).toMatchObject({ new: 0, known_ids: [...accepted].sort(), unobserved_ids: [] });
    // Past authentication and the project look-up, with answers that have items to check.
    for (const op of OPERATIONS) {
      expect(run.calls.filter((c) => c.op === op && c.status === 200).length, op).toBeGreaterThanOrEqual(MAX_EXAMPLES / 2);
    }
    expect(run.calls.filter((c) => c.status === 400).length).toBeGreaterThan(0);
  });

  it("throttled: every answer is a 429 with Retry-After, as the document requires", { timeout: (TIME_LIMIT_S + 15) * 1000 }, async () => {
    const limited = await startServer({ dbName: server.dbName, env: { RUNHOOK_API_RATE_LIMIT: "1", RUNHOOK_EXECUTOR: "false" } });
    try {
      const run = await published("throttled", limited, SEEDS.throttled, { maxExamples: THROTTLED_MAX_EXAMPLES, phases: ["fuzzing"] });
      console.log(summary("throttled", run));
      expectClean(run);
      // Requests without a valid token are refused before they count (401); a minute's window
      // may open during the run and let one request through.
      const throttled = run.calls.filter((c) => c.status === 429).length;
      const authenticated = run.calls.filter((c) => c.status !== 401).length;
      expect(throttled).toBeGreaterThanOrEqual(authenticated - 2);
      expect(throttled).toBeGreaterThanOrEqual(OPERATIONS.length * (THROTTLED_MAX_EXAMPLES / 2));
    } finally {
      await limited.stop();
    }
  });
});
