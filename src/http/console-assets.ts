// The console's files: built by the project (esbuild bundles console/src with the generated
// clients of gen/ and the one list it shares with the server, src/lib/activity-actions.ts) on first use, into a cache directory named by the sources' hash, and served
// from memory. Never committed; a fresh clone builds it at its first start, with progress
// printed, as it builds the embedded database.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const ROOT = join(import.meta.dirname, "..", "..");
/** What the bundle is made from: a change of any of these builds it again. */
const SOURCES = [join(ROOT, "console"), join(ROOT, "gen", "runhook"), join(ROOT, "src", "lib", "activity-actions.ts"), join(ROOT, "package-lock.json")];
/** The most the console's script and style may weigh, gzipped (checked by test/console-assets.test.ts). */
export const CONSOLE_BUDGET_GZIP_BYTES = 120 * 1024;

export interface ConsoleFile {
  body: Buffer;
  /** The body gzipped once, for browsers that accept it. */
  gzipped: Buffer;
  type: string;
  etag: string;
}

export interface ConsoleAssets {
  /** By name: `index.html`, `app.js`, `app.css`. */
  files: Map<string, ConsoleFile>;
  /** Script and style, gzipped. */
  gzipBytes: number;
}

const TYPES: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
};

function filesUnder(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).flatMap((name) => filesUnder(join(path, name)));
}

function sourcesHash(): string {
  const h = createHash("sha256");
  for (const f of SOURCES.flatMap(filesUnder).sort()) h.update(f.slice(ROOT.length)).update("\0").update(readFileSync(f)).update("\0");
  return h.digest("hex").slice(0, 12);
}

async function build(outDir: string): Promise<void> {
  const { build: esbuild } = await import("esbuild");
  const tmp = `${outDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  await esbuild({
    entryPoints: [join(ROOT, "console", "src", "main.tsx")],
    outfile: join(tmp, "app.js"),
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    jsx: "automatic",
    jsxImportSource: "preact",
    tsconfig: join(ROOT, "console", "tsconfig.json"),
    legalComments: "none",
    logLevel: "silent",
  });
  writeFileSync(join(tmp, "app.css"), readFileSync(join(ROOT, "console", "src", "app.css")));
  writeFileSync(join(tmp, "index.html"), readFileSync(join(ROOT, "console", "index.html")));
  // Another process may have built the same sources meanwhile: either copy is the same.
  try {
    renameSync(tmp, outDir);
  } catch {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The console's files for these sources: built into `cacheDir` unless already there. */
export async function consoleAssets(cacheDir: string, progress: (message: string) => void): Promise<ConsoleAssets> {
  const outDir = join(cacheDir, `console-${sourcesHash()}`);
  if (!existsSync(join(outDir, "app.js"))) {
    const started = Date.now();
    progress("building the console (esbuild)…");
    await build(outDir);
    progress(`console built in ${Date.now() - started} ms`);
  }
  const files = new Map<string, ConsoleFile>();
  for (const name of Object.keys(TYPES)) {
    const body = readFileSync(join(outDir, name));
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 16)}"`;
    files.set(name, { body, gzipped: gzipSync(body, { level: 9 }), type: TYPES[name]!, etag });
  }
  const gzipBytes = ["app.js", "app.css"].reduce((n, name) => n + files.get(name)!.gzipped.byteLength, 0);
  return { files, gzipBytes };
}
