// Schemathesis (pinned, in a cached venv: test/helpers/venv.ts) run against a test server, and
// what the fuzz tests read back: its JSON and JUnit reports and the one line per response that
// test/schemathesis/hooks.py writes, never its console text.
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { ROOT } from "./server.js";
import { ensureVenv } from "./venv.js";

const VERSION = "4.32.5";
const REQUIREMENTS = [`schemathesis==${VERSION}`, "hypothesis==6.170.15"];

/** The venv with the pinned schemathesis (installed on first use, about 30 s). */
export function schemathesisVenv(): Promise<string> {
  return ensureVenv(`schemathesis-${VERSION}`, REQUIREMENTS, (m) => console.log(`[schemathesis] ${m}`));
}

/** One response, as the hook recorded it. */
export interface Call {
  op: string;
  status: number;
  ms: number;
  /** What is wrong with an error answer's body for runhook's own check, or null. */
  problem: string | null;
}

export interface Report {
  complete: boolean;
  exit_code: number;
  stop_reason: string;
  operations: { total: number; selected: number; tested: number; errored: number };
  test_cases: { generated: number; with_failures: number; errored: number };
  failures: { title: string; code: string; count: number; operations: string[] }[];
  errors: { title: string; count: number }[];
  /** With a baseline: the failures it accounts for (`known`), the others (`new`), and its entries no failure matched. */
  baseline?: { known: number; new: number; known_ids: string[]; unobserved_ids: string[] };
}

export interface Run {
  report: Report;
  junit: { tests: number; failures: number; errors: number };
  calls: Call[];
  output: string;
}

export interface RunOptions {
  venv: string;
  /** A directory of the test's own for the configuration, reports and the calls' log. */
  work: string;
  name: string;
  /** The document: a URL, or a file (then `baseUrl` says where the API is). */
  location: string;
  baseUrl?: string;
  token: string;
  seed: number;
  /** Test cases per operation and phase. */
  maxExamples: number;
  /**
   * Past this the run is stopped and the test fails. Not schemathesis's --max-time: that is a
   * budget its fuzzing and stateful phases repeat to fill, so the number of requests would
   * depend on the machine's speed.
   */
  timeLimitS: number;
  /** The configuration file's lines (TOML). */
  config: string[];
  /** Only these checks (built-in ones; runhook's own check then does not run); default all but those the configuration disables. */
  checks?: string[];
  /** Only these phases (examples, coverage, fuzzing, stateful); default all. */
  phases?: string[];
  /** The failures accepted (schemathesis's baseline file: each entry an operation, a check and where the answer failed it). */
  baseline?: string;
}

/** Runs schemathesis once; exit code 1 ("failures found") is not an error here: the reports say which. */
export async function runSchemathesis(o: RunOptions): Promise<Run> {
  const dir = join(o.work, o.name);
  const config = join(o.work, `${o.name}.toml`);
  const log = join(o.work, `${o.name}.calls.ndjson`);
  writeFileSync(config, o.config.join("\n"));
  const args = [
    "--config-file",
    config,
    "run",
    o.location,
    ...(o.baseUrl ? ["--url", o.baseUrl] : []),
    ...(o.checks ? ["--checks", o.checks.join(",")] : []),
    ...(o.baseline ? ["--baseline", o.baseline] : []),
    ...(o.phases ? ["--phases", o.phases.join(",")] : []),
    "--header",
    `Authorization: Bearer ${o.token}`,
    "--max-examples",
    String(o.maxExamples),
    "--seed",
    String(o.seed),
    "--request-timeout",
    "20",
    "--generation-database",
    "none",
    "--report",
    "json,junit",
    "--report-json-path",
    join(dir, "report.json"),
    "--report-junit-path",
    join(dir, "junit.xml"),
    "--no-color",
  ];
  const env = {
    ...process.env,
    SCHEMATHESIS_HOOKS: join(ROOT, "test/schemathesis/hooks.py"),
    RUNHOOK_ST_LOG: log,
    PYTHONDONTWRITEBYTECODE: "1",
    NO_COLOR: "1",
  };
  const limitMs = o.timeLimitS * 1000;
  const output = await new Promise<string>((resolve, reject) =>
    execFile(join(o.venv, "bin", "schemathesis"), args, { cwd: o.work, env, maxBuffer: 64 << 20, timeout: limitMs }, (err, stdout, stderr) => {
      if (err?.killed) reject(new Error(`schemathesis took longer than ${o.timeLimitS} s and was stopped:\n${stdout.slice(-3000)}`));
      else if (err && typeof err.code !== "number") reject(new Error(`schemathesis did not run: ${err.message}\n${stderr}`));
      else resolve(`${stdout}\n${stderr}`);
    }),
  );
  let report: Report;
  try {
    report = JSON.parse(readFileSync(join(dir, "report.json"), "utf8")) as Report;
  } catch {
    throw new Error(`schemathesis wrote no JSON report:\n${output.slice(-3000)}`);
  }
  const xml = readFileSync(join(dir, "junit.xml"), "utf8");
  const count = (re: RegExp) => (xml.match(re) ?? []).length;
  const junit = { tests: count(/<testcase\b/g), failures: count(/<failure\b/g), errors: count(/<error\b/g) };
  const calls = readFileSync(log, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Call);
  const slow = [...calls].sort((a, b) => b.ms - a.ms).slice(0, 3);
  console.log(`[schemathesis] ${o.name}: slowest answers ${slow.map((c) => `${c.op} ${c.status} ${c.ms} ms`).join("; ")}`);
  return { report, junit, calls, output };
}

/** The report's verdict, with what failed spelled out when it did; and no 5xx in our own record of every response. */
export function expectClean(run: Run, opts: { errorBodies: boolean } = { errorBodies: true }) {
  const failed = run.report.failures.map((f) => `${f.code} ${f.title} ×${f.count}: ${f.operations.join(", ")}`);
  const context = `${failed.join("\n")}\n${run.report.errors.map((e) => e.title).join("\n")}\n${run.output.slice(-6000)}`;
  expect(run.report.failures, context).toEqual([]);
  expect(run.report.errors, context).toEqual([]);
  expect(run.report.operations.errored).toBe(0);
  expect(run.report.operations.tested).toBe(run.report.operations.total);
  expect(run.report.test_cases.with_failures).toBe(0);
  expect(run.junit.tests).toBeGreaterThanOrEqual(run.report.operations.total);
  expect({ failures: run.junit.failures, errors: run.junit.errors }, context).toEqual({ failures: 0, errors: 0 });
  expect(run.calls.filter((c) => c.status >= 500)).toEqual([]);
  if (opts.errorBodies) expect(run.calls.filter((c) => c.problem !== null)).toEqual([]);
}

/** How many responses had each status. */
export const byStatus = (calls: Call[]) =>
  calls.reduce<Record<string, number>>((m, c) => {
    m[c.status] = (m[c.status] ?? 0) + 1;
    return m;
  }, {});
