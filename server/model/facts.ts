// Reads a GGUF's header from disk with the project's own parser: only the prefix the
// header needs is read, growing it when the parser asks for more.
import {
  arch,
  type GgufHeader,
  GgufNeedMoreBytes,
  metaNumber,
  parseGgufHeader,
  trunkLayers,
} from "../../src/gguf/reader.ts";

export async function readHeader(path: string): Promise<GgufHeader> {
  const file = await Deno.open(path);
  try {
    const size = (await file.stat()).size;
    let want = Math.min(size, 1 << 20);
    for (;;) {
      const buf = new Uint8Array(want);
      await file.seek(0, Deno.SeekMode.Start);
      let got = 0;
      while (got < want) {
        const n = await file.read(buf.subarray(got));
        if (n === null) break;
        got += n;
      }
      try {
        return parseGgufHeader(buf.subarray(0, got), { fileSize: size });
      } catch (e) {
        if (!(e instanceof GgufNeedMoreBytes) || want >= size) throw e;
        want = Math.min(size, Math.max(e.needed, want * 2));
      }
    }
  } finally {
    file.close();
  }
}

export async function fileFacts(
  path: string,
): Promise<{ arch: string; nLayer: number; nCtxTrain: number; header: GgufHeader }> {
  return headerFacts(await readHeader(path));
}

export function headerFacts(
  header: GgufHeader,
): { arch: string; nLayer: number; nCtxTrain: number; header: GgufHeader } {
  const a = arch(header);
  // 0 when the file does not say
  return {
    arch: a,
    nLayer: trunkLayers(header),
    nCtxTrain: metaNumber(header, `${a}.context_length`) ?? 0,
    header,
  };
}
