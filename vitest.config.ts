import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/crash/**", "**/node_modules/**"], // npm run test:crash (vitest.crash.config.ts)
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
