// How JavaScript calls the flat C API of a WebAssembly build. Pointers are i32 on wasm32
// and i64 (BigInt) on wasm64; int64_t is always BigInt (-sWASM_BIGINT). Every export is
// listed with its parameter kinds, so callers pass plain numbers and get numbers back.

/** p: pointer or size_t, i: int32_t, l: int64_t */
type Kind = "p" | "i" | "l";

export const SIGNATURES = {
  malloc: "p",
  free: "p",
  strata_model_error: "ppi",
  strata_ctx_error: "ppi",
  strata_model_load: "piiiipi",
  strata_model_free: "p",
  strata_model_facts: "ppi",
  strata_model_arch: "ppi",
  strata_ctx_new: "piiiiipi",
  strata_ctx_free: "p",
  strata_decode: "pipipipipipi",
  strata_output_dim: "p",
  strata_outputs: "ppl",
  strata_seq_release: "pi",
  strata_seq_trim: "pii",
  strata_seq_copy: "piii",
  strata_seq_state_size: "pi",
  strata_seq_state_get: "pipl",
  strata_seq_state_set: "pipl",
  strata_ctx_stats: "ppi",
  strata_ctx_last_passes: "p",
  strata_grammar_new: "ppipiipipi",
  strata_grammar_free: "p",
  strata_grammar_error: "ppi",
  strata_grammar_apply: "ppi",
  strata_grammar_accept: "pi",
} as const satisfies Record<string, string>;

export type Export = keyof typeof SIGNATURES;

/** What a module exposes for calls: its exports, and ccall for those that may suspend. */
export interface CallableModule {
  ccall(
    name: string,
    ret: "number",
    types: string[],
    args: (number | bigint)[],
    o?: { async: boolean },
  ): unknown;
}

/** Arguments as the module's ABI wants them. */
export function wasmArgs(name: Export, args: number[], memory64: boolean): (number | bigint)[] {
  const kinds = SIGNATURES[name] as string;
  if (args.length !== kinds.length) {
    throw new Error(`${name} takes ${kinds.length} arguments, not ${args.length}`);
  }
  return args.map((a, i) => {
    const k = kinds[i] as Kind;
    return k === "l" || (k === "p" && memory64) ? BigInt(a) : a;
  });
}

/**
 * Calls exports. `suspends`: the WebGPU flavor (ASYNCIFY) may suspend inside model load,
 * context new/free, decode and outputs; those go through ccall({async: true}), since a
 * direct call would return at the first suspension. The CPU flavor never suspends.
 */
export class WasmAbi {
  constructor(
    private readonly m: CallableModule,
    readonly memory64 = false,
    private readonly suspends = false,
  ) {}

  /** an export that never waits on the GPU */
  now(name: Export, ...args: number[]): number {
    const fn =
      (this.m as unknown as Record<string, (...a: (number | bigint)[]) => number | bigint>)[`_${name}`];
    return Number(fn(...wasmArgs(name, args, this.memory64)));
  }

  /** an export that may reach a GPU wait */
  async call(name: Export, ...args: number[]): Promise<number> {
    if (!this.suspends) return this.now(name, ...args);
    const a = wasmArgs(name, args, this.memory64);
    return Number(await this.m.ccall(name, "number", a.map(() => "number"), a, { async: true }));
  }
}
