// The backends a native build of the fork targets (server/build/native.ts builds one library
// per backend); named here so options, engines and builds agree without importing a build.
export type NativeBackend = "cpu" | "vulkan" | "cuda";
export const NATIVE_BACKENDS: readonly NativeBackend[] = ["cpu", "vulkan", "cuda"];
