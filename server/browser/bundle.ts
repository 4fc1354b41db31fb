// Bundles a browser entry (a page of web/, or a check's page under checks/; TypeScript that imports the shared core in src/) into one
// ES module with esbuild, in memory: pages are served from what this returns.
import * as esbuild from "esbuild";
import { join } from "node:path";
import { repoRoot } from "../process/paths.ts";

/** one build at a time: each stops esbuild's service when it is done */
let last: Promise<unknown> = Promise.resolve();

/** entry: a path from the repository root, e.g. web/chat/main.ts */
export function bundleWebEntry(entry: string): Promise<string> {
  const built = last.catch(() => {}).then(async () => {
    const r = await esbuild.build({
      entryPoints: [join(repoRoot, entry)],
      bundle: true,
      format: "esm",
      platform: "browser",
      target: "es2022",
      write: false,
      logLevel: "silent",
    });
    await esbuild.stop();
    return r.outputFiles[0].text;
  });
  last = built;
  return built;
}
