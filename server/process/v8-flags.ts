// V8 flags for every Deno process Strata starts (the `strata` launcher passes the same).
// WebAssembly engines run twice as fast when V8 compiles them with TurboFan up front:
// by default functions start in its baseline compiler (Liftoff) and tier up from background
// threads, which on a machine whose cores are busy (as a node's are) happens late or never.
// Measured: WASM CPU decode 11 → 23 tok/s on SmolLM2, for ~1.5 s more at load.
export const DENO_V8_FLAGS = "--v8-flags=--no-liftoff";

/** The same for Chromium tabs running the engine. */
export const CHROMIUM_JS_FLAGS = "--js-flags=--no-liftoff";
