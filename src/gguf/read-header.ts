// A GGUF's header read from the start of a file as it streams in: only the prefix the header
// needs is read, growing it when the parser asks for more, so a multi-GB model costs its
// header's size. Any runtime's file with a byte stream and a size will do (Deno's FsFile is one).
import { type GgufHeader, parseGgufHeader } from "./reader.ts";
import { GgufNeedMoreBytes } from "./types.ts";

/** What the read needs of an open file. Its stream is cancelled at the end, which closes it. */
export interface HeaderFile {
  readonly readable: ReadableStream<Uint8Array>;
  stat(): Promise<{ readonly size: number }>;
}

/** The first read: enough for most headers (a large vocabulary's takes several MiB). */
const FIRST_READ = 1 << 20;

export async function readGgufHeader(file: HeaderFile): Promise<GgufHeader> {
  const reader = file.readable.getReader();
  try {
    const size = (await file.stat()).size;
    let bytes: Uint8Array = new Uint8Array(0);
    let ended = false;
    let want = Math.min(size, FIRST_READ);
    for (;;) {
      const chunks: Uint8Array[] = [bytes];
      let got = bytes.length;
      while (got < want && !ended) {
        const { done, value } = await reader.read();
        if (done) {
          ended = true;
        } else {
          chunks.push(value);
          got += value.length;
        }
      }
      if (chunks.length > 1) bytes = concat(chunks, got);
      try {
        return parseGgufHeader(bytes, { fileSize: size });
      } catch (e) {
        if (!(e instanceof GgufNeedMoreBytes) || want >= size || ended) throw e;
        want = Math.min(size, Math.max(e.needed, want * 2));
      }
    }
  } finally {
    await reader.cancel();
  }
}

function concat(chunks: readonly Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(length);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
