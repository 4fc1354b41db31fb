// Volunteer tabs' way to the tracker: the tracker's real Connect service behind the gateway's
// stand-in, called as a tab calls it (connect-web over fetch, into the gateway's Hono app).
// The stand-in names each tab by its relay token, puts the node token in, and refuses what a
// tab may not do.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { WASM32_MEMORY_CAP } from "../../src/engine/wasm/wasm-engine.ts";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { clientTrackerPort } from "../../src/node/tracker-port.ts";
import { peerToken } from "../../src/relay/token.ts";
import { relayHopUrl } from "../../src/route/hop-url.ts";
import { tabPlaceRequest } from "../../src/tracker/placement/volunteer-assignment.ts";
import { memoryTracker } from "../fakes/memory-tracker.ts";
import { VOLUNTEER_CONNECT_PATH, volunteerTrackerRoutes } from "../../server/gateway/volunteer-tracker.ts";

const ARTIFACT = "ab".repeat(32);
const NODE_TOKEN = "node-secret";
const RELAY_SECRET = "relay-secret";
const RELAY = "ws://relay.example:7700";

async function network() {
  const { client: tracker } = await memoryTracker({ artifact: ARTIFACT, nodeToken: NODE_TOKEN });
  const gateway = new Hono();
  volunteerTrackerRoutes(gateway, tracker, {
    relayUrl: RELAY,
    relaySecret: RELAY_SECRET,
    nodeToken: NODE_TOKEN,
    artifact: ARTIFACT,
  });
  // the tab's client, exactly as the page builds it, with the gateway's app as its network
  const tab = createClient(
    TrackerService,
    createConnectTransport({
      baseUrl: `http://gateway.example${VOLUNTEER_CONNECT_PATH}`,
      useBinaryFormat: true,
      fetch: (input, init) => Promise.resolve(gateway.fetch(new Request(input, init))),
    }),
  );
  return { tab, tracker };
}

const message = (p: Promise<unknown>) => p.then(() => "accepted", (e: Error) => e.message);
const shard = (start: number, end: number) => ({
  artifactSha256: hexToBytes(ARTIFACT),
  range: { start, end },
  engine: "wasm-cpu",
  kvCells: 64,
  maxSessions: 2,
});

describe("the tracker's service as tabs reach it through the gateway", () => {
  it("joins, beats and leaves a tab under the name its relay token holds, reachable only through the relay", async () => {
    const { tab, tracker } = await network();
    const token = await peerToken(RELAY_SECRET, "vol-1");
    const port = clientTrackerPort(tab, { node: "vol-1", token });
    const own = relayHopUrl(RELAY, "vol-1");
    const r = await port.register(["http://10.0.0.9:1"], {
      ...shard(0, 4),
      memoryCapBytes: 1n << 40n,
      artifactUrl: "http://elsewhere.example/artifacts/x",
    });
    expect(r.leaseMs).toBe(2_000);
    expect(r.routePublicKey.length).toBe(32);
    const [n] = (await tracker.nodes({})).nodes;
    expect(n.node).toBe("vol-1");
    // whatever the page says: reachable through the relay under its name, wasm32's cap, and
    // pieces served only from its own relay address
    expect(n.urls).toEqual([own]);
    expect(n.shard!.memoryCapBytes).toBe(BigInt(WASM32_MEMORY_CAP));
    expect(n.shard!.artifactUrl).toBe("");
    expect((await port.heartbeat({ sessions: 0, sessionIds: [], kvCellsUsed: 0, queued: 0 }, 5000)).known)
      .toBe(true);
    // what the page reads to pick its range
    expect((await tab.nodes({})).nodes.map((x) => x.node)).toEqual(["vol-1"]);
    await port.leave();
    expect((await tracker.nodes({})).nodes).toEqual([]);
  });

  it("places a tab by its engine's settings", async () => {
    const { tab } = await network();
    const token = await peerToken(RELAY_SECRET, "vol-2");
    const r = await tab.place({ token, node: "vol-2", ...tabPlaceRequest(hexToBytes(ARTIFACT), 2 ** 30) });
    expect(r.range!.end).toBeGreaterThan(r.range!.start);
  });

  it("refuses a forged or borrowed token, another model, and the calls that are not a tab's", async () => {
    const { tab } = await network();
    const token = await peerToken(RELAY_SECRET, "vol-3");
    const forged = await peerToken("not-the-secret", "vol-3");
    expect(await message(tab.register({ token: forged, node: "vol-3", shard: shard(0, 4) }))).toBe(
      "[unauthenticated] unknown volunteer token",
    );
    expect(await message(tab.heartbeat({ token: NODE_TOKEN, node: "vol-3" }))).toBe(
      "[unauthenticated] unknown volunteer token",
    );
    // a tab's token speaks for that tab only
    expect(await message(tab.leave({ token, node: "native-1" }))).toBe(
      "[permission_denied] this token names vol-3, not native-1",
    );
    expect(
      await message(tab.register({
        token,
        node: "vol-3",
        shard: { ...shard(0, 4), artifactSha256: hexToBytes("cd".repeat(32)) },
      })),
    ).toBe("[invalid_argument] volunteers here host this gateway's model only");
    expect(await message(tab.route({ artifactSha256: hexToBytes(ARTIFACT), sessionId: "s" }))).toBe(
      "[permission_denied] a route is not a volunteer's call",
    );
    expect(await message(tab.done({ sessionId: "s" }))).toBe(
      "[permission_denied] ending sessions is not a volunteer's call",
    );
    expect(await message(tab.certify({ token, node: "vol-3" }))).toBe(
      "[permission_denied] a certificate is not a volunteer's call",
    );
  });
});
