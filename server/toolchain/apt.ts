// Debian packages the test suite's browser and WASM parts need (emscripten, Chromium,
// lavapipe for WebGPU), installed when missing and when this process may run apt-get.
// Where it may not, the tests that need them skip with a message saying so.
import { progress } from "../log/progress.ts";
import { runCommand } from "../process/run.ts";
import { log } from "../log/log.ts";

function installed(pkg: string): boolean {
  const r = new Deno.Command("dpkg-query", {
    args: ["-W", "-f=${Status}", pkg],
    stdout: "piped",
    stderr: "null",
  })
    .outputSync();
  return r.success && new TextDecoder().decode(r.stdout).includes("install ok installed");
}

export async function ensureDebianPackages(pkgs: string[]): Promise<boolean> {
  let missing: string[];
  try {
    missing = pkgs.filter((p) => !installed(p));
  } catch {
    log.warn("apt.unavailable", { reason: "not a Debian system (no dpkg-query)", packages: pkgs });
    return false;
  }
  if (missing.length === 0) return true;
  if (Deno.uid() !== 0) {
    log.warn("apt.skipped", { reason: "not root", missing });
    return false;
  }
  const bar = progress(`apt: installing ${missing.join(", ")}`, 100);
  const env = { DEBIAN_FRONTEND: "noninteractive" };
  let lines = 0;
  const onLine = () => bar.update(Math.min(99, Math.floor(++lines / 4)));
  try {
    await runCommand("apt-get", ["update", "-q"], { env, onLine });
    await runCommand("apt-get", ["install", "-y", "-q", "--no-install-recommends", ...missing], {
      env,
      onLine,
    });
  } catch (err) {
    bar.finish("failed");
    log.warn("apt.failed", {
      missing,
      message: err instanceof Error ? err.message.slice(-400) : String(err),
    });
    return false;
  }
  bar.finish("done");
  return true;
}
