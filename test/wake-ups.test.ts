// Parked runs are woken by one timer for the earliest due time, not one timer each: however
// many runs park, a process holds one timer and a bounded list of times.
import { expect, it, vi } from "vitest";
import { MAX_WAKE_UPS, wakeUpTimer } from "../src/worker/executor.js";
import { sleep } from "../src/lib/sleep.js";

it("wakes at each due time, in order, arming one timer at a time however many are due", async () => {
  const woken: number[] = [];
  const start = Date.now();
  const wake = wakeUpTimer(() => woken.push(Date.now() - start));
  const armed = vi.spyOn(globalThis, "setTimeout");
  try {
    // Given out of order, and far more than are kept (the earliest are kept).
    for (const at of [300, 100, 200]) wake.add(start + at);
    for (let i = 0; i < MAX_WAKE_UPS * 2; i++) wake.add(start + 3_600_000 + i);
    expect(armed).toHaveBeenCalledTimes(2); // for 300, then again for the earlier 100
  } finally {
    armed.mockRestore();
  }
  await sleep(450);
  expect(woken).toHaveLength(3);
  expect(woken[0]).toBeGreaterThanOrEqual(100);
  expect(woken[1]).toBeGreaterThanOrEqual(200);
  expect(woken[2]).toBeGreaterThanOrEqual(300);
  wake.stop();
});
