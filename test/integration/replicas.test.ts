import { existsSync, readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

// `./strata test` installs the server (as root); elsewhere the test says why it skips
const postgres = existsSync("/usr/lib/postgresql") && readdirSync("/usr/lib/postgresql").length > 0;
if (!postgres) console.warn("skipping tracker replicas: no PostgreSQL server (apt-get install postgresql)");

type State = Array<{ node: string; live: boolean; admission: string }>;
const serving = (s: State | string) =>
  typeof s !== "string" && s.length === 2 && s.every((n) => n.live && n.admission === "admitted");

describe.skipIf(!postgres)("tracker replicas on PostgreSQL", () => {
  it("share the network and one placement plan; a replica stopped mid-chat loses nothing; both restart with it", async () => {
    const r = await denoRun(`${root}test/integration/replicas.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // registered with A, known and admitted on B through the database
    expect(serving(out.onA), JSON.stringify(out.onA)).toBe(true);
    expect(serving(out.onB), JSON.stringify(out.onB)).toBe(true);
    // one plan: the node that asked B got the rest of the model after the one that asked A
    const [a0, a1] = String(out.placedOnA).split(":").map(Number);
    const [b0, b1] = String(out.placedOnB).split(":").map(Number);
    expect([a0, b1], `${out.placedOnA} ${out.placedOnB}`).toEqual([0, 30]);
    expect(b0).toBe(a1);
    // with A gone, B leads and places on its own
    expect(out.placedOnBAlone, out.placedOnBAlone).toMatch(/^\d+:\d+$/);
    // greedy answers equal whole-model llama.cpp's, whichever replica is up
    const ref: string[] = out.reference;
    expect(out.first).toEqual({ status: 200, text: ref[0] });
    expect(out.duringStopA).toEqual({ status: 200, text: ref[1] });
    expect(out.afterStopA).toEqual({ status: 200, text: ref[2] });
    expect(out.afterStopB).toEqual({ status: 200, text: ref[0] });
    expect(out.afterRestart).toEqual({ status: 200, text: ref[1] });
    // no node lost when the replica its heartbeats went to stopped, nor when the other did
    expect(serving(out.bAfterAStopped), JSON.stringify(out.bAfterAStopped)).toBe(true);
    expect(serving(out.aBack), JSON.stringify(out.aBack)).toBe(true);
    expect(serving(out.aAfterBStopped), JSON.stringify(out.aAfterBStopped)).toBe(true);
    // straight after both restarted, from the database: known and admitted (live for one lease)
    for (const s of [out.restartedA, out.restartedB]) {
      expect(s.map((n: { node: string; admission: string }) => [n.node, n.admission]), JSON.stringify(s))
        .toEqual([["n0-12", "admitted"], ["n12-30", "admitted"]]);
    }
    expect(serving(out.servingAfterRestart)).toBe(true);
  });
});
