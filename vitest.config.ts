import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Suites of several minutes each, kept out of `npm test` (.ci/run runs them after it):
    // crashes and outages (npm run test:crash), fuzzing and Schemathesis (npm run test:fuzz).
    exclude: ["test/crash/**", "test/fuzz/**", "**/node_modules/**"],
    globalSetup: ["test/helpers/global-setup.ts"],
    // Integration tests start real servers on a real database; give them room.
    testTimeout: 60_000,
    hookTimeout: 600_000,
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2,
    reporters: ["default"],
  },
});
