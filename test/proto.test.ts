// The protos are our public API: they lint clean and gen/ is exactly what they generate.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./helpers/server.js";

const BUF = join(ROOT, "node_modules/.bin/buf");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

describe("protos", () => {
  it("pass buf lint (STANDARD)", () => {
    expect(() => execFileSync(BUF, ["lint"], { cwd: ROOT, encoding: "utf8" })).not.toThrow();
  });

  it("generate exactly the committed gen/", () => {
    const out = mkdtempSync(join(tmpdir(), "runhook-gen-"));
    try {
      // Our protos, and the vendored grpc health/reflection protos (their own buf config).
      execFileSync(BUF, ["generate", "-o", out], { cwd: ROOT });
      execFileSync(BUF, ["generate", "--template", "buf.gen.grpc.yaml", "--config", "proto/grpc/buf.vendor.yaml", "-o", out], { cwd: ROOT });
      const fresh = files(join(out, "gen"))
        .map((f) => relative(out, f))
        .sort();
      const committed = files(join(ROOT, "gen"))
        .map((f) => relative(ROOT, f))
        .sort();
      expect(committed).toEqual(fresh);
      for (const f of fresh) expect(readFileSync(join(ROOT, f), "utf8"), `${f} is stale: run npm run generate`).toBe(readFileSync(join(out, f), "utf8"));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 60_000);
});
