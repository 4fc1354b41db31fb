// The URL each hop of a route is dialed at. A node reachable only through the relay (a
// browser tab) can dial only through it too, so the hop after it is given its relay URL.
import { isRelayHopUrl } from "../../route/hop-url.ts";

/** `nodes[i]`: the URLs hop i's node advertised, its preferred one first. */
export function hopUrls(nodes: readonly (readonly string[])[]): string[] {
  return nodes.map((urls, i) =>
    i > 0 && nodes[i - 1].every(isRelayHopUrl) ? urls.find(isRelayHopUrl) ?? urls[0] : urls[0]
  );
}
