import { defineConfig } from "vitest/config";

// Integration tests spawn engine processes: run files one after another on 2 cores.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    fileParallelism: false,
    reporters: ["default"],
  },
});
