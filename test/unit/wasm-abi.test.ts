import { describe, expect, it } from "vitest";
import { SIGNATURES, WasmAbi, wasmArgs } from "../../src/engine/wasm/abi.ts";

describe("the WASM ABI", () => {
  it("passes pointers as numbers on wasm32 and as BigInt on wasm64; int64_t is always BigInt", () => {
    expect(wasmArgs("strata_outputs", [7, 1024, 49152], false)).toEqual([7, 1024, 49152n]);
    expect(wasmArgs("strata_outputs", [7, 1024, 49152], true)).toEqual([7n, 1024n, 49152n]);
    // int32_t stays a number on both
    expect(wasmArgs("strata_ctx_new", [5, 256, 4, 64, 2, 0, 8, 2048], true)).toEqual([
      5n,
      256,
      4,
      64,
      2,
      0,
      8n,
      2048,
    ]);
    // every array of a decode comes with its element count (int32_t: ASYNCIFY resumes it)
    expect(wasmArgs("strata_decode", [5, 2, 16, 2, 0, 0, 24, 2, 32, 2, 40, 2], true)).toEqual([
      5n,
      2,
      16n,
      2,
      0n,
      0,
      24n,
      2,
      32n,
      2,
      40n,
      2,
    ]);
  });

  it("refuses a call with the wrong number of arguments", () => {
    expect(() => wasmArgs("strata_decode", [1, 2, 3], false)).toThrow(/takes 12 arguments, not 3/);
  });

  it("lists every export the engine calls, with one kind per parameter", () => {
    for (const kinds of Object.values(SIGNATURES)) expect(kinds).toMatch(/^[pil]*$/);
  });

  it("returns numbers from a module whose exports answer BigInt, and awaits suspending calls", async () => {
    const calls: unknown[][] = [];
    const m = {
      _malloc: (n: bigint) => (calls.push(["malloc", n]), 4096n),
      ccall: async (name: string, _r: string, types: string[], args: unknown[], o?: { async: boolean }) => {
        calls.push([name, types.length, args, o?.async]);
        return await Promise.resolve(3);
      },
    };
    const abi = new WasmAbi(m, true, true);
    expect(abi.now("malloc", 64)).toBe(4096);
    expect(await abi.call("strata_seq_release", 9, 2)).toBe(3);
    expect(calls).toEqual([["malloc", 64n], ["strata_seq_release", 2, [9n, 2], true]]);
  });
});
