// A fuzzer for webhook bodies: with a valid URL and token (so every body reaches the body
// check, step 6 of the check order), thousands of generated bodies — random bytes, huge
// numbers, unicode (lone surrogates, RTL, emoji), NUL bytes, deep nesting, duplicate keys,
// long record ids, record_id of every JSON type. Every answer must be 202 {runId} or a 4xx
// {code, message, error} (+ runId on 409), agree with a model of the body rules, and the server must
// still serve afterwards.
//
// The generator is a seeded PRNG: a failure names its seed and case, and
// `RUNHOOK_FUZZ_SEED=<seed> npm run test:fuzz -- test/fuzz/webhook-fuzz.test.ts` replays it
// (`RUNHOOK_FUZZ_CASES` changes the number of random cases).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storeFixtures } from "../../src/store/index.js";
import { MAX_JSON_DEPTH } from "../../src/lib/json-depth.js";
import { waitForRun } from "../helpers/runs.js";
import { startServer, type TestServer } from "../helpers/server.js";
import { adminClient, local, postHook, UUID_RE } from "../helpers/webhook.js";
import { createWorld, type World } from "../../fixtures/world.js";
import { prng, type Rng } from "../helpers/prng.js";

const SEED = Number(process.env.RUNHOOK_FUZZ_SEED ?? 0x5eed_2025);
const CASES = Number(process.env.RUNHOOK_FUZZ_CASES ?? 3000);
const CONCURRENCY = 8;
/** Random cases stop being sent after this long (a loaded machine runs fewer; each case is named by its index). */
const DEADLINE_MS = 60_000;
const MAX_RECORD_ID = 1024;

// ------------------------------------------------------------------ generators

const ODD_STRINGS = [
  "\u202Eevil\u202C", // RTL override
  "\u05E9\u05DC\u05D5\u05DD", // Hebrew
  "\u0645\u0631\u062D\u0628\u0627", // Arabic
  "\u{1F600}\u{1F469}\u200D\u{1F4BB}\u{1F1FA}\u{1F1F8}", // emoji, ZWJ sequence, flag
  "e\u0301\u0301\u0301", // combining marks
  "\uFEFF", // BOM
  "\u0000", // NUL
  "a\u0000b",
  "\u2028\u2029", // line and paragraph separators
  "\uFFFF\uFFFE",
  "\u{10FFFF}",
  "\\",
  '"',
  "a\\|b|c",
  "__proto__",
  "constructor",
  " ",
  "\t\n\r",
];

/** A JSON string literal as a raw-text fragment, with some characters escaped in odd ways. */
function jsonString(r: Rng, s: string): string {
  let out = JSON.stringify(s);
  if (r.chance(0.3)) out = out.replace(/[a-z]/g, (c) => (r.chance(0.3) ? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}` : c));
  return out;
}

const LONE_SURROGATES = ['"\\ud800"', '"\\udfff"', '"a\\ud83d"', '"\\ude00b"', '"\\udc00\\ud800"'];

function randomString(r: Rng): string {
  switch (r.int(5)) {
    case 0:
      return r.pick(ODD_STRINGS);
    case 1:
      return Array.from({ length: r.int(12) }, () => String.fromCodePoint(r.int(0x80))).join("");
    case 2:
      return Array.from({ length: r.int(8) }, () => String.fromCodePoint(r.chance(0.5) ? r.int(0xd800) : 0xe000 + r.int(0x10ffff - 0xe000))).join("");
    case 3:
      return `r${r.int(1_000_000)}`;
    default:
      return `${r.pick(ODD_STRINGS)}r${r.int(1000)}${r.pick(ODD_STRINGS)}`;
  }
}

const HUGE_NUMBERS = [
  "1e400",
  "-1e400",
  "1e-400",
  "4".repeat(400),
  `-${"9".repeat(400)}`,
  `0.${"1".repeat(400)}`,
  "1E+308",
  "-0",
  "0e0",
  "123456789012345678901234567890",
];

/** A random JSON value as raw text (so that numbers, escapes and duplicates are exactly as written), with its nesting depth. */
function jsonValue(r: Rng, depth: number): { text: string; depth: number } {
  const k = depth > 6 ? r.int(4) : r.int(7);
  switch (k) {
    case 0:
      return { text: r.pick(["null", "true", "false"]), depth: 0 };
    case 1:
      return { text: r.chance(0.5) ? r.pick(HUGE_NUMBERS) : String(r.int(1e6) - 5e5), depth: 0 };
    case 2:
      return { text: r.chance(0.1) ? r.pick(LONE_SURROGATES) : jsonString(r, randomString(r)), depth: 0 };
    case 3:
      return { text: jsonString(r, r.pick(ODD_STRINGS)), depth: 0 };
    case 4: {
      const items = Array.from({ length: r.int(4) }, () => jsonValue(r, depth + 1));
      return { text: `[${items.map((i) => i.text).join(",")}]`, depth: 1 + Math.max(0, ...items.map((i) => i.depth)) };
    }
    default: {
      const members = Array.from({ length: r.int(4) }, () => ({
        key: r.chance(0.2) ? r.pick(['"record_id"', '"rec\\u0000ord_id"', '"\\u0000"', '"__proto__"']) : jsonString(r, randomString(r)),
        value: jsonValue(r, depth + 1),
      }));
      return { text: `{${members.map((m) => `${m.key}:${m.value.text}`).join(",")}}`, depth: 1 + Math.max(0, ...members.map((m) => m.value.depth)) };
    }
  }
}

interface Case {
  name: string;
  body: Buffer;
  contentType?: string | null;
}

/** One random body. */
function randomCase(r: Rng, i: number, recordFresh: () => string): Case {
  const name = `random #${i}`;
  const text = (s: string): Case => ({ name, body: Buffer.from(s, "utf8") });
  switch (r.int(10)) {
    case 0: // random bytes
      return { name, body: Buffer.from(Array.from({ length: r.int(300) }, () => r.int(256))) };
    case 1: // random bytes around a valid object
      return {
        name,
        body: Buffer.concat([
          Buffer.from(`{"record_id":"${recordFresh()}",`),
          Buffer.from(Array.from({ length: r.int(40) }, () => r.int(256))),
          Buffer.from("}"),
        ]),
      };
    case 2: {
      // a well-formed object with odd members, and a string record_id somewhere among them
      const v = jsonValue(r, 1);
      const extra = r.chance(0.5) ? `,"x":${v.text}` : "";
      return text(`{"record_id":${jsonString(r, recordFresh() + (r.chance(0.3) ? r.pick(ODD_STRINGS) : ""))}${extra}}`);
    }
    case 3: // record_id of any JSON type (or a lone surrogate, a huge number…)
      return text(`{"record_id":${jsonValue(r, 1).text}}`);
    case 4: {
      // duplicate keys: the last one counts
      const values = Array.from({ length: 2 + r.int(3) }, () => (r.chance(0.6) ? JSON.stringify(recordFresh()) : jsonValue(r, 1).text));
      return text(`{${values.map((v) => `"record_id":${v}`).join(",")}}`);
    }
    case 5: {
      // deep nesting, under or over the limit
      const n = r.chance(0.5) ? MAX_JSON_DEPTH - 2 + r.int(4) : r.pick([100, 1000, 10_000]);
      const open = r.chance(0.5) ? "[" : '{"a":';
      const close = open === "[" ? "]" : "}";
      return text(`{"record_id":"${recordFresh()}","deep":${open.repeat(n)}${r.chance(0.5) ? "1" : "[]"}${close.repeat(n)}}`);
    }
    case 6: {
      // long record ids around the limit, in ASCII or astral characters (two UTF-16 units each)
      const unit = r.pick(["x", "\u{1F600}", "\u05D0"]);
      const n = r.pick([MAX_RECORD_ID - 1, MAX_RECORD_ID, MAX_RECORD_ID + 1, 5000]);
      return text(`{"record_id":${JSON.stringify(recordFresh() + unit.repeat(n))}}`);
    }
    case 7: // a random JSON value as the whole body
      return text(jsonValue(r, 0).text);
    case 8: {
      // NUL bytes raw (invalid JSON) or escaped, in keys and values
      const raw = r.chance(0.5);
      const nul = raw ? "\u0000" : "\\u0000";
      return text(r.chance(0.5) ? `{"record_id":"${recordFresh()}${nul}","k${nul}":"v${nul}"}` : `{"rec${nul}ord_id":"${recordFresh()}"}`);
    }
    default: {
      // a valid body with noise around it
      const core = `{"record_id":"${recordFresh()}"}`;
      return text(r.pick([` ${core} `, `\n${core}\n`, `\uFEFF${core}`, `${core}x`, `${core}${core}`, `[${core}]`, core.slice(0, -1), `${core}\u0000`]));
    }
  }
}

// ------------------------------------------------------------------ the model

/** What the server must answer for a body: the record id it must accept, or that it must refuse it (400). */
function model(c: Case): { accept: string } | { refuse: true } {
  if (c.contentType !== undefined && c.contentType !== null && !/^application\/json\s*(;|$)/i.test(c.contentType)) return { refuse: true };
  const text = c.body.toString("utf8");
  if (text.trim() === "") return { refuse: true };
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "[" || ch === "{") {
      if (++depth > MAX_JSON_DEPTH) return { refuse: true };
    } else if (ch === "]" || ch === "}") depth--;
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { refuse: true };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v) || !Object.hasOwn(v, "record_id")) return { refuse: true };
  const id = (v as Record<string, unknown>).record_id;
  if (typeof id !== "string" || id === "" || [...id].length > MAX_RECORD_ID) return { refuse: true };
  try {
    encodeURIComponent(id); // throws on an unpaired surrogate
  } catch {
    return { refuse: true };
  }
  return { accept: id };
}

// ------------------------------------------------------------------ the test

let server: TestServer;
let w: World;
let url: string;

beforeAll(async () => {
  server = await startServer();
  w = await createWorld(server, { steps: [{ type: "load_record" }] });
  await server.deps.store.directory.workflows.setWebhookRateLimit(w.orgId, w.workflowId, 1_000_000);
  const got = await adminClient(server.baseUrl, w.adminToken).getWorkflow({ workflowId: w.workflowId });
  url = local(got.workflow!.webhook!.url, server.deps.config.publicBaseUrl, server.baseUrl);
});
afterAll(async () => {
  await server?.stop();
});

interface Outcome {
  status: number;
  body: Record<string, unknown> | string;
}

async function send(c: Case): Promise<Outcome> {
  const headers: Record<string, string> = { authorization: `Bearer ${w.userToken}` };
  if (c.contentType !== null) headers["content-type"] = c.contentType ?? "application/json";
  const res = await fetch(url, { method: "POST", headers, body: new Uint8Array(c.body) });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
  } catch {
    return { status: res.status, body: text };
  }
}

/** The answer's shape, whatever the body: 202 {runId} or 4xx {code, message, error} (+ runId on 409). */
function expectShape(o: Outcome, where: string) {
  if (o.status === 202) {
    expect(o.body, where).toEqual({ runId: expect.stringMatching(UUID_RE) });
    return;
  }
  expect(o.status >= 400 && o.status < 500, `${where}: status ${o.status} ${JSON.stringify(o.body)}`).toBe(true);
  expect(typeof o.body === "object" && o.body !== null, `${where}: ${String(o.body)}`).toBe(true);
  const b = o.body as Record<string, unknown>;
  const keys = Object.keys(b).sort();
  expect(keys, where).toEqual(o.status === 409 ? ["code", "error", "message", "runId"] : ["code", "error", "message"]);
  expect(typeof b.message === "string" && b.message.length > 0 && b.error === b.message, where).toBe(true);
  expect(b.code, where).toBe(o.status === 409 ? "already_exists" : o.status === 413 ? "resource_exhausted" : "invalid_argument");
}

describe("webhook body fuzzer", () => {
  it("pins the edge cases: duplicate keys, record_id types, lengths, unicode, NUL, nesting", async () => {
    let n = 0;
    const id = () => `edge-${n++}`;
    const accepted: [string, string][] = [];
    const check = async (body: string | Buffer, expected: "accept" | "refuse", recordId?: string, contentType?: string | null) => {
      const c: Case = { name: String(body).slice(0, 80), body: Buffer.isBuffer(body) ? body : Buffer.from(body, "utf8"), contentType };
      const o = await send(c);
      expectShape(o, c.name);
      expect(o.status, `${c.name}: ${JSON.stringify(o.body)}`).toBe(expected === "accept" ? 202 : 400);
      const m = model(c);
      expect("accept" in m ? "accept" : "refuse", `the model agrees on ${c.name}`).toBe(expected);
      if (expected === "accept") accepted.push([(o.body as { runId: string }).runId, recordId!]);
      return o;
    };

    // Duplicate keys: JSON.parse semantics, the last one counts (documented in docs/integrators.md).
    let a = id(),
      b = id();
    await check(`{"record_id":"${a}","record_id":"${b}"}`, "accept", b);
    a = id();
    await check(`{"record_id":1,"record_id":"${a}"}`, "accept", a);
    await check(`{"record_id":"${id()}","record_id":1}`, "refuse");
    await check(`{"record_id":"${id()}","record_id":null}`, "refuse");
    // record_id of every JSON type: only a non-empty string is accepted.
    for (const v of ["null", "true", "false", "0", "1.5", "-1", "1e400", "4".repeat(400), "{}", '{"id":"x"}', "[]", '["x"]', '""'])
      await check(`{"record_id":${v}}`, "refuse");
    // Huge numbers elsewhere are ignored like any unknown field.
    a = id();
    await check(`{"record_id":"${a}","n":1e400,"m":-${"9".repeat(400)},"f":1e-400}`, "accept", a);
    // Lengths: at most 1024 characters (code points: an emoji counts once).
    for (const [unit, count, expected] of [
      ["x", 1024, "accept"],
      ["x", 1025, "refuse"],
      ["\u{1F600}", 1024, "accept"],
      ["\u{1F600}", 1025, "refuse"],
      ["x", 100_000, "refuse"],
    ] as const) {
      const prefix = `${id()}-`;
      const rid = prefix + unit.repeat(count - prefix.length);
      expect([...rid].length).toBe(count);
      await check(JSON.stringify({ record_id: rid }), expected, rid);
    }
    // Unicode: RTL, emoji, combining marks, BOM inside the value, NUL (escaped) — all kept exactly.
    for (const s of ["\u202Eevil\u202C", "\u05E9\u05DC\u05D5\u05DD", "\u{1F469}\u200D\u{1F4BB}", "e\u0301", "\uFEFFx", "a\u0000b", "\u2028", "a\\|b|c"]) {
      const rid = `${id()}${s}`;
      await check(JSON.stringify({ record_id: rid }), "accept", rid);
    }
    // Escaped forms of the same characters.
    a = id();
    await check(`{"record_id":"${a}\\u202e\\ud83d\\ude00\\u0000"}`, "accept", `${a}\u202e\u{1F600}\u0000`);
    // Lone surrogates cannot be stored as they are (MongoDB's UTF-8 would make them U+FFFD): refused.
    for (const s of ["\\ud800", "\\udfff", "x\\ud83d", "\\ude00x"]) await check(`{"record_id":"${id()}${s}"}`, "refuse");
    // NUL: raw inside a string is not JSON; escaped in a key it is another key.
    await check(Buffer.from(`{"record_id":"${id()}\u0000"}`), "refuse");
    await check(`{"rec\\u0000ord_id":"${id()}"}`, "refuse");
    a = id();
    await check(`{"\\u0000":"x","record_id":"${a}","k\\u0000":"\\u0000"}`, "accept", a);
    // Nesting: at most 64 levels, 10,000 deep is refused before it is parsed.
    await check(`${"[".repeat(10_000)}${"]".repeat(10_000)}`, "refuse");
    await check(`{"record_id":"${id()}","x":${"[".repeat(10_000)}${"]".repeat(10_000)}}`, "refuse");
    a = id();
    await check(`{"record_id":"${a}","x":${"[".repeat(MAX_JSON_DEPTH - 1)}${"]".repeat(MAX_JSON_DEPTH - 1)}}`, "accept", a);
    // Prototype keys are plain keys.
    await check(`{"__proto__":{"record_id":"${id()}"}}`, "refuse");
    a = id();
    await check(`{"record_id":"${a}","__proto__":null,"constructor":{"prototype":1}}`, "accept", a);
    // Not an object, not JSON, empty.
    for (const s of ["", " ", "null", "[]", '"x"', "1", `{"record_id":"x"`, `\uFEFF{"record_id":"${id()}"}`, `{"record_id":"${id()}"} x`, "{'record_id':'x'}"])
      await check(s, "refuse");

    // What was accepted is stored exactly as sent.
    for (const [runId, recordId] of accepted) {
      const run = await storeFixtures(server.deps.store).runs.findOne({ _id: runId }, { projection: { recordId: 1 } });
      expect(run?.recordId, `run of ${JSON.stringify(recordId.slice(0, 40))}`).toBe(recordId);
    }
  });

  it(`answers ${CASES} random bodies (seed ${SEED}) with 202 or a 4xx {code, message, error}, as the model says, and keeps serving`, {
    timeout: DEADLINE_MS + 60_000,
  }, async () => {
    const r = prng(SEED);
    let fresh = 0;
    const cases = Array.from({ length: CASES }, (_, i) => randomCase(r, i, () => `fz${SEED.toString(36)}-${fresh++}`));
    const statuses: Record<number, number> = {};
    let next = 0;
    const stopAt = Date.now() + DEADLINE_MS;
    const failures: string[] = [];
    const accepted: [string, string][] = [];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < cases.length && Date.now() < stopAt) {
          const c = cases[next++]!;
          const where = `seed ${SEED}, ${c.name}: ${JSON.stringify(c.body.toString("utf8").slice(0, 200))}`;
          const o = await send(c);
          statuses[o.status] = (statuses[o.status] ?? 0) + 1;
          try {
            expectShape(o, where);
            const m = model(c);
            if ("accept" in m) {
              // Accepted; or 409 when an earlier case left a run ongoing on the same record.
              expect([202, 409], `${where}: ${JSON.stringify(o.body)}`).toContain(o.status);
              if (o.status === 202) accepted.push([(o.body as { runId: string }).runId, m.accept]);
            } else {
              expect(o.status, `${where}: ${JSON.stringify(o.body)}`).toBe(400);
            }
          } catch (e) {
            failures.push((e as Error).message.slice(0, 600));
          }
        }
      }),
    );
    const sent = Math.min(next, cases.length);
    console.log(`[fuzz] seed ${SEED}: ${sent} of ${CASES} bodies, statuses ${JSON.stringify(statuses)}`);
    expect(failures.slice(0, 5), `${failures.length} failing cases`).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(Math.min(CASES, 1000));
    expect(statuses[202] ?? 0).toBeGreaterThan(sent / 20);
    expect(statuses[400] ?? 0).toBeGreaterThan(sent / 5);

    // Each accepted run is stored with the record id exactly as the body's last record_id.
    const docs = await storeFixtures(server.deps.store)
      .runs.find({ _id: { $in: accepted.map(([id]) => id) } }, { projection: { recordId: 1 } })
      .toArray();
    const stored = new Map(docs.map((d) => [d._id, d.recordId]));
    expect(accepted.filter(([id, rid]) => stored.get(id) !== rid).slice(0, 5)).toEqual([]);

    // Still healthy: the health check, and a normal call is accepted and its run runs.
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    const ok = await postHook(url, w.userToken, { record_id: "r1" });
    expect(ok.status, JSON.stringify(ok.body)).toBe(202);
    expect((await waitForRun(server.deps.store, ok.body.runId!)).state).toBe("SUCCEEDED");
  });
});
