import { describe, expect, it } from "vitest";
import { describeExit, OutputTail, signalName } from "../../server/process/exit.ts";

describe("how a child process ended, in words", () => {
  it("names signals and their meaning instead of a bare number", () => {
    expect(signalName("SIGILL")).toMatch(/^SIGILL \(illegal instruction/);
    expect(describeExit({ success: false, code: 132, signal: "SIGILL" })).toMatch(/^SIGILL \(illegal/);
    // a shell wrapper reports 128 + n: the signal is named all the same
    expect(describeExit({ success: false, code: 139, signal: null })).toBe(
      "exit 139, SIGSEGV (segmentation fault)",
    );
    expect(describeExit({ success: false, code: 1, signal: null })).toBe("exit 1");
  });

  it("keeps the last lines of output, across chunks that split lines", () => {
    const t = new OutputTail(3);
    t.push("a\nb\nc");
    t.push("d\ne\n");
    t.push("f");
    expect(t.lines()).toEqual(["cd", "e", "f"]);
  });
});
