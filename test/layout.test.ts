// The layout's boundaries, checked on the sources themselves: only src/store/ talks to the
// database driver; each folder imports only what its world may touch; no function grows
// past what a reader can hold at once.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");
const LONGEST_FUNCTION_LINES = 80;

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|js|mjs)$/.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** Every module a file imports (static, dynamic and re-exports), as written. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  return [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g)].map((m) => m[1]!);
}

/**
 * The world of src/ a file belongs to: its folder (`store`, `services`, …), or for a file at
 * the top of src/ its own name (`main`, `config`): top-level files follow the same rules as
 * folders.
 */
function worldOf(srcRelative: string): string {
  return srcRelative.includes("/") ? srcRelative.split("/")[0]! : srcRelative.replace(/\.(ts|js)$/, "");
}

/** The world of src/ a relative import lands in, or undefined outside src/. */
function srcWorldOf(file: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const target = relative(join(ROOT, "src"), resolve(ROOT, dirname(file), spec));
  return target.startsWith("..") ? undefined : worldOf(target);
}

const FILES = [...sources("src"), ...sources("test"), ...sources("fixtures"), ...sources("bench"), ...sources("scripts"), ...sources("bin")];

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(join(ROOT, file), "utf8"), ts.ScriptTarget.Latest, true);
}

/** The update operators only src/store/ may write. */
const UPDATE_OPERATORS = new Set(["$set", "$inc", "$push", "$pull"]);
/** The folders whose files (but src/store/'s) may not write an update operator. */
const NO_UPDATES_IN = ["src", "test", "fixtures", "bench", "scripts"];
/** Files that may spell an update operator, each for its reason. */
const UPDATES_ALLOWED: Record<string, string> = {
  "test/db-semantics.test.ts": "it checks the database's own guarantees (atomic $inc, conditional updates) that the store's verbs rely on",
  "test/admin.test.ts": "an operator is hostile input there: a workflow step that must be refused",
  "test/layout.test.ts": "it names the operators it looks for",
};

/** Where `file` writes an update operator in its code (as a key or a string; comments do not count). */
function updateOperatorsIn(file: string): string[] {
  const source = parse(file);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isIdentifier(node) || ts.isStringLiteralLike(node)) && UPDATE_OPERATORS.has(node.text)) {
      found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1} ${node.text}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("layout", () => {
  it("only src/store/ imports the database driver", () => {
    const offenders = FILES.filter((f) => !f.startsWith("src/store/") && importsOf(f).some((s) => s === "mongodb" || s.startsWith("mongodb/")));
    expect(offenders).toEqual([]);
  });

  it("the collection handles never leave src/store/: outside it, only store/index.ts (and its types) is imported", () => {
    // Tests and benchmarks read collections through the fixtures' read-only views and change
    // them through verbs, never through a handle of their own.
    const inner = (f: string, s: string) =>
      s.startsWith(".") && /(^|\/)src\/store\/(?!index\.js$|types\.js$)[^/]+$/.test(relative(ROOT, resolve(ROOT, dirname(f), s)));
    const offenders = FILES.filter((f) => !f.startsWith("src/store/")).flatMap((f) =>
      importsOf(f)
        .filter((s) => inner(f, s) && /\/(connection|handle|indexes)\.js$/.test(s))
        .map((s) => `${f} imports ${s}`),
    );
    expect(offenders).toEqual([]);
  });

  it("domain/ imports no @connectrpc/* and no gen/", () => {
    // The rules know no transport: their refusals are DomainErrors, turned into Connect and HTTP answers by rpc/errors.ts.
    const offenders = FILES.filter((f) => f.startsWith("src/domain/")).flatMap((f) =>
      importsOf(f)
        .filter((s) => s.startsWith("@connectrpc/") || (s.startsWith(".") && relative(ROOT, resolve(ROOT, dirname(f), s)).startsWith("gen/")))
        .map((s) => `${f} imports ${s}`),
    );
    expect(offenders).toEqual([]);
  });

  it("each world of src/ imports only the worlds below it", () => {
    // Downward only: http → rpc → services → domain → store → lib. The worker runs over domain
    // and store; main and the CLI wire everything together.
    const mayImport: Record<string, string[] | "anything"> = {
      lib: [],
      config: [],
      store: ["lib", "config"],
      embedded: ["store", "lib", "config"],
      domain: ["store", "lib", "config"],
      services: ["domain", "store", "lib", "config", "deps"],
      rpc: ["services", "domain", "store", "lib", "config", "deps"],
      http: ["rpc", "services", "domain", "lib", "config", "deps"],
      worker: ["domain", "store", "lib", "config", "deps"],
      deps: ["config", "store", "lib"],
      cli: "anything",
      main: "anything",
    };
    const offenders: string[] = [];
    for (const f of FILES.filter((f) => f.startsWith("src/"))) {
      const world = worldOf(f.slice("src/".length));
      const allowed = mayImport[world];
      if (!allowed) {
        offenders.push(`${f}: ${world} is no known world of src/ (add it to this test with the worlds it may import)`);
        continue;
      }
      for (const spec of importsOf(f)) {
        const to = srcWorldOf(f, spec);
        if (to && to !== world && allowed !== "anything" && !allowed.includes(to)) offenders.push(`${f} imports ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("no file outside src/store/ — src, tests, benchmarks, scripts — writes an update ($set, $inc, $push, $pull): the store's verbs do", () => {
    const checked = FILES.filter((f) => NO_UPDATES_IN.some((dir) => f.startsWith(`${dir}/`)) && !f.startsWith("src/store/") && !UPDATES_ALLOWED[f]);
    expect(checked.length).toBeGreaterThan(0);
    expect(checked.flatMap(updateOperatorsIn)).toEqual([]);
    // The check sees the updates the store does write.
    expect(updateOperatorsIn("src/store/runs.ts").filter((hit) => hit.endsWith(" $set")).length).toBeGreaterThan(0);
  });

  it("no Store carries its database: the Store type has no collection handles", () => {
    const store = readFileSync(join(ROOT, "src/store/index.ts"), "utf8");
    const iface = /export interface Store \{([\s\S]*?)\n\}/.exec(store)?.[1] ?? "";
    expect(iface).toContain("runs: RunStore");
    expect(iface).not.toMatch(/\bdb\b\s*:|Database/);
  });

  it(`no function of src/ is ${LONGEST_FUNCTION_LINES} lines or longer`, () => {
    const long: string[] = [];
    for (const f of FILES.filter((f) => f.startsWith("src/") && f.endsWith(".ts"))) {
      const source = parse(f);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && "body" in node && node.body) {
          const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
          const last = source.getLineAndCharacterOfPosition(node.end).line;
          if (last - first + 1 >= LONGEST_FUNCTION_LINES) long.push(`${f}:${first + 1} (${last - first + 1} lines)`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(long).toEqual([]);
  });
});
