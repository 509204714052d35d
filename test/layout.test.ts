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

/** The folder of src/ a relative import lands in (`store`, `api`, …), or undefined outside src/. */
function srcFolderOf(file: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const target = relative(join(ROOT, "src"), resolve(ROOT, dirname(file), spec));
  if (target.startsWith("..")) return undefined;
  return target.includes("/") ? target.split("/")[0] : "(top)";
}

const FILES = [...sources("src"), ...sources("test"), ...sources("bench"), ...sources("scripts"), ...sources("bin")];

describe("layout", () => {
  it("only src/store/ imports the database driver", () => {
    const offenders = FILES.filter((f) => !f.startsWith("src/store/") && importsOf(f).some((s) => s === "mongodb" || s.startsWith("mongodb/")));
    expect(offenders).toEqual([]);
  });

  it("each folder of src/ imports only the worlds it may touch", () => {
    // domain: rules; api: services over domain; http: the gateway over api; worker: runs over domain.
    const forbidden: Record<string, string[]> = {
      store: ["api", "http", "worker", "cli"],
      domain: ["api", "http", "worker", "cli"],
      api: ["http", "worker", "cli"],
      http: ["worker", "cli"],
      worker: ["api", "http", "cli"],
    };
    const offenders: string[] = [];
    for (const f of FILES.filter((f) => f.startsWith("src/"))) {
      const world = f.split("/")[1]!;
      for (const spec of importsOf(f)) {
        const to = srcFolderOf(f, spec);
        if (to && forbidden[world]?.includes(to)) offenders.push(`${f} imports ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it(`no function of src/ is ${LONGEST_FUNCTION_LINES} lines or longer`, () => {
    const long: string[] = [];
    for (const f of FILES.filter((f) => f.startsWith("src/") && f.endsWith(".ts"))) {
      const source = ts.createSourceFile(f, readFileSync(join(ROOT, f), "utf8"), ts.ScriptTarget.Latest, true);
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
