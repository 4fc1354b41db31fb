import { describe, expect, it } from "vitest";
import { cannotRun } from "../../web/volunteer/can-run.ts";

const fine = { secureContext: true, crossOriginIsolated: true, webAssembly: true };

describe("the volunteer page says why it cannot run", () => {
  it("gives a reason per missing ability, and none when all are there", () => {
    expect(cannotRun(fine)).toEqual([]);
    expect(cannotRun({ ...fine, secureContext: false })[0]).toMatch(/^This page is not a secure context/);
    expect(cannotRun({ ...fine, crossOriginIsolated: false })[0]).toMatch(/cannot run threads/);
    expect(cannotRun({ ...fine, webAssembly: false })).toEqual(["This browser runs no WebAssembly."]);
    expect(cannotRun({ ...fine, deviceMemoryGiB: 1, needBytes: 3 * 2 ** 30 })[0]).toBe(
      "This device reports 1 GiB of memory; the smallest shard needs 3.0 GiB.",
    );
    expect(cannotRun({ ...fine, secureContext: false, crossOriginIsolated: false })).toHaveLength(2);
  });
});
