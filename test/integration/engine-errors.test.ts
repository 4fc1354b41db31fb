import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("native engine: bad input is a clear error, never a crash", () => {
  it("refuses each bad input with its code and keeps working", async () => {
    const r = await denoRun(`${root}test/integration/engine-errors.deno.ts`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.range_reversed).toMatch(/^bad_range: invalid layer range \[4, 2\)/);
    expect(out.range_past_end).toMatch(/^bad_range: invalid layer range \[2, 7\) for a model with 6 layers/);
    expect(out.unsupported_arch).toMatch(/^unsupported_arch: unsupported architecture 'gemma'/);
    expect(out.missing_file).toMatch(/^load_failed: no model file/);
    expect(out.hidden_wrong_width).toMatch(
      /^bad_input: hidden state of 63 floats for 1 tokens; expected 1 × 64 \(the seam width\)/,
    );
    expect(out.hidden_non_finite).toMatch(/^bad_input: hidden state holds a non-finite value/);
    expect(out.tokens_to_hidden_shard).toMatch(/^bad_input: this shard takes hidden states/);
    expect(out.unknown_sequence).toMatch(/^unknown_sequence: sequence 1 is not open/);
    expect(out.release_unknown).toMatch(/^unknown_sequence/);
    expect(out.position_gap).toMatch(/^bad_position: sequence 0 expects position 0, got 5/);
    expect(out.token_outside_vocab).toMatch(/^bad_input: token id 1048576 outside the vocabulary/);
    // one pool (batch-invariant contexts keep it ordered): a batch past it is refused with the
    // numbers, takes nothing, and another sequence still gets what is left
    const perSeq = Number(out.kv_per_sequence);
    expect(perSeq).toBe(256);
    expect(out.kv_cells_exhausted).toBe(
      `kv_full: KV budget exhausted: no room for 40 tokens in a pool of ${perSeq} cells (${
        perSeq - 10
      } in use)`,
    );
    expect(out.other_sequence_still_fits).toBe("1");
    expect(out.sequences_exhausted).toMatch(/^kv_full: all 2 sequence slots are in use/);
    expect(out.still_decodes).toBe("1x384");
    expect(out.cells_after_release).toBe("0");
  });
});
