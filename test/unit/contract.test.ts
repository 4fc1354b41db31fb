import { describe, expect, it } from "vitest";
import { checkContract } from "../../checks/bench/contract.ts";

const checks = [
  { metric: "ratios.a", min: 0.85, target: "a" },
  { metric: "ratios.b", max: 1, target: "b" },
  { metric: "hosts.c", min: 1, target: "c" },
];

describe("the performance contract", () => {
  it("passes values inside their bounds and fails the others", () => {
    const r = checkContract({ ratios: { a: 0.9, b: 1.3 }, hosts: { c: 1 } }, checks);
    expect(r.map((x) => x.pass)).toEqual([true, false, true]);
    expect(r[1].value).toBe(1.3);
  });

  it("fails a metric the run did not measure, or measured as NaN", () => {
    const r = checkContract({ ratios: { a: NaN, b: 0.5 } }, checks);
    expect(r.map((x) => [x.value, x.pass])).toEqual([[undefined, false], [0.5, true], [undefined, false]]);
  });
});
