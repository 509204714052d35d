// The guides stay navigable and true to the code: every relative link and #anchor in the
// README, docs/ and bench/README.md resolves, every `npm run` script they name exists, and the
// operators' configuration table lists every variable src/config.ts reads. Reads files only.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");

/** The Markdown files whose links are checked, relative to the root. */
function guides(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  return ["README.md", "bench/README.md", ...docs];
}

function read(file: string): string {
  return readFileSync(join(ROOT, file), "utf8");
}

/** The lines of a Markdown text outside fenced code blocks (a `# comment` in a block is no heading). */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  const lines: string[] = [];
  for (const line of text.split("\n")) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) fence = fence === undefined ? marker : undefined;
    else if (fence === undefined) lines.push(line);
  }
  return lines;
}

/** GitHub's anchor of a heading: its text as rendered, lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  // Inside `code` a <tag> is text; outside it is HTML, which GitHub does not render into the anchor.
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .split("`")
    .map((part, i) => (i % 2 === 1 ? part : part.replace(/<[^>]+>/g, "").replace(/\*/g, "")))
    .join("");
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a Markdown file, repeated headings numbered as GitHub does (`errors`, `errors-1`). */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(read(file))) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every link target of a Markdown file outside code: inline `[text](target)` and `[label]: target`. */
function linksOf(file: string): string[] {
  const targets: string[] = [];
  for (const line of proseLines(read(file))) {
    const prose = line.replace(/`[^`]*`/g, "");
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) targets.push(m[1]!);
    const definition = /^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose)?.[1];
    if (definition) targets.push(definition);
  }
  return targets;
}

/** What is wrong with one relative link of `from`, or undefined when it resolves. */
function brokenLink(from: string, target: string): string | undefined {
  const [path = "", anchor] = target.split("#", 2);
  const file = path === "" ? from : relative(ROOT, resolve(join(ROOT, dirname(from)), decodeURIComponent(path)));
  if (!existsSync(join(ROOT, file))) return `${from}: ${target}: no file ${file}`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith(".md")) return `${from}: ${target}: an anchor into ${file}, which is not Markdown`;
  if (!anchorsOf(file).has(decodeURIComponent(anchor))) return `${from}: ${target}: no heading of ${file} has the anchor #${anchor}`;
  return undefined;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//");

describe("docs", () => {
  it("every relative link and #anchor resolves to a file and a heading in it", () => {
    const relativeLinks = guides().flatMap((from) =>
      linksOf(from)
        .filter((t) => !isExternal(t))
        .map((t) => ({ from, t })),
    );
    // The guides link to each other throughout: finding almost none means the parsing broke.
    expect(relativeLinks.length).toBeGreaterThan(40);
    const broken = relativeLinks.map(({ from, t }) => brokenLink(from, t)).filter((b) => b !== undefined);
    expect(broken).toEqual([]);
  });

  it("anchors are GitHub's: code, punctuation and dashes as GitHub writes them", () => {
    expect(slug("Idempotent retries (`Idempotency-Key`)")).toBe("idempotent-retries-idempotency-key");
    expect(slug("Public API (`/v1`) — integrator's guide")).toBe("public-api-v1--integrators-guide");
    expect(slug("`runhook trigger <webhook-url> <record-id>`")).toBe("runhook-trigger-webhook-url-record-id");
    expect(slug("Executors (`src/worker/`, `src/domain/runs/state.ts`)")).toBe("executors-srcworker-srcdomainrunsstatets");
  });

  it("every `npm run` script the guides name exists in package.json", () => {
    const scripts = Object.keys((JSON.parse(read("package.json")) as { scripts: Record<string, string> }).scripts);
    const named = new Set(guides().flatMap((f) => [...read(f).matchAll(/\bnpm run ([\w:.-]+)/g)].map((m) => `${f}: npm run ${m[1]}`)));
    expect(named.size).toBeGreaterThan(5);
    const unknown = [...named].filter((n) => !scripts.includes(n.split("npm run ")[1]!));
    expect(unknown).toEqual([]);
  });

  it("docs/operators.md has a configuration row for every variable src/config.ts reads, and no other", () => {
    const config = read("src/config.ts");
    const read_ = new Set([...config.matchAll(/\benv\.([A-Z][A-Z0-9_]*)\b|\(env,\s*"([A-Z][A-Z0-9_]*)"/g)].map((m) => (m[1] ?? m[2])!));
    // HOME is the user's, not runhook's: it only places the default RUNHOOK_CACHE_DIR, ~/.cache/runhook.
    read_.delete("HOME");
    expect([...read_]).toEqual(expect.arrayContaining(["MONGODB_URI", "PORT", "RUNHOOK_EXECUTOR_LEASE_MS", "RUNHOOK_SIGNING_KEYS"]));
    const rows = new Set([...read("docs/operators.md").matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]!));
    expect([...read_].filter((name) => !rows.has(name)).sort()).toEqual([]);
    expect([...rows].filter((name) => !read_.has(name)).sort()).toEqual([]);
  });
});
