// A fetch that also reaches peers behind the relay: a Range GET of a relay hop URL
// (relay+ws://host:port/peer) becomes a piece request to that peer. What comes back is
// checked against the manifest by the downloader, like bytes from anywhere else.
import { isRelayHopUrl, parseHopUrl } from "../route/hop-url.ts";
import type { RelayPeer } from "./peer.ts";

export function relayPieceFetch(peer: RelayPeer, relayUrl: string, base: typeof fetch = fetch): typeof fetch {
  const relay = relayUrl.replace(/\/$/, "");
  return async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!isRelayHopUrl(url)) return await base(input, init);
    const hop = parseHopUrl(url);
    if (hop.kind !== "relay" || hop.relay !== relay) {
      return new Response(`no connection to the relay of ${url}`, { status: 502 });
    }
    const range = /^bytes=(\d+)-(\d+)$/.exec(new Headers(init?.headers).get("range") ?? "");
    if (!range) return new Response("a piece is asked for by its byte range", { status: 416 });
    const offset = Number(range[1]);
    try {
      const bytes = await peer.getPiece(hop.peer, offset, Number(range[2]) - offset + 1);
      return new Response(new Uint8Array(bytes), { status: 206 });
    } catch (e) {
      return new Response(e instanceof Error ? e.message : String(e), { status: 502 });
    }
  };
}
