// Gate A's pure parts: the drift measure and signed reports.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Drift } from "../../checks/gate-a/drift.ts";
import { benchKey, signReport, verifyReport } from "../../checks/gate-a/signed-report.ts";

const logSoftmax = (x: number[]) => {
  const m = Math.max(...x);
  const lse = m + Math.log(x.reduce((s, v) => s + Math.exp(v - m), 0));
  return Float32Array.from(x, (v) => v - lse);
};

describe("drift against the reference", () => {
  it("is zero for the reference's own logits, and the KL of two known distributions otherwise", () => {
    const ref = logSoftmax([2, 1, 0, -1]);
    const d = new Drift();
    d.add(ref, Float32Array.from([2, 1, 0, -1]).map((v) => v + 5)); // a shift changes nothing
    expect(d.summary().kl_mean).toBeCloseTo(0, 6);
    expect(d.summary().top1_agreement).toBe(1);
    // P = (0.5, 0.5), Q = (0.9, 0.1): KL = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1)
    const half = Float32Array.from([Math.log(0.5), Math.log(0.5)]);
    const q = new Drift();
    q.add(half, Float32Array.from([Math.log(0.9), Math.log(0.1)]));
    expect(q.summary().kl_mean).toBeCloseTo(0.5 * Math.log(0.5 / 0.9) + 0.5 * Math.log(5), 5);
  });

  it("counts top-1 agreement, from logits or from a lane's token", () => {
    const ref = logSoftmax([0, 3, 1]);
    const d = new Drift();
    d.add(ref, 1);
    d.add(ref, 2);
    expect(d.summary()).toMatchObject({ positions: 2, top1_agreement: 0.5 });
  });
});

describe("signed reports", () => {
  it("verify what was signed, and fail on any change or another signer", async () => {
    const dir = await mkdtemp(join(tmpdir(), "strata-gate-a-"));
    const key = await benchKey(`${dir}/key.json`);
    expect(await benchKey(`${dir}/key.json`)).toEqual(key); // made once, then read
    const signed = await signReport({ gate: "A", lanes: [{ decode_tps: 61.25 }] }, key);
    const text = JSON.stringify(signed, null, 2);
    expect(await verifyReport(JSON.parse(text))).toMatchObject({ ok: true, signer: key.public });
    expect((await verifyReport(JSON.parse(text), key.public)).ok).toBe(true);
    const tampered = JSON.parse(text.replace("61.25", "71.25"));
    expect(await verifyReport(tampered)).toMatchObject({
      ok: false,
      why: "the signature does not match the report",
    });
    const other = await benchKey(`${dir}/other.json`);
    expect((await verifyReport(JSON.parse(text), other.public)).ok).toBe(false);
    expect((await verifyReport({ gate: "A" })).why).toBe("no Ed25519 signature");
    await rm(dir, { recursive: true });
  });
});
