// `strata model synth --size`: a model of about that file size, whose header says the shape
// the command printed.
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { arch, blockCount, metaNumber, parseGgufHeader } from "../../src/gguf/reader.ts";
import type { GgufArray } from "../../src/gguf/types.ts";
import { strata } from "./strata.ts";

const dir = mkdtempSync(join(tmpdir(), "strata-synth-size-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The first n bytes of a file. */
function head(path: string, n: number): Uint8Array {
  const fd = openSync(path, "r");
  try {
    const buf = new Uint8Array(n);
    return buf.subarray(0, readSync(fd, buf, 0, n, 0));
  } finally {
    closeSync(fd);
  }
}

describe("strata model synth --size", () => {
  it("writes a llama of about 60 MB with the shape it prints", async () => {
    const out = join(dir, "llama-60mb.gguf");
    const r = await strata(["model", "synth", "--arch", "llama", "--size", "60MB", "--out", out]);
    expect(r.code, r.stderr).toBe(0);
    const size = statSync(out).size;
    expect(Math.abs(size / 60e6 - 1)).toBeLessThan(0.05);

    const shape = r.stdout.match(
      /(\d+) layers, n_embd (\d+), n_ff (\d+), (\d+) heads, (\d+) kv heads, vocab (\d+), (\w+)/,
    );
    expect(shape, r.stdout).not.toBeNull();
    const [layers, embd, ff, heads, kvHeads, vocab] = shape!.slice(1, 7).map(Number);
    const params = Number(r.stdout.match(/parameters \((\d+)\)/)![1]);
    expect(Number(r.stdout.match(/, (\d+) bytes\n/)![1])).toBe(size);
    expect(shape![7]).toBe("q8_0");

    const h = parseGgufHeader(head(out, 4 << 20), { fileSize: size });
    expect(arch(h)).toBe("llama");
    expect(blockCount(h)).toBe(layers);
    expect(metaNumber(h, "llama.embedding_length")).toBe(embd);
    expect(metaNumber(h, "llama.feed_forward_length")).toBe(ff);
    expect(metaNumber(h, "llama.attention.head_count")).toBe(heads);
    expect(metaNumber(h, "llama.attention.head_count_kv")).toBe(kvHeads);
    expect((h.metadata.get("tokenizer.ggml.tokens")!.value as GgufArray).items).toHaveLength(vocab);
    expect(h.tensors.find((t) => t.name === "output.weight")!.shape).toEqual([embd, vocab]);
    expect(h.tensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0)).toBe(params);
    // the last tensor ends where the file does
    const last = h.tensors[h.tensors.length - 1];
    expect(size - (last.offset + last.size)).toBeLessThan(32);
    // a small model, like one that size
    expect(layers).toBeGreaterThanOrEqual(4);
    expect(embd).toBeLessThanOrEqual(576);
  }, 60_000);

  it("refuses a size it cannot read", async () => {
    const r = await strata([
      "model",
      "synth",
      "--arch",
      "llama",
      "--size",
      "sixty",
      "--out",
      join(dir, "x.gguf"),
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/"sixty" is not a memory size/);
  });
});
