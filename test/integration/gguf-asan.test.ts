// The `gguf-load` fuzz target in small (`strata fuzz --target gguf-load` runs it for longer):
// whole GGUF files, changed, loaded by the C API in the AddressSanitizer build of the engine
// library. Every input must end accepted or refused, with no sanitizer report, no crash and no
// failure; and a planted overflow inside the library must come back as an ASan report the
// harness counts, so a clean count means the sanitizer was there. The ASan library is built on
// first use and cached like the normal one (a cold build is a few minutes).
import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("gguf-load under AddressSanitizer", () => {
  it("300 changed GGUF files: accepted or refused, 0 sanitizer reports; a planted overflow is reported", async () => {
    const r = await denoRun(`${root}test/integration/gguf-asan.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const { regressions, fuzzed, planted } = JSON.parse(r.stdout.trim().split("\n").pop()!);

    expect(fuzzed.inputs).toBe(300 + regressions);
    expect(fuzzed.sanitizer_reports, JSON.stringify(fuzzed.distinct_sanitizer_reports)).toBe(0);
    expect(fuzzed.engine_crashes, JSON.stringify(fuzzed.engine_crashed)).toBe(0);
    expect(fuzzed.distinct_failures, JSON.stringify(fuzzed.distinct_failures)).toEqual([]);
    expect(fuzzed.accepted + fuzzed.refused).toBe(fuzzed.inputs);
    // the changes reach both sides of the loader's checks
    expect(fuzzed.accepted).toBeGreaterThan(0);
    expect(fuzzed.refused).toBeGreaterThan(0);

    // the planted bug: each accepted load ends in a heap-buffer-overflow WRITE inside
    // strata_model_facts, which the harness reads from the dead engine process's stderr
    expect(planted.sanitizer_reports).toBeGreaterThan(0);
    expect(planted.accepted).toBe(0);
    expect(planted.distinct_sanitizer_reports).toHaveLength(1);
    const [found] = planted.distinct_sanitizer_reports;
    expect(found.signature).toMatch(
      /^heap-buffer-overflow \(WRITE of size 8\) @ .*strata\.cpp:\d+ in strata_model_facts$/,
    );
    expect(found.report).toMatch(/ERROR: AddressSanitizer: heap-buffer-overflow/);
    expect(found.report).toMatch(/SUMMARY: AddressSanitizer: heap-buffer-overflow/);
  });
});
