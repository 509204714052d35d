import { defineConfig } from "vitest/config";

// `npm run test:crash`: processes and the database killed or stopped under load (test/crash/:
// power cuts, SIGKILLed servers and workers, a database outage), apart from `npm test` because
// they take minutes. RUNHOOK_CRASH_ROUNDS sets the number of power cuts (default 3),
// RUNHOOK_CRASH_LOOP_ROUNDS the rounds of the exactly-once crash loop (default 30).
export default defineConfig({
  test: {
    include: ["test/crash/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 600_000,
    hookTimeout: 600_000,
    pool: "forks",
    fileParallelism: false,
    reporters: ["default"],
  },
});
