// The tracker's Connect binding in memory: which calls need the node token, and the core's
// errors as Connect statuses with their messages unchanged.
import { describe, expect, it } from "vitest";
import { hexToBytes } from "../../src/bytes/hex.ts";
import { memoryTracker } from "../fakes/memory-tracker.ts";
import {
  describeCert,
  type NetworkCa,
  newNetworkCa,
  newTlsKey,
  openNetworkCa,
} from "../../node-apis/tls/certs.ts";
import { X509Certificate } from "@peculiar/x509";

const ARTIFACT = "ab".repeat(32);
const TOKEN = "node-secret";

async function client(ca?: NetworkCa, nodeCallsPerMin?: number) {
  return (await memoryTracker({ artifact: ARTIFACT, nodeToken: TOKEN, ca, nodeCallsPerMin })).client;
}

const message = (p: Promise<unknown>) => p.then(() => "accepted", (e: Error) => e.message);

describe("tracker service", () => {
  it("asks the node token of register, heartbeat and leave only", async () => {
    const c = await client();
    const shard = { artifactSha256: hexToBytes(ARTIFACT), range: { start: 0, end: 4 }, kvCells: 64 };
    const register = { node: "a", urls: ["http://a:1"], shard };
    expect(await message(c.register({ ...register, token: "wrong" }))).toBe(
      "[unauthenticated] node token refused",
    );
    expect(await message(c.heartbeat({ token: "", node: "a" }))).toBe("[unauthenticated] node token refused");
    expect(await message(c.leave({ token: "wrong", node: "a" }))).toBe(
      "[unauthenticated] node token refused",
    );
    expect(await message(c.register({ ...register, token: TOKEN }))).toBe("accepted");
    expect((await c.heartbeat({ token: TOKEN, node: "a" })).known).toBe(true);
    // the gateway's calls carry no token
    expect((await c.nodes({})).nodes.map((n) => n.node)).toEqual(["a"]);
    expect((await c.done({ sessionId: "s" })).released).toBe(0);
    expect(await message(c.route({ artifactSha256: hexToBytes(ARTIFACT), sessionId: "s" }))).not.toMatch(
      /unauthenticated/,
    );
    expect((await c.leave({ token: TOKEN, node: "a" })).known).toBe(true);
  });

  it("certifies a node's TLS key with the network's CA, for the node token only", async () => {
    const pair = await newNetworkCa();
    const c = await client(await openNetworkCa(pair));
    const { publicKeyDer } = await newTlsKey();
    const ask = { node: "n1", publicKey: publicKeyDer, hosts: ["10.0.0.7", "n1.example"] };
    expect(await message(c.certify({ ...ask, token: "wrong" }))).toBe("[unauthenticated] node token refused");
    const r = await c.certify({ ...ask, token: TOKEN });
    expect(r.caPem).toBe(pair.cert);
    const cert = new X509Certificate(r.certPem);
    expect(await cert.verify({ publicKey: new X509Certificate(pair.cert).publicKey, signatureOnly: true }))
      .toBe(
        true,
      );
    expect(describeCert(r.certPem)).toMatchObject({ subject: "CN=n1", hosts: ["10.0.0.7", "n1.example"] });
    // what a peer sends is checked: a key that is no key, a host that is no host, too many hosts
    expect(await message(c.certify({ ...ask, token: TOKEN, publicKey: new Uint8Array(64) }))).toMatch(
      /^\[invalid_argument\] cannot certify/,
    );
    expect(await message(c.certify({ ...ask, token: TOKEN, hosts: ["a/b"] }))).toMatch(/is not a host name/);
    expect(await message(c.certify({ ...ask, token: TOKEN, hosts: Array(17).fill("h") }))).toMatch(
      /1 to 16 hosts/,
    );
    // a tracker without a CA says so
    const plain = await client();
    expect(await message(plain.certify({ ...ask, token: TOKEN }))).toMatch(
      /^\[failed_precondition\] .*holds no CA/,
    );
  });

  it("limits the calls of each node name, not of the others", async () => {
    const c = await client(undefined, 3);
    const beat = (node: string) => message(c.heartbeat({ token: TOKEN, node }));
    for (let i = 0; i < 3; i++) expect(await beat("a")).toBe("accepted");
    expect(await beat("a")).toBe("[resource_exhausted] node a: requests a minute, at most 3; retry in 20 s");
    expect(await beat("b")).toBe("accepted");
    // the gateway's calls carry no node name and are not counted
    for (let i = 0; i < 5; i++) expect((await c.nodes({})).nodes).toEqual([]);
  });

  it("maps the core's errors to Connect codes with the core's words", async () => {
    const c = await client();
    const artifactSha256 = hexToBytes(ARTIFACT);
    expect(await message(c.route({ artifactSha256: hexToBytes("cd".repeat(32)), sessionId: "s" }))).toBe(
      "[not_found] unknown model artifact",
    );
    expect(await message(c.route({ artifactSha256, sessionId: "" }))).toBe(
      "[invalid_argument] a route is asked for one session",
    );
    expect(await message(c.route({ artifactSha256, sessionId: "s" }))).toBe(
      "[unavailable] no complete route of admitted, live nodes",
    );
    expect(await message(c.register({ token: TOKEN, node: "a" }))).toBe(
      "[invalid_argument] a registration names the node, its URLs and its shard",
    );
  });
});
