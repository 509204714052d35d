// Logs anyone can verify: the server signs digests of each log stream in the background
// (RUNHOOK_LOG_DIGEST_INTERVAL_MS, here 100 ms), the NDJSON export carries them, and
// `runhook logs verify` (a child process, as users run it) checks an export offline with the
// keys GET …/log-keys serves: a clean export passes; a deleted, reordered or altered entry, or an
// altered digest, fails naming it; a tenant's export holds only its own stream; digests signed
// before a key rotation still verify after it.
import type { ChildProcess } from "node:child_process";
import { createPublicKey, verify } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LogService } from "../gen/runhook/v1/log_pb.js";
import { canonicalJson, digestHash, entryHash, type DigestLine } from "../src/domain/logs/digest-format.js";
import { sleep } from "../src/lib/sleep.js";
import { activityStream, adminStream } from "../src/store/logs.js";
import { createWorld, type World } from "../fixtures/world.js";
import { apiClient } from "./helpers/api.js";
import { adminClient } from "./helpers/webhook.js";
import { spawnCli } from "./helpers/cli.js";
import { startServer, type TestServer } from "./helpers/server.js";

const INTERVAL = { RUNHOOK_LOG_DIGEST_INTERVAL_MS: "100" };
// The test servers' key (helpers/server.ts), and a second one for the rotation.
const K1 = `k1:${Buffer.alloc(32, 7).toString("base64url")}`;
const K2 = `k2:${Buffer.alloc(32, 9).toString("base64url")}`;

let server: TestServer;
let w: World;
let other: World;
const tmp = mkdtempSync(join(tmpdir(), "runhook-digests-"));
const children = new Set<ChildProcess>();

const envPath = (x: World) => `/v1/project/${x.projectName}/environment/${x.environmentName}`;

/** `n` activity entries in `x`'s environment: notes created through /v1 (each logs note.created). */
async function addEntries(x: World, n: number, recordId = "r1"): Promise<void> {
  const api = apiClient(server.baseUrl, x.apiToken);
  for (let i = 0; i < n; i++)
    expect((await api.post(`${envPath(x)}/notes`, { collectionName: x.collection, recordId, content: `<p>${i}</p>` })).status).toBe(201);
}

/** Waits until the stream's digests cover every position taken so far (the background pass, every 100 ms). */
async function digested(stream: string): Promise<void> {
  const top = await server.deps.store.logs.counter(stream);
  for (let i = 0; i < 300; i++) {
    if (((await server.deps.store.logDigests.last(stream))?.to ?? 0) >= top) return;
    await sleep(50);
  }
  throw new Error(`no digest of ${stream} up to ${top}`);
}

/** The NDJSON export of a log (`path` with its query), saved to a file: its path and its lines. */
async function exportTo(name: string, path: string, token: string): Promise<{ file: string; lines: string[] }> {
  const res = await fetch(`${server.baseUrl}${path}`, { headers: { authorization: `Bearer ${token}`, accept: "application/x-ndjson" } });
  expect(res.status).toBe(200);
  const text = await res.text();
  const file = join(tmp, name);
  writeFileSync(file, text);
  return { file, lines: text.trim().split("\n") };
}

/** A copy of an export with its lines changed. */
function tampered(name: string, lines: string[], change: (lines: string[]) => string[]): string {
  const file = join(tmp, name);
  writeFileSync(file, `${change([...lines]).join("\n")}\n`);
  return file;
}

/** The log keys of `x`'s environment, saved to a file. */
async function keysFile(name: string, x: World): Promise<string> {
  const res = await apiClient(server.baseUrl, x.apiToken).get(`${envPath(x)}/log-keys`);
  expect(res.status).toBe(200);
  const file = join(tmp, name);
  writeFileSync(file, JSON.stringify(res.body));
  return file;
}

/** `runhook logs verify …` as a child process. */
function verifyCli(args: string[], token?: string) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNHOOK_") && k !== "MONGODB_URI"));
  return spawnCli(["logs", "verify", ...args], { env: { ...base, ...(token ? { RUNHOOK_TOKEN: token } : {}) }, cwd: tmp, timeoutMs: 30_000, children }).exited;
}

const digestsOf = (lines: string[]) =>
  lines
    .map((l) => JSON.parse(l))
    .filter((v) => v.digest)
    .map((v) => v.digest as DigestLine);
const entryIndex = (lines: string[], id: number) => lines.findIndex((l) => JSON.parse(l).id === String(id));

beforeAll(async () => {
  server = await startServer({ env: INTERVAL });
  w = await createWorld(server);
  other = await createWorld(server);
  await addEntries(w, 5);
  await addEntries(w, 2, "r2");
  await addEntries(other, 3);
  await Promise.all([digested(activityStream(w.environmentId)), digested(activityStream(other.environmentId)), digested(adminStream(w.orgId, w.projectId))]);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await server?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

describe("an export", () => {
  it("verifies, newest first or oldest first, with the keys from the URL or a saved copy", async () => {
    const desc = await exportTo("desc.ndjson", `${envPath(w)}/activity-logs`, w.apiToken);
    const asc = await exportTo("asc.ndjson", `${envPath(w)}/activity-logs?order=asc`, w.apiToken);
    // Seven entries and at least one digest, each after the last entry (in the file's order) it covers.
    for (const { lines } of [desc, asc]) {
      expect(lines.filter((l) => JSON.parse(l).object === "activityLog")).toHaveLength(7);
      expect(digestsOf(lines).length).toBeGreaterThan(0);
    }
    const lastEntry = (lines: string[]) => lines.reduce((at, l, i) => (JSON.parse(l).object ? i : at), -1);
    expect(JSON.parse(asc.lines.at(-1)!).digest.to).toBe(7);
    expect(lastEntry(asc.lines)).toBe(entryIndex(asc.lines, 7));
    expect(JSON.parse(desc.lines.at(-1)!).digest.from).toBe(1);
    const byUrl = await verifyCli([desc.file, "--key", `${server.baseUrl}${envPath(w)}/log-keys`], w.apiToken);
    expect(byUrl.stderr).toBe("");
    expect(byUrl.code).toBe(0);
    expect(byUrl.stdout).toMatch(/verified — 7 entries, \d+ digests? of stream a:[0-9a-f-]+ covering positions 1–7, signed by k1/);
    expect(byUrl.stdout).toContain("every entry the digests list is present once, unaltered, in order");
    const byFile = await verifyCli([asc.file, "--key", await keysFile("keys.json", w)]);
    expect(byFile.code, byFile.stderr).toBe(0);
  });

  it("fails naming the entry deleted, moved or altered, or the digest altered", async () => {
    const { lines } = await exportTo("clean.ndjson", `${envPath(w)}/activity-logs?order=asc`, w.apiToken);
    const keys = await keysFile("keys-tamper.json", w);
    const third = entryIndex(lines, 3);
    // Two entries on adjacent lines (no digest between them), swapped.
    const isEntry = (i: number) => Boolean(JSON.parse(lines[i]!).object);
    const pair = lines.findIndex((_, i) => i + 1 < lines.length && isEntry(i) && isEntry(i + 1));
    const [a, b] = [JSON.parse(lines[pair]!).id, JSON.parse(lines[pair + 1]!).id];
    const firstDigest = lines.findIndex((l) => l.startsWith('{"digest"'));
    const d = JSON.parse(lines[firstDigest]!).digest as DigestLine;
    const cases: [string, (l: string[]) => string[], RegExp][] = [
      ["deleted", (l) => l.filter((_, i) => i !== third), /entry 3 is missing: digest \d+–\d+ \(line \d+\) records it/],
      [
        "reordered",
        (l) => [...l.slice(0, pair), l[pair + 1]!, l[pair]!, ...l.slice(pair + 2)],
        new RegExp(`entry ${a} \\(line \\d+\\) is out of order: it comes after entry ${b}`),
      ],
      [
        "altered",
        (l) => l.map((x, i) => (i === third ? x.replace(/"recordIds":\["r1"\]/, '"recordIds":["r9"]') : x)),
        /entry 3 \(line \d+\) is altered: its hash is not the one digest \d+–\d+ \(line \d+\) records/,
      ],
      [
        "digest altered",
        (l) => l.map((x, i) => (i === firstDigest ? x.replace(/"createdAt":"[^"]+"/, '"createdAt":"2020-01-01T00:00:00.000Z"') : x)),
        new RegExp(`digest ${d.from}–${d.to} \\(line ${firstDigest + 1}\\) is altered: its signature does not verify with key "k1"`),
      ],
    ];
    for (const [name, change, message] of cases) {
      const file = tampered(`${name}.ndjson`, lines, change);
      expect(readFileSync(file, "utf8")).not.toBe(`${lines.join("\n")}\n`);
      const r = await verifyCli([file, "--key", keys]);
      expect(r.code, `${name}: ${r.stdout}`).toBe(12);
      expect(r.stderr, name).toMatch(message);
      expect(r.stderr, name).toContain("verification FAILED");
    }
  });

  it("of a tenant holds its own stream only, and verifies", async () => {
    const mine = await exportTo("other.ndjson", `${envPath(other)}/activity-logs`, other.apiToken);
    const theirs = await exportTo("w.ndjson", `${envPath(w)}/activity-logs`, w.apiToken);
    const text = readFileSync(mine.file, "utf8");
    expect(text).not.toContain(w.environmentId);
    expect(new Set(digestsOf(mine.lines).map((d) => d.stream))).toEqual(new Set([activityStream(other.environmentId)]));
    // No hash of the other tenant's entries or digests appears.
    const hashesOf = (lines: string[]) => digestsOf(lines).flatMap((d) => [d.hash, digestHash(d), ...d.leaves.map(([, h]) => h)]);
    const foreign = hashesOf(theirs.lines);
    expect(foreign.length).toBeGreaterThan(7);
    for (const h of foreign) expect(text).not.toContain(h);
    const r = await verifyCli([mine.file, "--key", await keysFile("keys-other.json", other)]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("verified — 3 entries");
  });

  it("of the admin logs verifies: a project's, and the organization's own", async () => {
    const project = await exportTo("admin.ndjson", `/v1/project/${w.projectName}/admin-logs?order=asc`, w.apiToken);
    expect(digestsOf(project.lines).every((d) => d.stream === adminStream(w.orgId, w.projectId))).toBe(true);
    const keys = await apiClient(server.baseUrl, w.apiToken).get(`/v1/project/${w.projectName}/log-keys`);
    writeFileSync(join(tmp, "keys-admin.json"), JSON.stringify(keys.body));
    const r = await verifyCli([project.file, "--key", join(tmp, "keys-admin.json")]);
    expect(r.code, r.stderr).toBe(0);
    // The organization's own stream, read with an organization API token (whose making it logs).
    const orgToken = (await adminClient(server.baseUrl, w.ownerToken).createOrganizationApiToken({ name: "digests" })).plaintext;
    await digested(adminStream(w.orgId, null));
    const org = await exportTo("org.ndjson", "/v1/organization/admin-logs?order=asc", orgToken);
    expect(digestsOf(org.lines).map((d) => d.stream)).toContain(adminStream(w.orgId, null));
    const orgKeys = await apiClient(server.baseUrl, orgToken).get("/v1/organization/log-keys");
    expect(orgKeys.body).toEqual(keys.body);
    expect((await apiClient(server.baseUrl, w.apiToken).get("/v1/organization/log-keys")).status).toBe(403);
    const o = await verifyCli([org.file, "--key", join(tmp, "keys-admin.json")]);
    expect(o.code, o.stderr).toBe(0);
  });

  it("filtered proves the entries shown, and says that it cannot prove completeness", async () => {
    const { file, lines } = await exportTo("filtered.ndjson", `${envPath(w)}/activity-logs?recordId=r2`, w.apiToken);
    expect(lines.filter((l) => JSON.parse(l).object)).toHaveLength(2);
    const keys = await keysFile("keys-filtered.json", w);
    const strict = await verifyCli([file, "--key", keys]);
    expect(strict.code).toBe(12);
    expect(strict.stderr).toMatch(/entr(y|ies) 1(, \d)* (is|are) missing/);
    const partial = await verifyCli([file, "--key", keys, "--filtered"]);
    expect(partial.code, partial.stderr).toBe(0);
    expect(partial.stdout).toContain("filtered export: the entries present are unaltered and in order; 5 entries the digests list are not in the file");
    // An entry of the filtered export altered is still caught.
    const altered = tampered("filtered-altered.ndjson", lines, (l) => l.map((x) => x.replace(/"recordIds":\["r2"\]/, '"recordIds":["r1"]')));
    expect((await verifyCli([altered, "--key", keys, "--filtered"])).stderr).toMatch(/entry 7 \(line \d+\) is altered/);
  });

  it("over gRPC carries the digests only when asked, the same as the NDJSON lines", async () => {
    const client = createClient(LogService, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }));
    const headers = { authorization: `Bearer ${w.apiToken}` };
    const req = { projectName: w.projectName, environmentName: w.environmentName, options: { order: "asc" } };
    const plain = [];
    for await (const m of client.exportActivityLogs(req, { headers })) plain.push(m);
    expect(plain.every((m) => m.entry && !m.digest)).toBe(true);
    const withDigests = [];
    for await (const m of client.exportActivityLogs({ ...req, includeDigests: true }, { headers })) withDigests.push(m);
    const digests = withDigests.filter((m) => m.digest).map((m) => m.digest!);
    const { lines } = await exportTo("grpc-compare.ndjson", `${envPath(w)}/activity-logs?order=asc`, w.apiToken);
    expect(digests.map((d) => [Number(d.fromPosition), Number(d.toPosition), d.hash, d.signature])).toEqual(
      digestsOf(lines).map((d) => [d.from, d.to, d.hash, d.signature]),
    );
  });
});

describe("the keys", () => {
  it("verify a digest's signature as served; after a rotation, old digests still verify and new ones use the new key", async () => {
    const served = (await apiClient(server.baseUrl, w.apiToken).get(`${envPath(w)}/log-keys`)).body;
    expect(served.keys).toEqual([{ id: "k1", algorithm: "Ed25519", publicKey: expect.any(String), current: true }]);
    // The served key checks a digest with nothing but node:crypto: the signed text is the canonical JSON of the payload.
    const spki = Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(served.keys[0].publicKey, "base64")]);
    const key = createPublicKey({ key: spki, format: "der", type: "spki" });
    const { lines } = await exportTo("before.ndjson", `${envPath(w)}/activity-logs?order=asc`, w.apiToken);
    const { signature, leaves: _, ...payload } = digestsOf(lines)[0]!;
    expect(verify(null, Buffer.from(canonicalJson(payload)), key, Buffer.from(signature, "base64"))).toBe(true);
    // Each leaf is the hash of its entry's line.
    const first = JSON.parse(lines[0]!);
    expect(digestsOf(lines)[0]!.leaves[0]).toEqual([1, entryHash(first)]);

    await server.stop();
    server = await startServer({ dbName: server.dbName, env: { ...INTERVAL, RUNHOOK_SIGNING_KEYS: `${K2},${K1}` } });
    const rotated = (await apiClient(server.baseUrl, w.apiToken).get(`${envPath(w)}/log-keys`)).body;
    expect(rotated.keys.map((k: { id: string; current: boolean }) => [k.id, k.current])).toEqual([
      ["k2", true],
      ["k1", false],
    ]);
    expect(rotated.keys.find((k: { id: string }) => k.id === "k1").publicKey).toBe(served.keys[0].publicKey);
    await addEntries(w, 2);
    await digested(activityStream(w.environmentId));
    const after = await exportTo("after.ndjson", `${envPath(w)}/activity-logs?order=asc`, w.apiToken);
    const keyIds = digestsOf(after.lines).map((d) => d.keyId);
    expect(keyIds[0]).toBe("k1");
    expect(keyIds.at(-1)).toBe("k2");
    const r = await verifyCli([after.file, "--key", await keysFile("keys-rotated.json", w)]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/9 entries, .* signed by k1, k2/);
    // With only the old key's copy, the new digests are named as signed by a key it does not list.
    const old = await verifyCli([after.file, "--key", join(tmp, "keys.json")]);
    expect(old.code).toBe(12);
    expect(old.stderr).toMatch(/digest \d+–9 \(line \d+\) is signed by key "k2", which the keys do not list/);
  });
});
