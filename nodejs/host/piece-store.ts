// Node's pieces: one file per sha256 in the folder it is given (node-apis/artifact/fs-store.ts).
import type { PieceStore } from "../../src/artifact/store.ts";
import { FsPieceStore } from "../../node-apis/artifact/fs-store.ts";

export const pieceStore = (dir: string): PieceStore => new FsPieceStore(dir);
