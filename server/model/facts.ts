// Reads a GGUF's header from disk with the project's own parser: only the prefix the
// header needs is read (src/gguf/read-header.ts).
import { arch, type GgufHeader, metaNumber, trunkLayers } from "../../src/gguf/reader.ts";
import { readGgufHeader } from "../../src/gguf/read-header.ts";

export async function readHeader(path: string): Promise<GgufHeader> {
  return await readGgufHeader(await Deno.open(path));
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
