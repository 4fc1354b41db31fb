// A tab's way to the tracker: the tracker's own Connect service (connect-web, binary), through
// the gateway that stands in for tabs (server/gateway/volunteer-tracker.ts). Every call carries
// the tab's relay token, which names it; the gateway swaps it for the node token.
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import type { TrackerPort } from "../../src/node/membership.ts";
import { clientTrackerPort } from "../../src/node/tracker-port.ts";

export type TabTracker = Client<typeof TrackerService>;

/** baseUrl: the gateway's volunteer Connect path; keepalive: calls outlive the page (leave). */
export function tabTracker(baseUrl: string, keepalive = false): TabTracker {
  return createClient(
    TrackerService,
    createConnectTransport({
      baseUrl,
      useBinaryFormat: true,
      fetch: keepalive ? (input, init) => fetch(input, { ...init, keepalive: true }) : undefined,
    }),
  );
}

/** The node runtime's TrackerPort for a tab named `node`, holding relay token `token`. */
export function nodeTracker(baseUrl: string, node: string, token: string): TrackerPort {
  // a tab going away cannot await its leave: it goes as a keepalive request, which outlives the page
  return clientTrackerPort(tabTracker(baseUrl), { node, token }, { parting: tabTracker(baseUrl, true) });
}
