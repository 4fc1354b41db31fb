// Pieces on disk, one file per sha256 under the cache: what a Deno node downloaded stays
// for its next start, and a half-finished download resumes from it.
import { join } from "node:path";
import type { PieceStore } from "../../src/artifact/store.ts";
import { cacheDir } from "../paths.ts";

export class FsPieceStore implements PieceStore {
  constructor(readonly dir = cacheDir("pieces")) {
    Deno.mkdirSync(dir, { recursive: true });
  }
  async get(sha256: string): Promise<Uint8Array | undefined> {
    try {
      return await Deno.readFile(join(this.dir, sha256));
    } catch {
      return undefined;
    }
  }
  async put(sha256: string, bytes: Uint8Array): Promise<void> {
    // write then rename: a crash never leaves a short piece under its name
    const tmp = join(this.dir, `${sha256}.${crypto.randomUUID()}.part`);
    await Deno.writeFile(tmp, bytes);
    await Deno.rename(tmp, join(this.dir, sha256));
  }
}
