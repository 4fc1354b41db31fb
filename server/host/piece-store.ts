// A Deno node's pieces: in the cache (STRATA_CACHE), kept for its next start.
import type { PieceStore } from "../../src/artifact/store.ts";
import { FsPieceStore } from "../../node-apis/artifact/fs-store.ts";
import { cacheDir } from "../process/paths.ts";

export const pieceStore = (): PieceStore => new FsPieceStore(cacheDir("pieces"));
