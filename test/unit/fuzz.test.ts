// The fuzz harness, small: every target's seeded inputs (kept regressions first) end in an
// acceptance or a clear refusal, never in an error the checks missed; and a planted bug is
// found, so a clean count means something. `strata fuzz` runs the same targets for longer.
// (gguf-load, under AddressSanitizer, has its own: test/integration/gguf-asan.test.ts.)
import { describe, expect, it } from "vitest";
import { fuzzTarget } from "../../checks/fuzz/fuzz.ts";
import { mutate, prng } from "../../checks/fuzz/mutate.ts";
import { regressionsOf } from "../../checks/fuzz/regressions.ts";
import { TARGETS } from "../../checks/fuzz/targets.ts";
import type { FuzzTarget } from "../../checks/fuzz/target.ts";
import { parseAsanReport } from "../../checks/fuzz/gguf-load.ts";

describe("fuzzing", () => {
  // a target under a sanitizer (gguf-load) needs Deno FFI and the sanitizer build: its small
  // run is test/integration/gguf-asan.test.ts
  for (const t of TARGETS.filter((t) => !t.sanitizer)) {
    it(`${t.name}: 3,000 changed inputs, each accepted or refused clearly`, async () => {
      const regressions = regressionsOf(t.name);
      const r = await fuzzTarget(t, { seed: 7, inputs: 3000, regressions });
      expect(r.distinct_failures, JSON.stringify(r.distinct_failures)).toEqual([]);
      expect(r.timeouts).toBe(0);
      expect(r.inputs).toBe(3000 + regressions.length);
      // the changes reach both sides of the checks: some inputs pass them, most do not
      expect(r.accepted).toBeGreaterThan(0);
      expect(r.refused).toBeGreaterThan(r.inputs / 4);
    });
  }

  it("finds a planted bug, and tells it from refusals", async () => {
    // a length-prefixed record whose reader trusts the length: a RangeError past the end
    const buggy: FuzzTarget = {
      name: "planted",
      proto: false,
      seeds: () => Promise.resolve([Uint8Array.from([3, 1, 2, 3]), Uint8Array.from([1, 9])]),
      start: () =>
        Promise.resolve((b: Uint8Array) => {
          if (b.length === 0) throw new Error("empty record");
          new DataView(b.buffer, b.byteOffset + 1, b[0]);
        }),
    };
    const r = await fuzzTarget(buggy, { seed: 1, inputs: 500 });
    expect(r.failures).toBeGreaterThan(0);
    expect(r.distinct_failures.map((f) => f.signature.split(":")[0])).toContain("RangeError");
    expect(r.refused).toBeGreaterThan(0);
  });

  it("reads an AddressSanitizer report from a dead engine process's stderr", () => {
    const stderr = [
      "some line before",
      "=================================================================",
      "==26925==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000023480 at pc 0x7f18 bp 0x7ffd sp 0x7ffd",
      "WRITE of size 8 at 0x602000023480 thread T0",
      "    #0 0x7f180a78ddb9 in __interceptor_memcpy ../../../../src/libsanitizer/sanitizer_common/x.inc:827",
      "    #1 0x7f180a78ddb9 in operator() /work/main/vendor/llama.cpp/api/strata.cpp:405",
      "    #2 0x7f180a78ddb9 in guarded<int, strata_model_facts(...)::<lambda()> > /work/main/vendor/llama.cpp/api/strata.cpp:79",
      "    #3 0x7f180a78ddb9 in strata_model_facts /work/main/vendor/llama.cpp/api/strata.cpp:390",
      "",
      "SUMMARY: AddressSanitizer: heap-buffer-overflow /work/main/vendor/llama.cpp/api/strata.cpp:405 in operator()",
    ].join("\n");
    const r = parseAsanReport(stderr)!;
    expect(r.signature).toBe(
      "heap-buffer-overflow (WRITE of size 8) @ operator() vendor/llama.cpp/api/strata.cpp:405 in strata_model_facts",
    );
    expect(r.report.split("\n")[0]).toMatch(/ERROR: AddressSanitizer: heap-buffer-overflow/);
    expect(r.report).toMatch(/^SUMMARY: AddressSanitizer/m);
    expect(parseAsanReport("/x/llama-vocab.cpp:2539: GGML_ASSERT(a == b) failed")).toBeUndefined();
  });

  it("gives the same inputs for the same seed", () => {
    const seed = Uint8Array.from([8, 1, 18, 3, 97, 98, 99]);
    const run = (s: number) => {
      const next = prng(s);
      return Array.from({ length: 50 }, () => Array.from(mutate(seed, [seed], next, true)).join(","));
    };
    expect(run(5)).toEqual(run(5));
    expect(run(5)).not.toEqual(run(6));
  });
});
