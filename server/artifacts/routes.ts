// The artifact Range API, mountable on any hono app (the gateway, `strata artifacts`, a
// peer node): GET /artifacts/:id/manifest, GET /artifacts/:id/reference (the signed probe
// reference, where the origin has one) and GET|HEAD /artifacts/:id with one byte range.
// A peer that holds only some layers answers 416 for bytes outside them.
import { Hono } from "hono";
import { cors } from "hono/cors";
import type { ArtifactManifest, Piece } from "../../src/artifact/pieces.ts";
import { shardPieces } from "../../src/artifact/pieces.ts";

export interface ServedArtifact {
  readonly path: string;
  readonly manifest: ArtifactManifest;
  /** serve only these layers' pieces (and the header); undefined: the whole file */
  readonly layers?: { readonly start: number; readonly end: number };
  /** the model's signed probe reference, served at …/reference (trackers start from it) */
  readonly reference?: string;
}

/** Largest range one request may ask for: a piece is at most 4 MiB, spans of them more. */
const MAX_RANGE_BYTES = 256 * 1024 * 1024;

function heldSpans(a: ServedArtifact): Piece[] | undefined {
  return a.layers ? shardPieces(a.manifest, a.layers.start, a.layers.end) : undefined;
}

export function artifactRoutes(artifacts: readonly ServedArtifact[]): Hono {
  const byId = new Map(artifacts.map((a) => [a.manifest.artifact as string, { a, held: heldSpans(a) }]));
  const app = new Hono();
  // pages on other origins (the volunteer page, cross-origin isolated) fetch with CORS
  app.use(
    "/artifacts/*",
    cors({ origin: "*", exposeHeaders: ["content-range", "content-length", "accept-ranges"] }),
  );
  app.get(
    "/artifacts",
    (c) =>
      c.json(
        artifacts.map((a) => ({
          artifact: a.manifest.artifact,
          size: a.manifest.fileSize,
          layers: a.layers,
        })),
      ),
  );
  app.get("/artifacts/:id/manifest", (c) => {
    const hit = byId.get(c.req.param("id"));
    return hit ? c.json(hit.a.manifest) : c.json({ error: "unknown artifact" }, 404);
  });
  app.get("/artifacts/:id/reference", async (c) => {
    const ref = byId.get(c.req.param("id"))?.a.reference;
    if (!ref) return c.json({ error: "no reference for this artifact here" }, 404);
    return c.body(await Deno.readFile(ref), 200, { "content-type": "application/octet-stream" });
  });
  app.on(["GET", "HEAD"], "/artifacts/:id", async (c) => {
    const hit = byId.get(c.req.param("id"));
    if (!hit) return c.json({ error: "unknown artifact" }, 404);
    const size = hit.a.manifest.fileSize;
    const range = /^bytes=(\d+)-(\d+)$/.exec(c.req.header("range") ?? "");
    if (!range) {
      if (hit.held) return c.json({ error: "this peer serves byte ranges of its layers only" }, 416);
      return c.body(null, 200, { "accept-ranges": "bytes", "content-length": String(size) });
    }
    const from = Number(range[1]), to = Number(range[2]) + 1;
    if (from >= to || to > size || to - from > MAX_RANGE_BYTES) {
      return c.body(null, 416, { "content-range": `bytes */${size}` });
    }
    // a peer answers only inside pieces it holds
    if (hit.held && !hit.held.some((p) => from >= p.offset && to <= p.offset + p.size)) {
      return c.body(null, 416, { "content-range": `bytes */${size}` });
    }
    const headers = { "content-range": `bytes ${from}-${to - 1}/${size}`, "accept-ranges": "bytes" };
    if (c.req.method === "HEAD") {
      return c.body(null, 206, { ...headers, "content-length": String(to - from) });
    }
    const file = await Deno.open(hit.a.path);
    try {
      await file.seek(from, Deno.SeekMode.Start);
      const bytes = new Uint8Array(to - from);
      for (let got = 0; got < bytes.length;) {
        const n = await file.read(bytes.subarray(got));
        if (n === null) break;
        got += n;
      }
      return c.body(bytes, 206, headers);
    } finally {
      file.close();
    }
  });
  return app;
}
