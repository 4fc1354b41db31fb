// Pieces on disk, one file per sha256 in a folder: what a node downloaded stays for its next
// start, and a half-finished download resumes from it. node:fs, so Deno and Node hosts share it.
import { mkdirSync } from "node:fs";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { PieceStore } from "../../src/artifact/store.ts";

export class FsPieceStore implements PieceStore {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }
  async get(sha256: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(join(this.dir, sha256)));
    } catch {
      return undefined;
    }
  }
  async put(sha256: string, bytes: Uint8Array): Promise<void> {
    // write then rename: a crash never leaves a short piece under its name
    const tmp = join(this.dir, `${sha256}.${crypto.randomUUID()}.part`);
    await writeFile(tmp, bytes);
    await rename(tmp, join(this.dir, sha256));
  }
}
