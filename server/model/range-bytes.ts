// A range's bytes of a model file on disk, as a sparse model: the header and the tensors the
// range loads, nothing else (a WASM node never reads the whole model into memory).
import type { SparseModel } from "../../src/artifact/sparse.ts";
import type { LayerRange } from "../../src/engine/layer-range.ts";
import { buildManifest, shardBytes } from "../../src/gguf/manifest.ts";
import { readHeader } from "./facts.ts";

export async function readRangeBytes(path: string, range: LayerRange | "whole"): Promise<SparseModel> {
  const file = await Deno.open(path);
  try {
    const size = (await file.stat()).size;
    const header = await readHeader(path);
    const m = buildManifest(header, size, "0".repeat(64));
    const want: Array<readonly [number, number]> = [[0, header.dataOffset]];
    if (range === "whole") want.push([header.dataOffset, size]);
    // a range the model does not have: the header alone, and the engine says what is wrong
    else if (range.end <= m.nLayer) want.push(...shardBytes(m, range.start, range.end).spans);
    const spans = [];
    for (const [from, to] of want) {
      const bytes = new Uint8Array(to - from);
      await file.seek(from, Deno.SeekMode.Start);
      for (let got = 0; got < bytes.length;) {
        const n = await file.read(bytes.subarray(got));
        if (n === null) throw new Error(`${path} ends at ${from + got}, inside the range's bytes`);
        got += n;
      }
      spans.push({ offset: from, bytes });
    }
    return { size, spans };
  } finally {
    file.close();
  }
}
