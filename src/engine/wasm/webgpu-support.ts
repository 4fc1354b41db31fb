// Whether ggml's WebGPU backend can run on this runtime's WebGPU, decided before the
// engine loads, so that a WASM engine falls back to CPU with one reason instead of failing.

/** What the backend requests from the device (ggml-webgpu.cpp: required_features). */
export const WEBGPU_REQUIRED_FEATURES = ["shader-f16"] as const;

/** The part of `navigator.gpu` this needs, so browsers and Deno both fit. */
export interface GpuLike {
  requestAdapter(): Promise<
    { features: ReadonlySet<string>; info?: { description?: string; vendor?: string } } | null
  >;
}

export type WasmBackendChoice =
  | { readonly use: "webgpu"; readonly adapter: string }
  | { readonly use: "cpu"; readonly reason: string };

export async function chooseWasmBackend(gpu: GpuLike | undefined): Promise<WasmBackendChoice> {
  if (!gpu) return { use: "cpu", reason: "this runtime has no WebGPU (navigator.gpu)" };
  let adapter;
  try {
    adapter = await gpu.requestAdapter();
  } catch (err) {
    return { use: "cpu", reason: `no WebGPU adapter: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (!adapter) return { use: "cpu", reason: "no WebGPU adapter was offered" };
  const name = adapter.info?.description || adapter.info?.vendor || "unnamed adapter";
  const missing = WEBGPU_REQUIRED_FEATURES.filter((f) => !adapter.features.has(f));
  if (missing.length) {
    return { use: "cpu", reason: `the WebGPU adapter (${name}) lacks ${missing.join(", ")}` };
  }
  return { use: "webgpu", adapter: name };
}

/** The one line an engine logs when it was asked for WebGPU and runs on CPU instead. */
export const fallbackLine = (reason: string) => `engine: WebGPU unavailable, running on WASM CPU: ${reason}`;

/**
 * The build to load when WebGPU was asked for, on this runtime's `navigator.gpu`: webgpu,
 * or cpu with the fallback line to log.
 */
export async function wasmFlavorFor(
  gpu: GpuLike | undefined,
): Promise<{ flavor: "webgpu" } | { flavor: "cpu"; fallback: string }> {
  const choice = await chooseWasmBackend(gpu);
  return choice.use === "webgpu"
    ? { flavor: "webgpu" }
    : { flavor: "cpu", fallback: fallbackLine(choice.reason) };
}

/** The runtime's WebGPU entry point, where it has one (browsers and Deno). */
export const runtimeGpu = (): GpuLike | undefined => (navigator as unknown as { gpu?: GpuLike }).gpu;
