import { describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { denoRun, root } from "./strata.ts";

const wasmDir = join(process.env.STRATA_CACHE ?? join(homedir(), ".cache", "strata"), "wasm");
const built = existsSync(wasmDir) &&
  readdirSync(wasmDir).some((d) => d.startsWith("cpu-") && existsSync(join(wasmDir, d, "strata.wasm")));
if (!built) {
  console.warn("partial-artifact test skipped: its WASM half needs emscripten (apt-get install emscripten)");
}

describe.skipIf(!built)("partial artifacts: a shard downloads only its range's bytes", () => {
  it("from several sources, hash-checked, resumable, and loadable by both engines", async () => {
    const r = await denoRun(`${root}test/integration/artifacts.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    console.log(
      `shard 10:20: ${out.first.shardBytes} of ${out.fileBytes} bytes (${out.pieces} pieces); ` +
        `by source ${JSON.stringify(out.first.bySource)}; ${out.first.rejected} refused`,
    );

    // only the range's bytes, far less than the file, every one fetched once
    expect(out.first.fetchedBytes).toBe(out.first.shardBytes);
    expect(out.first.shardBytes).toBeLessThan(out.fileBytes / 2);
    // the tampering peer's pieces failed their hash and came from the others instead
    expect(out.first.rejectedReasons).toEqual(["liar: sha256 mismatch"]);
    expect(out.first.rejected).toBeGreaterThan(0);
    expect(out.first.bySource.liar).toBeUndefined();
    expect(out.first.bySource.peer).toBeGreaterThan(0);
    expect(out.first.bySource.origin).toBeGreaterThan(0);

    // an interrupted download resumes: what it had is reused, only the rest is fetched
    expect(out.interrupted).toBe("AbortError");
    expect(out.resumed.cachedBytes).toBeGreaterThan(0);
    expect(out.resumed.cachedBytes + out.resumed.fetchedBytes).toBe(out.first.shardBytes);

    // a manifest for another artifact, and one whose pieces do not tile the tensors
    expect(out.refusals[0]).toMatch(/^the manifest is for artifact [0-9a-f]{12}…, not 000000000000…$/);
    expect(out.refusals[1]).toMatch(/piece 5 .* does not match the tensors/);

    // the sparse file holds only the present spans on disk, and loads like the whole file
    expect(out.sparseFile.size).toBe(out.fileBytes);
    expect(out.sparseFile.allocatedBytes).toBeLessThan(out.fileBytes / 2);
    expect(out.nativeSparseVsWhole).toBe(0);
    expect(out.wasmSparseVsWhole).toBe(0);
  });
});
