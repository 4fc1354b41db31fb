// Hop addresses: http://host:port reaches a node's seam server directly;
// relay+ws://host:port/peer reaches the peer named `peer` through the relay at ws://host:port.
export type HopAddress =
  | { readonly kind: "direct"; readonly url: string }
  | { readonly kind: "relay"; readonly relay: string; readonly peer: string };

export function parseHopUrl(url: string): HopAddress {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error(`"${url}" is not a hop URL (http://host:port or relay+ws://host:port/peer)`);
  }
  if (u.protocol === "http:" || u.protocol === "https:") {
    return { kind: "direct", url: `${u.protocol}//${u.host}` };
  }
  if (u.protocol === "relay+ws:" || u.protocol === "relay+wss:") {
    const peer = u.pathname.replace(/^\//, "");
    if (!peer) throw new Error(`hop ${url} names no relay peer`);
    return { kind: "relay", relay: `${u.protocol.slice(6)}//${u.host}`, peer };
  }
  throw new Error(`hop ${url}: use http://host:port or relay+ws://host:port/peer`);
}

/** The transport a gRPC link to a direct hop is: "grpcs" for a node reached over TLS. */
export const grpcKind = (url: string): "grpc" | "grpcs" => url.startsWith("https:") ? "grpcs" : "grpc";

export const relayHopUrl = (relay: string, peer: string) => `relay+${relay.replace(/\/$/, "")}/${peer}`;

/** Whether the hop is reached through a relay (a node that cannot accept connections). */
export const isRelayHopUrl = (url: string): boolean => url.startsWith("relay+");
