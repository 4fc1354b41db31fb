import { describe, expect, it } from "vitest";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { denoRun, root } from "./strata.ts";

// One host per role needs network namespaces (root, iproute2) and Chromium; elsewhere this
// says why and skips.
function whyNot(): string | undefined {
  if (process.getuid?.() !== 0) return "network namespaces need root";
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
  } catch {
    return "no iproute2 (apt-get install iproute2)";
  }
  if (!existsSync(process.env.STRATA_CHROMIUM ?? "/usr/bin/chromium")) return "no Chromium";
  return undefined;
}
const why = whyNot();
if (why) console.warn(`deploy test skipped: ${why}`);

interface Cache {
  diskBytes: number;
  share: number;
  files: string[];
  layers?: string;
  foreignPieces?: number;
  rangePieces?: number;
}

describe.skipIf(!!why)("docs/deploy.md's public network, one host per role, run as written", () => {
  it("serves HTTPS chats and a wss:// volunteer, holds only what each role needs, survives a cut host and a tracker restart", async () => {
    const r = await denoRun(`${root}test/integration/deploy.deno.ts`);
    expect(r.code, r.stderr.slice(-6000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    console.log(`deploy: caches ${JSON.stringify(out.caches, null, 1)}`);
    console.log(`deploy: status after the cut\n${out.filledText}`);
    // every role the guide names ran from its own block
    expect(out.guide.map((b: { on: string }) => b.on)).toEqual(expect.arrayContaining([
      "your own machine",
      "origin.example.net",
      "tracker.example.net",
      "gateway.example.net",
      "node1.example.net",
      "node2.example.net",
      "node3.example.net",
      "a client",
      "a volunteer's machine",
    ]));
    expect(out.modelUrl).toMatch(/^https:\/\/origin\.example\.net:8090\/artifacts\/[0-9a-f]{64}$/);
    // the tracker and the gateway hold under 2 % of the model; each node only its range's pieces
    for (const role of ["tracker", "gateway"]) expect(out.caches[role].share, role).toBeLessThan(0.02);
    for (const node of ["node1", "node2", "node3"]) {
      const c: Cache = out.caches[node];
      expect(c.foreignPieces, node).toBe(0);
      expect(c.files.filter((f) => f.startsWith("pieces/")).length, node).toBe(c.rangePieces);
    }
    // the guide's own client line answers; 8 concurrent chats equal whole-model llama.cpp
    expect(out.guideChat.length).toBeGreaterThan(0);
    expect(out.chats).toHaveLength(8);
    for (const c of out.chats) expect(c.exact || c.at?.nearTie, JSON.stringify(c)).toBe(true);
    // the volunteer serves, placed, and shows in strata status
    expect(out.tab.name).toMatch(/^vol-/);
    expect(
      out.withTab.some((n: { node: string; admission: string }) =>
        n.node === out.tab.name && n.admission === "admitted"
      ),
    ).toBe(true);
    // a node host cut off mid-chat: the chat completes with the whole model's text, and the hole fills
    expect(out.cutChat.code, out.cutChat.stderr).toBe(0);
    expect(out.cutChat.exact, JSON.stringify(out.cutChat)).toBe(true);
    expect(out.filled.some((n: { node: string; live: boolean }) => n.node === out.victim.node && n.live))
      .toBe(
        false,
      );
    expect(out.filledText).not.toMatch(/gaps:/);
    // the tracker restarted with --data: its nodes are still admitted, its route key the same
    expect(out.restart.keyAfter).toMatch(/^[0-9a-f]{64}$/);
    expect(out.restart.keyAfter).toBe(out.restart.keyBefore);
    for (const n of out.restart.admittedBefore) {
      expect(out.restart.recordsAfter).toContainEqual({ node: n, admission: "admitted" });
    }
    expect(out.restart.admittedAfter).toEqual(out.restart.admittedBefore);
  });
});
