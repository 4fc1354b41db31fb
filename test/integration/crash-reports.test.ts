import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("an engine that crashes is caught and named", () => {
  it("a library that dies with SIGILL fails the smoke check, is never cached, and strata up names the signal (of the certify step)", async () => {
    const r = await denoRun(`${root}test/integration/crash-reports.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.smoke).toMatch(/^engine smoke check: .* died with SIGILL \(illegal instruction/);
    expect(out.smoke).toMatch(
      /decoding a mixed batch \(built for CPU features: [a-z0-9 -]+\); nothing was cached/,
    );
    expect(out.cached).toBe(false);
    expect(out.staging_left).toEqual([]);
    expect(out.up_code).toBe(1);
    // the first process of `up` to run the engine: certifying the tracker's reference (the
    // tracker itself never loads the model)
    expect(out.up_stderr).toMatch(/certify exited before it was ready \(SIGILL \(illegal instruction/);
  });
});
