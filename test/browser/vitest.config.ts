// `npm run test:browser`: the tests that drive a real browser (Debian's chromium, headless,
// through playwright-core). Kept out of `npm test`; .ci/run runs them after it.
import { resolve } from "node:path";
import { defineConfig } from "vitest/config";
import base from "../../vitest.config.js";

export default defineConfig({
  root: resolve(import.meta.dirname, "../.."),
  test: { ...base.test, include: ["test/browser/**/*.browser.ts"] },
});
