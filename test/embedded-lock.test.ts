// The directory lock that lets one local process start the embedded database (or build its jar):
// a holder that takes longer than the lock's staleness keeps it, as long as it is alive.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { withDirLock } from "../src/embedded/lock.js";
import { sleep } from "../src/lib/sleep.js";

const dir = mkdtempSync(join(tmpdir(), "runhook-lock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a live holder keeps the lock past its staleness; the next one gets it once it is released", async () => {
  const lock = join(dir, "start.lock");
  const events: string[] = [];
  const holder = withDirLock(
    lock,
    200,
    20,
    async () => undefined,
    async () => {
      events.push("first in");
      await sleep(1000); // five times the staleness
      events.push("first out");
      return "first";
    },
  );
  await sleep(50);
  const waiter = withDirLock(
    lock,
    200,
    20,
    async () => undefined,
    async () => {
      events.push("second in");
      return "second";
    },
  );
  expect(await Promise.all([holder, waiter])).toEqual(["first", "second"]);
  expect(events).toEqual(["first in", "first out", "second in"]);
});

test("a holder whose lock was broken and taken meanwhile leaves the new holder's lock in place", async () => {
  const lock = join(dir, "taken.lock");
  await withDirLock(
    lock,
    200,
    20,
    async () => undefined,
    async () => {
      // As if this process had stalled past the staleness and another had broken the lock and taken it.
      rmSync(lock, { recursive: true, force: true });
      mkdirSync(lock);
      writeFileSync(join(lock, "holder"), "another-host 1");
    },
  );
  expect(readFileSync(join(lock, "holder"), "utf8")).toBe("another-host 1");
});
