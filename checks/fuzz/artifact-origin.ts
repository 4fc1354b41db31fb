// What an artifact origin and the piece sources send a shard that downloads its range: the
// manifest (read with its bound, parsed, checked, then planned from), and the bytes a source
// answers for one piece (checked by length and hash; the header piece against the manifest's
// tensors). An input's first byte chooses: even, a manifest body; odd, a piece answer whose
// second byte picks the piece.
import { downloadShard } from "../../src/artifact/download.ts";
import { manifestFromResponse, manifestOfBytes, shardPieces } from "../../src/artifact/pieces.ts";
import { MemoryPieceStore } from "../../src/artifact/store.ts";
import { synthModel } from "../../src/model/synth.ts";
import type { FuzzTarget } from "./target.ts";

const file = synthModel({ arch: "qwen3", nLayer: 4 });
/** the layers the downloading shard holds */
const RANGE = { start: 0, end: 2 };

const manifestOf = () => manifestOfBytes(file);

const joined = (head: number[], rest: Uint8Array) => {
  const out = new Uint8Array(head.length + rest.length);
  out.set(head);
  out.set(rest, head.length);
  return out;
};

/** Changes a manifest's JSON where it parses: a number, a string or an array entry. */
function changeManifest(seed: Uint8Array, next: () => number): Uint8Array {
  if (seed[0] % 2 === 1) return seed;
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder().decode(seed.subarray(1)));
  } catch {
    return seed;
  }
  const values = [0, -1, 1, 2 ** 31, 2 ** 53 + 1, 1e308, "", "0".repeat(64), null, [], {}];
  const walk = (v: unknown, depth: number): unknown => {
    if (Array.isArray(v)) {
      if (v.length && next() % 4 === 0) {
        const copy = [...v];
        const i = next() % copy.length;
        if (next() % 2) copy.splice(i, 1);
        else copy.splice(i, 0, copy[i]);
        return copy;
      }
      return v.map((x) => walk(x, depth + 1));
    }
    if (v && typeof v === "object") {
      const entries = Object.entries(v);
      return Object.fromEntries(entries.map(([k, x]) => [k, walk(x, depth + 1)]));
    }
    // one leaf in about twenty changes
    return next() % 20 === 0 ? values[next() % values.length] : v;
  };
  return joined([seed[0]], new TextEncoder().encode(JSON.stringify(walk(doc, 0))));
}

export const artifactOrigin: FuzzTarget = {
  name: "artifact-origin",
  proto: false,
  change: changeManifest,
  async seeds() {
    const m = await manifestOf();
    const pieces = shardPieces(m, RANGE.start, RANGE.end);
    return [
      joined([0], new TextEncoder().encode(JSON.stringify(m))),
      // the header piece, a small tensor's and a later one, as an honest source answers them
      ...[0, 1, pieces.length - 1].map((i) =>
        joined([1, i], file.subarray(pieces[i].offset, pieces[i].offset + pieces[i].size))
      ),
    ];
  },
  async start() {
    const m = await manifestOf();
    const pieces = shardPieces(m, RANGE.start, RANGE.end);
    return async (input) => {
      if (input.length < 2) throw new Error("an input names what it is and a piece");
      if (input[0] % 2 === 0) {
        const got = await manifestFromResponse(new Response(input.slice(1)), m.artifact);
        // what a shard does next with a manifest: plan its pieces
        shardPieces(got, RANGE.start, Math.min(RANGE.end, Math.max(1, got.nLayer)));
        return;
      }
      const chosen = pieces[input[1] % pieces.length];
      const answer = input.subarray(2);
      // one source: the chosen piece answered with the input, every other honestly
      const fetcher = ((_url: string, init?: RequestInit) => {
        const [, a, b] = /bytes=(\d+)-(\d+)/.exec(new Headers(init?.headers).get("range") ?? "")!.map(Number);
        const body = a === chosen.offset ? answer : file.subarray(a, b + 1);
        return Promise.resolve(new Response(body.slice(), { status: 206 }));
      }) as typeof fetch;
      await downloadShard({
        manifest: m,
        ...RANGE,
        sources: [{ url: "http://source" }],
        store: new MemoryPieceStore(),
        fetch: fetcher,
        concurrency: 1,
      });
    };
  },
};
