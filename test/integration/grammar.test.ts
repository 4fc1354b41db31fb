import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));

describe.skipIf(!built)("constrained decoding in the engine (llama.cpp's grammar, native and WASM)", () => {
  it("keeps greedy answers to a JSON Schema's grammar on both engines, with the same masks; bad grammars and refused tokens are errors that leave each engine working", async () => {
    const r = await denoRun(`${root}test/integration/grammar.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // the grammar is integer work over the vocabulary's pieces: one mask on every engine
    expect(out.first_mask.same).toBe(true);
    expect(out.first_mask.native).toBeGreaterThan(0);
    expect(out.first_mask.native).toBeLessThan(1000);
    for (const kind of ["native", "wasm"]) {
      const e = out[kind];
      expect(e.ended, e.text).toBe(true);
      expect(e.valid, e.text).toBe(true);
      expect(e.bad_grammar).toMatch(/^bad_input: grammar: /);
      expect(e.too_big).toBe("bad_input");
      expect(e.refused_token).toMatch(/^bad_input: grammar: token \d+ is not allowed here/);
      expect(e.fresh_allowed).toBe(out.first_mask.native);
      expect(e.decodes_after).toBe(1);
    }
  });
});
