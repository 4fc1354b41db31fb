// RangeEngine on the native library through Deno FFI: StrataEngine over FfiCalls, plus
// the reference runs' capture of residual streams.
import { existsSync } from "node:fs";
import { EngineError } from "../../../src/engine/errors.ts";
import { contextFlags, type ShardSpec } from "../../../src/engine/range-engine.ts";
import { engineRecipe } from "../../../src/engine/recipe.ts";
import {
  loadModel as loadOn,
  openContext,
  type Opened,
  StrataEngine,
} from "../../../src/engine/strata-engine.ts";
import { checkFileMemory } from "../memory-cap.ts";
import { ensureNativeLibrary } from "../../build/native.ts";
import type { NativeBackend } from "../../../src/engine/backends.ts";
import { openStrata } from "./ffi.ts";
import { FfiCalls } from "./ffi-calls.ts";

/** Loads a model (a range, the whole, or vocab only) from a file and returns its handle. */
export async function loadModel(
  calls: FfiCalls,
  path: string,
  range: ShardSpec["range"],
  gpuLayers: number,
  vocabOnly: boolean,
): Promise<Deno.PointerObject> {
  if (!existsSync(path)) throw new EngineError("load_failed", `no model file at ${path}`);
  return await loadOn(calls, path, range, gpuLayers, vocabOnly);
}

/** The recipe of a library file and backend, hashed once per process. */
const recipes = new Map<string, Promise<Uint8Array>>();
function libraryRecipe(path: string, label: string): Promise<Uint8Array> {
  const key = `${path}|${label}`;
  if (!recipes.has(key)) recipes.set(key, Deno.readFile(path).then((bytes) => engineRecipe(bytes, label)));
  return recipes.get(key)!;
}

export class NativeEngine extends StrataEngine<Deno.PointerObject> {
  readonly kind = "native" as const;

  /** capture: record residual streams for reference comparisons (slower; whole-model runs). */
  static async load(
    spec: ShardSpec,
    backend: NativeBackend = "cpu",
    opts: { capture?: boolean } = {},
  ): Promise<NativeEngine> {
    const gpuLayers = spec.gpuLayers ?? (backend === "cpu" ? 0 : 999);
    // before the library is even opened: on the CPU llama.cpp fuses attention; elsewhere the
    // estimate counts the score matrix
    await checkFileMemory(spec, { capBytes: spec.memoryCapBytes ?? 0, flashAttention: gpuLayers === 0 });
    const path = await ensureNativeLibrary(backend);
    const calls = new FfiCalls(openStrata(path));
    const model = await loadModel(calls, spec.modelPath, spec.range, gpuLayers, false);
    const opened = await openContext(calls, model, spec, contextFlags(spec, opts.capture));
    return new NativeEngine(calls, opened, backend, await libraryRecipe(path, `native-${backend}`), spec);
  }

  private constructor(
    private readonly ffi: FfiCalls,
    opened: Opened<Deno.PointerObject>,
    backend: string,
    recipe: Uint8Array,
    spec: ShardSpec,
  ) {
    super(ffi, opened, backend, recipe, spec);
  }

  /**
   * Keeps this process's core from idling for `windowMs` after each decode (a lowest-priority
   * spinner: strata_keep_awake); 0 stops it. False where the library has none.
   */
  keepAwake(windowMs: number): boolean {
    return this.ffi.lib.strata_keep_awake(Math.max(0, Math.round(windowMs))) === 1;
  }

  /** Reference runs: record the residual stream after these layers in later decodes. */
  capture(layers: number[]): Promise<void> {
    return this.queue.run(() => {
      this.check(this.ffi.lib.strata_ctx_capture(this.ctx, new Int32Array(layers), layers.length));
    });
  }

  /** What the last decode recorded after layer il (n_tokens × the seam width). */
  captured(il: number): Promise<Float32Array> {
    return this.queue.run(() => {
      // one decode records at most batchTokens rows of n_embd after a layer
      const out = new Float32Array(this.spec.batchTokens * this.facts.seamWidth);
      const n = this.check(Number(this.ffi.lib.strata_ctx_captured(this.ctx, il, out, BigInt(out.length))));
      return out.slice(0, n);
    });
  }
}
