import { defineConfig } from "vitest/config";
import base from "./vitest.config.js";

// `npm run test:fuzz`: generated requests against a real server (test/fuzz/: webhook bodies from a
// seeded PRNG, Schemathesis over GET /openapi.json and over the published document), apart from
// `npm test` because they take minutes.
export default defineConfig({
  test: { ...base.test, include: ["test/fuzz/**/*.test.ts"], exclude: ["**/node_modules/**"] },
});
