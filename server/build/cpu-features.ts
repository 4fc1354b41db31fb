// The instruction-set extensions a native build compiles for (GGML_NATIVE: -march=native),
// as the compiler reports them: part of the library's cache key (a library built for
// another CPU is never reused) and named when a smoke check fails.

/** e.g. ["amx-int8", "amx-tile", "avx2", "avx512f", "f16c", "fma", …], sorted. */
export function nativeCpuFeatures(compiler = Deno.env.get("CXX") ?? "c++"): string[] {
  try {
    const out = new Deno.Command("sh", {
      args: ["-c", `echo | ${compiler} -march=native -dM -E -x c -`],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    if (!out.success) return [];
    const features = new Set<string>();
    for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
      // the ISA macros: __AVX512F__, __AMX_TILE__, __F16C__, __FMA__, __SSE4_2__, …
      const m = /^#define __((?:AVX|AMX|F16C|FMA|SSE|SSSE|BMI|VPCLMUL|VAES|GFNI|POPCNT)[A-Z0-9_]*)__ 1$/.exec(
        line.trim(),
      );
      if (m) features.add(m[1].toLowerCase().replaceAll("_", "-"));
    }
    return [...features].sort();
  } catch {
    return [];
  }
}
