// Pieces in the tab's Origin Private File System, one file per sha256: the next visit (or a
// reload) finds them and downloads nothing again; an interrupted download resumes.
import type { PieceStore } from "../../src/artifact/store.ts";

export class OpfsPieceStore implements PieceStore {
  private constructor(private readonly dir: FileSystemDirectoryHandle) {}

  static async open(name = "strata-pieces"): Promise<OpfsPieceStore> {
    const root = await navigator.storage.getDirectory();
    return new OpfsPieceStore(await root.getDirectoryHandle(name, { create: true }));
  }

  async get(sha256: string): Promise<Uint8Array | undefined> {
    try {
      const file = await (await this.dir.getFileHandle(sha256)).getFile();
      return new Uint8Array(await file.arrayBuffer());
    } catch {
      return undefined;
    }
  }

  async put(sha256: string, bytes: Uint8Array): Promise<void> {
    // a writable commits on close: a tab closed mid-write leaves no short piece behind
    const w = await (await this.dir.getFileHandle(sha256, { create: true })).createWritable();
    await w.write(bytes as Uint8Array<ArrayBuffer>);
    await w.close();
  }
}

export const pieceStore = (): Promise<PieceStore> => OpfsPieceStore.open();
