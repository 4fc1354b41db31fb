// A node refuses, before it loads anything, a range that its memory cap cannot hold, with
// one line naming weights, KV and compute; under a cap that holds it, it serves and
// advertises that cap.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { newRouteKeyText } from "../../src/route/keys.ts";
import { strata, strataUntilReady } from "./strata.ts";

let node: (cap: string, more?: string[]) => string[];

beforeAll(async () => {
  const key = join(mkdtempSync(join(tmpdir(), "strata-memory-cap-")), "route-key.json");
  writeFileSync(key, JSON.stringify(await newRouteKeyText()));
  // SmolLM2 whole: 30 layers, 16 sessions, batches of 512 tokens
  node = (
    cap,
    more = [],
  ) => [
    "node",
    "--layers",
    "0:30",
    "--listen",
    "127.0.0.1:0",
    "--route-key",
    key,
    "--memory-cap",
    cap,
    ...more,
  ];
});

describe("a node's memory cap", () => {
  it("refuses a range past it before loading: exit 1, one line with weights, KV and compute", async () => {
    const r = await strata(node("256MB", ["--kv-cells", "8192"]));
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toBe("");
    const line = r.stderr.trim();
    // no stack trace, no engine log: the one line
    expect(line.split("\n")).toHaveLength(1);
    const m = line.match(
      /^strata: layers 0:30 need ([\d.]+) MiB \(weights ([\d.]+) MiB \+ KV ([\d.]+) MiB \+ compute ([\d.]+) MiB\), more than the memory cap of 244\.1 MiB$/,
    );
    expect(m, line).not.toBeNull();
    const [total, weights, kv, compute] = m!.slice(1).map(Number);
    expect(weights).toBe(92.1); // the Q4_1 file's tensors
    expect(kv).toBe(180); // 2 × 30 layers × 8192 cells × 192 × f16
    // llama.cpp reserves 98.25 MiB for this graph and 3 MiB of logits (docs/engine.md)
    expect(compute).toBeGreaterThanOrEqual(101.25);
    expect(compute).toBeLessThan(110);
    expect(Math.abs(total - (weights + kv + compute))).toBeLessThan(0.2);
  });

  it("rejects a size it cannot read", async () => {
    const r = await strata(node("2XB"));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`"2XB" is not a memory size`);
  });

  it("loads under a cap that holds the range, and advertises that cap", async () => {
    const r = await strataUntilReady(node("1GiB"));
    expect(r.ready, r.stderr.slice(-2000)).toMatchObject({ event: "ready", layers: "0:30" });
    expect(r.ready!.memory_cap_bytes).toBe(2 ** 30);
    // the default pool (4096 cells for each of 16 sessions: 1.4 GiB of KV) halved until it fits
    expect(r.ready!.kv_cells).toBe(32_768);
  });

  it("without --kv-cells, makes the pool as large as the cap holds, not refuses", async () => {
    const r = await strataUntilReady(node("256MB"));
    expect(r.ready, r.stderr.slice(-2000)).toMatchObject({ event: "ready", layers: "0:30" });
    // weights 92.1 MiB + compute ~105 MiB leave room for 2048 cells (45 MiB), not 4096 (90 MiB)
    expect(r.ready!.kv_cells).toBe(2048);
  });
});
