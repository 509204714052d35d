// The memo that keeps a token's lastUsedAt to one write a minute per process, with a bounded
// memory, on a made-up clock and writer (the server-side behaviour: admin-lists.test.ts).
import { describe, expect, it } from "vitest";
import { LAST_USED_EVERY_MS, MAX_REMEMBERED_TOKENS, tokenUseRecorder } from "../src/store/index.js";

function recorder() {
  const writes: string[] = [];
  const record = tokenUseRecorder(async (kind, id) => void writes.push(`${kind}:${id}`));
  const settle = () => new Promise((r) => setImmediate(r));
  return { writes, record, settle };
}

describe("tokenUseRecorder", () => {
  it("writes a token's use once a minute at most, each kind of token apart", async () => {
    const { writes, record, settle } = recorder();
    const t0 = 1_000_000;
    record("app", "a", t0);
    record("app", "a", t0 + 1);
    record("app", "a", t0 + LAST_USED_EVERY_MS - 1);
    record("api", "a", t0);
    await settle();
    expect(writes).toEqual(["app:a", "api:a"]);
    record("app", "a", t0 + LAST_USED_EVERY_MS);
    await settle();
    expect(writes).toEqual(["app:a", "api:a", "app:a"]);
  });

  it("never fails or delays its caller: a failing or throwing writer is ignored", async () => {
    const failing = tokenUseRecorder(() => Promise.reject(new Error("down")));
    const throwing = tokenUseRecorder(() => {
      throw new Error("closed");
    });
    expect(() => failing("org", "x")).not.toThrow();
    expect(() => throwing("org", "x")).not.toThrow();
    await new Promise((r) => setImmediate(r));
  });

  it("remembers a bounded number of tokens: beyond, the uses older than a minute are forgotten", async () => {
    const { writes, record, settle } = recorder();
    const t0 = 5_000_000;
    for (let i = 0; i < MAX_REMEMBERED_TOKENS; i++) record("app", `old${i}`, t0);
    record("app", "new", t0 + LAST_USED_EVERY_MS);
    // The old ones were forgotten, the new one is remembered.
    record("app", "new", t0 + LAST_USED_EVERY_MS + 1);
    await settle();
    expect(writes.length).toBe(MAX_REMEMBERED_TOKENS + 1);
    // Full of recent uses: it starts over (one more write each, never unbounded memory).
    for (let i = 0; i < MAX_REMEMBERED_TOKENS; i++) record("app", `recent${i}`, t0 + 2 * LAST_USED_EVERY_MS);
    record("app", "again", t0 + 2 * LAST_USED_EVERY_MS);
    record("app", "recent0", t0 + 2 * LAST_USED_EVERY_MS);
    await settle();
    expect(writes.slice(-2)).toEqual(["app:again", "app:recent0"]);
  });
});
