// `cmake --build` of some targets with a progress bar from ninja's "[n/N]" lines (nested
// builds, such as the Vulkan shader generator, print smaller totals of their own: ignored).
import { progress } from "../log/progress.ts";
import { runCommand } from "../process/run.ts";

/** Builds and returns the seconds since `started` (the configure step included). */
export async function cmakeBuild(
  label: string,
  buildDir: string,
  targets: readonly string[],
  env: Record<string, string>,
  started: number,
): Promise<number> {
  const bar = progress(label, 1);
  let total = 0;
  await runCommand(
    "cmake",
    ["--build", buildDir, "--target", ...targets, "-j", String(navigator.hardwareConcurrency ?? 2)],
    {
      env,
      onLine: (line) => {
        const m = /^\[\s*(\d+)\/(\d+)\]/.exec(line);
        if (!m || Number(m[2]) < total) return;
        total = Number(m[2]);
        bar.update(Number(m[1]), total);
      },
    },
  );
  const seconds = (performance.now() - started) / 1000;
  bar.finish(`${seconds.toFixed(0)} s`);
  return seconds;
}
