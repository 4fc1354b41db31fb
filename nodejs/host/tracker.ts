// Node's way to its tracker: the tracker's Connect service (node-apis/tracker/), under the
// node's name and token.
import type { TrackerPort } from "../../src/node/membership.ts";
import { trackerPort } from "../../node-apis/tracker/client.ts";

export function nodeTracker(tracker: { url: string; token: string }, name: string): TrackerPort {
  return trackerPort(tracker.url, tracker.token, name);
}
