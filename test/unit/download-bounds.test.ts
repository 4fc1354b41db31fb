// What a piece source or an artifact origin sends is read only up to what it may send: a piece
// past its size is refused without being held, and the download goes on from another source; a
// manifest past its bound, or not JSON, is refused.
import { describe, expect, it } from "vitest";
import { downloadShard } from "../../src/artifact/download.ts";
import { manifestFromResponse, manifestOfBytes, MAX_MANIFEST_BYTES } from "../../src/artifact/pieces.ts";
import { MemoryPieceStore } from "../../src/artifact/store.ts";
import { synthModel } from "../../src/model/synth.ts";
import { readAtMost } from "../../src/bytes/read-at-most.ts";

async function artifact() {
  const file = synthModel({ arch: "qwen3", nLayer: 4 });
  return { file, manifest: await manifestOfBytes(file) };
}

/** A body that streams `total` bytes in 64 KB chunks, counting what was pulled. */
function endless(total: number) {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= total) return c.close();
      const n = Math.min(65_536, total - sent);
      sent += n;
      c.enqueue(new Uint8Array(n));
    },
  }, { highWaterMark: 0 });
  return { body, pulled: () => sent };
}

describe("bounded reads of what peers and origins send", () => {
  it("refuses a piece longer than its size after reading just past it, and takes it from another source", async () => {
    const { file, manifest } = await artifact();
    const floods: Array<() => number> = [];
    const fetcher = ((url: string, init?: RequestInit) => {
      const [, a, b] = /bytes=(\d+)-(\d+)/.exec(new Headers(init?.headers).get("range")!)!.map(Number);
      if (url === "http://flood") {
        const f = endless(1 << 30);
        floods.push(f.pulled);
        return Promise.resolve(new Response(f.body, { status: 206 }));
      }
      return Promise.resolve(new Response(file.slice(a, b + 1), { status: 206 }));
    }) as typeof fetch;
    const r = await downloadShard({
      manifest,
      start: 0,
      end: 2,
      sources: [{ url: "http://flood" }, { url: "http://honest" }],
      store: new MemoryPieceStore(),
      fetch: fetcher,
      concurrency: 1,
    });
    expect(r.fetchedBytes).toBe(r.shardBytes);
    const refused = r.rejected.filter((x) => x.source === "http://flood");
    expect(refused.length).toBeGreaterThan(0);
    for (const x of refused) expect(x.reason).toMatch(/^more than \d+ bytes$/);
    // each flood of 1 GiB was cut off within a chunk of the piece's size
    const biggest = Math.max(...manifest.pieces.map((p) => p.size));
    for (const pulled of floods) expect(pulled()).toBeLessThanOrEqual(biggest + 65_536);
  });

  it("refuses a manifest past its bound without holding it, and one that is not JSON", async () => {
    const { manifest } = await artifact();
    const flood = endless(MAX_MANIFEST_BYTES + (1 << 20));
    await expect(manifestFromResponse(new Response(flood.body), manifest.artifact)).rejects.toThrow(
      /a manifest of more than 134217728 bytes/,
    );
    expect(flood.pulled()).toBeLessThanOrEqual(MAX_MANIFEST_BYTES + 65_536);
    await expect(manifestFromResponse(new Response("{nope"), manifest.artifact)).rejects.toThrow(/not JSON/);
    const ok = await manifestFromResponse(new Response(JSON.stringify(manifest)), manifest.artifact);
    expect(ok.pieces.length).toBe(manifest.pieces.length);
  });

  it("reads a body in parts whole, an empty one as nothing", async () => {
    const parts = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(Uint8Array.of(1, 2));
        c.enqueue(Uint8Array.of(3));
        c.close();
      },
    });
    expect([...(await readAtMost(parts, 3))!]).toEqual([1, 2, 3]);
    expect(await readAtMost(null, 0)).toEqual(new Uint8Array(0));
  });
});
