// `runhook logs verify FILE --key URL|FILE`: checks an NDJSON export of a log offline against
// the signed digests it carries (domain/logs/digest-format.ts has the rules): every entry a
// digest lists is in the file once, unaltered, in order; each digest is signed by a listed key
// and chained to the one before. It reads the file twice (the first time for its order) in
// constant memory, except for the entries of one digest's range at a time.
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import type { KeyObject } from "node:crypto";
import { digestHash, entryHash, isEntryItem, leavesHash, parseDigestLine, publicKeyOf, signatureHolds, type DigestLine } from "../domain/logs/digest-format.js";
import { answerError, CliError, EXIT, EXIT_CODES_HELP, parse, report, request, str, terminalSafe, tokenOf, UsageError } from "./common.js";

export const VERIFY_USAGE = `usage: runhook logs verify FILE --key URL|FILE [--filtered] [--token TOKEN]

Checks an NDJSON export of an activity or admin log (curl -H "Accept: application/x-ndjson" …)
offline, with the signed digests it carries: every entry each digest lists is in FILE once,
unaltered and in order, each digest is signed by one of the keys and follows the one before it
(its range starts where the previous one ended, and it names that one's hash). Prints a summary
on stdout and exits 0; on any failure, says which entry (its id) or digest (its range and line)
fails, on stderr, and exits ${EXIT.VERIFY_FAILED}.

  --key URL|FILE   the log's public keys: the URL of GET /v1/…/log-keys (read with the token), or
                   a saved copy of its answer ({"keys": [{"id", "algorithm", "publicKey", …}]})
  --filtered       FILE is a filtered export (userEmail, action, recordId…): an entry a digest
                   lists may be absent. The entries present are still proven unaltered and in
                   order; that FILE holds every entry the filter matches cannot be proven.
  --token TOKEN    for --key URL: the token (default: $RUNHOOK_TOKEN)

Entries no digest covers yet (the newest, signed at most a minute after they are written; or
the oldest, whose digest retention removed) are counted in the summary, not checked.
${EXIT_CODES_HELP}`;

const PREFIX = "runhook logs verify";
/** The most problems printed; the rest are counted. */
const MAX_PROBLEMS = 20;

/** The keys of a log-keys answer by id. */
export function keysOf(answer: unknown): Map<string, KeyObject> {
  const keys = (answer as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0)
    throw new CliError('the keys are not a log-keys answer: {"keys": [{"id", "algorithm", "publicKey"}, …]}', EXIT.ERROR);
  const out = new Map<string, KeyObject>();
  for (const k of keys as { id?: unknown; algorithm?: unknown; publicKey?: unknown }[]) {
    if (typeof k?.id !== "string" || k.algorithm !== "Ed25519" || typeof k.publicKey !== "string")
      throw new CliError(`key ${JSON.stringify(k?.id)} is not an Ed25519 key with a publicKey`, EXIT.ERROR);
    try {
      out.set(k.id, publicKeyOf(k.publicKey));
    } catch (err) {
      throw new CliError(`key "${k.id}": ${err instanceof Error ? err.message : String(err)}`, EXIT.ERROR);
    }
  }
  return out;
}

/** The keys of `--key`: fetched from a URL with the token, or read from a file. */
async function loadKeys(source: string, values: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv): Promise<Map<string, KeyObject>> {
  if (/^https?:\/\//i.test(source)) {
    const a = await request("GET", source, { token: tokenOf(values, env, "to read the log keys"), timeoutMs: 30_000 });
    if (a.status !== 200) throw answerError(a, `reading the keys at ${source}`);
    return keysOf(a.json);
  }
  let text: string;
  try {
    text = await readFile(source, "utf8");
  } catch (err) {
    throw new CliError(`cannot read the keys file ${source}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, EXIT.ERROR);
  }
  try {
    return keysOf(JSON.parse(text));
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(`the keys file ${source} is not JSON`, EXIT.ERROR);
  }
}

/** One entry line of the range being read: its hash and where it is. */
interface Seen {
  hash: string;
  line: number;
}

/** What a verification found. */
export interface VerifyResult {
  problems: string[];
  entries: number;
  digests: number;
  stream?: string;
  /** The positions the digests cover: the lowest and highest. */
  covered?: { from: number; to: number };
  /** Entries no digest covers, and their positions' span. */
  uncovered: { count: number; from: number; to: number };
  /** Entries the digests list that the file (filtered) does not have. */
  notShown: number;
  keyIds: Set<string>;
  /** The `previous` of the oldest digest, when the file does not hold the digest it names. */
  chainStart?: string;
}

/** `digest 1–120 (line 121)`. */
const nameOf = (d: DigestLine, line: number) => `digest ${d.from}–${d.to} (line ${line})`;

/** The verification of one file, fed line by line in the file's order; `order` is the entries' (1: oldest first). */
class Verifier {
  readonly result: VerifyResult = { problems: [], entries: 0, digests: 0, uncovered: { count: 0, from: 0, to: 0 }, notShown: 0, keyIds: new Set() };
  private previousEntry: { pos: number; line: number } | undefined;
  private previousDigest: { d: DigestLine; line: number } | undefined;
  private range = new Map<number, Seen>();

  constructor(
    private readonly keys: Map<string, KeyObject>,
    private readonly order: 1 | -1,
    private readonly filtered: boolean,
  ) {}

  private problem(text: string): void {
    this.result.problems.push(text);
  }

  line(text: string, line: number): void {
    if (text.trim() === "") return;
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      this.problem(`line ${line} is not JSON`);
      return;
    }
    if (v && typeof v === "object" && "digest" in v) this.digest((v as { digest: unknown }).digest, line);
    else if (isEntryItem(v)) this.entry(v, line);
    else this.problem(`line ${line} is neither a log entry (activityLog, adminLog) nor a digest`);
  }

  private entry(item: Parameters<typeof entryHash>[0] & { id: string }, line: number): void {
    if (!/^[1-9][0-9]{0,15}$/.test(item.id)) {
      this.problem(`line ${line}: entry id ${JSON.stringify(item.id)} is not a position`);
      return;
    }
    const pos = Number(item.id);
    this.result.entries++;
    const before = this.previousEntry;
    if (before && pos === before.pos) this.problem(`entry ${pos} appears twice (lines ${before.line} and ${line})`);
    else if (before && (pos - before.pos) * this.order < 0)
      this.problem(`entry ${pos} (line ${line}) is out of order: it comes after entry ${before.pos} (line ${before.line})`);
    this.previousEntry = { pos, line };
    if (!this.range.has(pos)) this.range.set(pos, { hash: entryHash(item), line });
  }

  private digest(raw: unknown, line: number): void {
    const d = parseDigestLine(raw);
    if (typeof d === "string") {
      this.problem(`line ${line}: the digest is malformed (${d})`);
      return;
    }
    const name = nameOf(d, line);
    this.result.digests++;
    this.result.stream ??= d.stream;
    if (d.stream !== this.result.stream) this.problem(`${name} is of stream ${d.stream}, the file's digests of ${this.result.stream}`);
    this.checkSigned(d, name);
    this.checkChain(d, name);
    this.checkEntries(d, name);
    // The oldest digest's predecessor: the first digest read oldest first, the last one newest first.
    if (this.order === -1 || !this.previousDigest) this.result.chainStart = d.previous || undefined;
    const c = this.result.covered;
    this.result.covered = { from: Math.min(c?.from ?? d.from, d.from), to: Math.max(c?.to ?? d.to, d.to) };
    this.previousDigest = { d, line };
  }

  private checkSigned(d: DigestLine, name: string): void {
    const key = this.keys.get(d.keyId);
    if (!key) this.problem(`${name} is signed by key "${d.keyId}", which the keys do not list`);
    else if (!signatureHolds(d, d.signature, key)) this.problem(`${name} is altered: its signature does not verify with key "${d.keyId}"`);
    else this.result.keyIds.add(d.keyId);
    const ascending = d.leaves.every(([pos], i) => pos >= d.from && pos <= d.to && (i === 0 || pos > d.leaves[i - 1]![0]));
    if (!ascending || d.leaves.length !== d.entries || leavesHash(d.leaves) !== d.hash) this.problem(`${name} is altered: its leaves do not match its hash`);
  }

  /** The digest and the one before it in the file follow each other: consecutive ranges, and the later names the earlier's hash. */
  private checkChain(d: DigestLine, name: string): void {
    const prev = this.previousDigest;
    if (!prev) return;
    const [older, newer] = this.order === 1 ? [prev.d, d] : [d, prev.d];
    const prevName = nameOf(prev.d, prev.line);
    if (newer.from !== older.to + 1)
      this.problem(`${name} does not follow ${prevName}: their ranges are not consecutive (a digest is missing, or out of order)`);
    else if (newer.previous !== digestHash(older)) this.problem(`${name} does not follow ${prevName}: the later one does not name the earlier one's hash`);
  }

  /** The entries read since the previous digest against this digest's leaves. */
  private checkEntries(d: DigestLine, name: string): void {
    const leaves = new Map(d.leaves);
    for (const [pos, seen] of this.range) {
      if (pos < d.from || pos > d.to) {
        // Before the first digest line: newer (desc) or older (asc) than every digest, which none covers.
        if (this.previousDigest) this.problem(`entry ${pos} (line ${seen.line}) is outside the range of ${name}, the digest after it`);
        else this.uncovered(pos);
      } else if (!leaves.has(pos)) this.problem(`entry ${pos} (line ${seen.line}) is not in ${name}, which records no entry at that position`);
      else if (leaves.get(pos) !== seen.hash) this.problem(`entry ${pos} (line ${seen.line}) is altered: its hash is not the one ${name} records`);
    }
    const missing = d.leaves.filter(([pos]) => !this.range.has(pos)).map(([pos]) => pos);
    if (this.filtered) this.result.notShown += missing.length;
    else if (missing.length > 0) {
      const listed = missing.slice(0, 5).join(", ") + (missing.length > 5 ? ` and ${missing.length - 5} more` : "");
      this.problem(`${missing.length === 1 ? `entry ${listed} is` : `entries ${listed} are`} missing: ${name} records ${missing.length === 1 ? "it" : "them"}`);
    }
    this.range.clear();
  }

  private uncovered(pos: number): void {
    const u = this.result.uncovered;
    u.from = u.count === 0 ? pos : Math.min(u.from, pos);
    u.to = u.count === 0 ? pos : Math.max(u.to, pos);
    u.count++;
  }

  end(): VerifyResult {
    const last = this.previousDigest;
    for (const [pos, seen] of this.range) {
      const covered = this.result.covered;
      if (last && covered && pos >= covered.from && pos <= covered.to) this.problem(`entry ${pos} (line ${seen.line}) comes after the digest that covers it`);
      else this.uncovered(pos);
    }
    if (this.result.digests === 0) this.problem("the file holds no digest: nothing in it is proven (digests are signed about a minute after the entries)");
    return this.result;
  }
}

/** The lines of a file, with their numbers. */
async function* linesOf(file: string): AsyncGenerator<[string, number]> {
  const rl = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Number.POSITIVE_INFINITY });
  let n = 0;
  for await (const text of rl) yield [text, ++n];
}

/** The order of a file's entries: from its first and last entry ids (oldest first when it cannot tell). */
async function orderOf(file: string): Promise<1 | -1> {
  let first: number | undefined;
  let last: number | undefined;
  for await (const [text] of linesOf(file)) {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      continue;
    }
    if (!isEntryItem(v)) continue;
    first ??= Number(v.id);
    last = Number(v.id);
  }
  return first !== undefined && last !== undefined && last < first ? -1 : 1;
}

/** Verifies an export file against `keys`. */
export async function verifyExport(file: string, keys: Map<string, KeyObject>, opts: { filtered?: boolean } = {}): Promise<VerifyResult> {
  const verifier = new Verifier(keys, await orderOf(file), opts.filtered ?? false);
  for await (const [text, n] of linesOf(file)) verifier.line(text, n);
  return verifier.end();
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The summary of a verification that found nothing wrong, line by line. */
export function summary(file: string, r: VerifyResult, filtered: boolean): string[] {
  const c = r.covered!;
  const lines = [
    `${file}: verified — ${plural(r.entries, "entry", "entries")}, ${plural(r.digests, "digest")} of stream ${r.stream} covering positions ${c.from}–${c.to}, signed by ${[...r.keyIds].join(", ")}, each following the one before`,
    filtered
      ? `  filtered export: the entries present are unaltered and in order; ${plural(r.notShown, "entry", "entries")} the digests list are not in the file (a filtered export cannot prove it holds every match)`
      : "  every entry the digests list is present once, unaltered, in order",
  ];
  if (r.chainStart) lines.push(`  the oldest digest follows one not in the file (${r.chainStart.slice(0, 12)}…): the chain is checked from there`);
  if (r.uncovered.count > 0)
    lines.push(`  ${plural(r.uncovered.count, "entry", "entries")} in no digest (positions ${r.uncovered.from}–${r.uncovered.to}): not checked`);
  return lines;
}

/** Lines for the terminal: each made safe on its own (a file's strings may hold control characters), then joined. */
const printable = (lines: string[]) => lines.map((l) => `${terminalSafe(l)}\n`).join("");

export async function runVerify(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    const { values, positionals, help } = parse(args, { key: { type: "string" }, filtered: { type: "boolean" }, token: { type: "string" } }, 1);
    if (help) {
      process.stdout.write(`${VERIFY_USAGE}\n`);
      return EXIT.OK;
    }
    const file = positionals[0];
    const key = str(values, "key");
    if (!file) throw new UsageError("FILE is required");
    if (!key) throw new UsageError("--key is required: the log-keys URL, or a saved copy of its answer");
    const keys = await loadKeys(key, values, env);
    const filtered = values.filtered === true;
    const r = await verifyExport(file, keys, { filtered }).catch((err: NodeJS.ErrnoException) => {
      throw err.code ? new CliError(`cannot read ${file}: ${err.code}`, EXIT.ERROR) : err;
    });
    if (r.problems.length === 0) {
      process.stdout.write(printable(summary(file, r, filtered)));
      return EXIT.OK;
    }
    const shown = r.problems.slice(0, MAX_PROBLEMS).map((p) => `${PREFIX}: ${file}: ${p}`);
    const more = r.problems.length > MAX_PROBLEMS ? [`${PREFIX}: … and ${r.problems.length - MAX_PROBLEMS} more`] : [];
    process.stderr.write(printable([...shown, ...more, `${PREFIX}: ${file}: verification FAILED (${plural(r.problems.length, "problem")})`]));
    return EXIT.VERIFY_FAILED;
  } catch (err) {
    return report(err, PREFIX, VERIFY_USAGE);
  }
}
