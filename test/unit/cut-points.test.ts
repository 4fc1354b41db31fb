// Where a model may be cut: glm-dsa's shared-indexer layers reuse the top-k of the full layer
// before them, so no range starts at one; deepseek4's hash-routed layers need the token ids,
// so they stay in the first range. The rule comes from the header and is enforced by splits,
// the tracker's registrations and placement.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { evenSplit, formatRange, parseSplit } from "../../src/engine/layer-range.ts";
import { RegisterRequestSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { cutRefusal, cutRule } from "../../src/gguf/cut-points.ts";
import { kvShape } from "../../src/gguf/kv-shape.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { writeGguf } from "../../src/gguf/writer.ts";
import { synthModel } from "../../src/model/synth.ts";
import { checkRegistration } from "../../src/tracker/membership/registration.ts";

const ARTIFACT = "cd".repeat(32);
const file = synthModel({ arch: "glm-dsa" });
const header = parseGgufHeader(file);

describe("glm-dsa's cut rule", () => {
  it("refuses a range start at every shared-indexer layer, and says why", () => {
    const rule = cutRule(header)!;
    // full indexer layers 0 and 3 of 6
    expect(rule.refused).toEqual([1, 2, 4, 5]);
    expect(cutRefusal(rule, 3)).toBeUndefined();
    expect(cutRefusal(rule, 4)).toMatch(
      /^no range may start at layer 4: a shared-indexer layer reuses the top-k/,
    );
    // other architectures cut anywhere
    expect(cutRule(parseGgufHeader(synthModel({ arch: "deepseek2" })))).toBeUndefined();
  });

  it("follows llama.cpp's defaults: all layers full, or GLM-5.2's list at a 1M context", () => {
    const glm = (ctx: number) =>
      cutRule(parseGgufHeader(writeGguf({
        metadata: [
          ["general.architecture", "glm-dsa"],
          ["glm-dsa.block_count", 10, "u32"],
          ["glm-dsa.context_length", ctx, "u32"],
        ],
        tensors: [],
      })));
    expect(glm(202752)).toBeUndefined();
    // two full layers, then one in four
    expect(glm(1048576)!.refused).toEqual([3, 4, 5, 7, 8, 9]);
  });

  it("is enforced by splits and by the tracker's registrations", () => {
    const rule = cutRule(header);
    expect(() => parseSplit("0:2,2:6", 6, rule)).toThrow(/no range may start at layer 2/);
    expect(parseSplit("0:3,3:6", 6, rule).map(formatRange)).toEqual(["0:3", "3:6"]);
    // an even split moves its boundary to the nearest allowed cut
    expect(evenSplit(6, 2, rule).map(formatRange)).toEqual(["0:3", "3:6"]);
    expect(() => evenSplit(6, 3, rule)).toThrow(/cannot split 6 layers into 3 ranges/);
    const manifest = buildManifest(header, file.length, ARTIFACT);
    const model = { artifact: ARTIFACT, nLayer: 6, manifest, kv: kvShape(header).layers };
    const register = (start: number, end: number) =>
      checkRegistration(
        create(RegisterRequestSchema, {
          node: "n",
          urls: ["http://n:1"],
          shard: {
            artifactSha256: hexToBytes(ARTIFACT),
            range: { start, end },
            kvCells: 256,
            maxSessions: 1,
          },
        }),
        model,
      );
    expect(register(3, 6).start).toBe(3);
    expect(() => register(4, 6)).toThrow(/layers 4:6: no range may start at layer 4/);
  });

  it("gives full indexer layers their indexer keys in the KV layout, beside the latent K", () => {
    const layers = kvShape(header).layers;
    expect(layers[0]).toEqual({ k: 48, v: 0, window: 0, indexer: 64 });
    expect(layers[1]).toEqual({ k: 48, v: 0, window: 0 });
    // the indexer's tensors exist in full layers only
    const names = new Set(header.tensors.map((t) => t.name));
    expect(names.has("blk.3.indexer.attn_k.weight")).toBe(true);
    expect(names.has("blk.4.indexer.attn_k.weight")).toBe(false);
  });
});

describe("deepseek4's cut rule", () => {
  it("keeps the hash-routed layers in the first range", () => {
    const h = parseGgufHeader(synthModel({ arch: "deepseek4", hashLayers: 3 }));
    const rule = cutRule(h)!;
    expect(rule.refused).toEqual([1, 2]);
    expect(cutRefusal(rule, 2)).toMatch(
      /^no range may start at layer 2: a hash-routed layer picks its experts by token id/,
    );
    expect(parseSplit("0:3,3:6", 6, rule).map(formatRange)).toEqual(["0:3", "3:6"]);
    expect(() => evenSplit(6, 3, rule)).not.toThrow();
    expect(evenSplit(6, 3, rule)[0].end).toBeGreaterThanOrEqual(3);
    // one hash-routed layer (layer 0) is the first range's anyway
    expect(cutRule(parseGgufHeader(synthModel({ arch: "deepseek4", hashLayers: 1 })))).toBeUndefined();
  });
});
