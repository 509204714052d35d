// The cache's clock assumption, checked: a process compares its clock with the database
// server's and warns when they differ by more than runhook's tolerance.
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Logger } from "pino";
import { CLOCK_SKEW_WARN_MS, startClockCheck } from "../src/main.js";
import { openStore, type Store } from "../src/store/index.js";
import { testDbName, uriFor } from "./helpers/server.js";
import { sleep } from "../src/lib/sleep.js";

let store: Store;
beforeAll(async () => {
  store = await openStore(uriFor(testDbName()));
});
afterAll(async () => store?.close());

it("measures the database server's clock against this process's", async () => {
  const skew = await store.clockSkewMs();
  expect(Number.isFinite(skew)).toBe(true);
  expect(Math.abs(skew)).toBeLessThan(2000); // the same machine
});

it("warns when the clocks differ by more than the tolerance, and only then", async () => {
  const warnings: unknown[] = [];
  const logger = { warn: (obj: unknown) => void warnings.push(obj) } as unknown as Logger;
  for (const [skew, warned] of [
    [CLOCK_SKEW_WARN_MS + 20_000, true],
    [-(CLOCK_SKEW_WARN_MS + 1), true],
    [CLOCK_SKEW_WARN_MS - 1000, false],
  ] as const) {
    warnings.length = 0;
    const timer = startClockCheck({ ...store, clockSkewMs: async () => skew }, logger);
    await sleep(50);
    clearInterval(timer);
    expect(warnings, String(skew)).toEqual(warned ? [{ clockSkewMs: skew }] : []);
  }
});
