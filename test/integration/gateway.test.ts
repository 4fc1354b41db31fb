import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("strata up: tracker, gateway and two routes (SmolLM2)", () => {
  it("serves the OpenAI API with whole-model text, spreads load, refuses a lying node, survives a silent one and a dead one", async () => {
    const r = await denoRun(`${root}test/integration/gateway.deno.ts`);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    const want = out.reference[0];
    // greedy text equals whole-model llama.cpp's, streamed and not
    expect(out.plain.status).toBe(200);
    expect(out.plain.text).toBe(want);
    expect(out.plain.finish).toBe("stop");
    expect(out.plain.usage.completion_tokens).toBeGreaterThan(0);
    expect(out.plain.strata.ttft_ms).toBeGreaterThan(0);
    expect(out.plain.strata.nodes.map((n: { layers: string }) => n.layers)).toEqual(["0:12", "12:30"]);
    expect(out.streamed.text).toBe(want);
    expect(out.streamed.done).toBe(true);
    // 16 concurrent streams: all complete; each equals the whole model or parts from it at a
    // step where the whole model itself was within 0.5 σ of choosing otherwise
    expect(out.concurrent.correct + out.concurrent.diverged.length).toBe(16);
    for (const d of out.concurrent.diverged) expect(d.at.nearTie, JSON.stringify(d)).toBe(true);
    expect(out.concurrent.correct).toBeGreaterThanOrEqual(8);
    expect(out.concurrent.routes.length).toBeGreaterThanOrEqual(2);
    // OpenAI-shaped errors
    const e = out.errors;
    expect([e.malformed_json.status, e.malformed_json.error.type]).toEqual([400, "invalid_request_error"]);
    expect([e.unknown_model.status, e.unknown_model.error.code]).toEqual([404, "model_not_found"]);
    expect([e.too_long.status, e.too_long.error.code]).toEqual([400, "context_length_exceeded"]);
    expect([e.no_messages.status, e.no_messages.error.param]).toEqual([400, "messages"]);
    expect([e.no_key.status, e.no_key.error.code]).toEqual([401, "invalid_api_key"]);
    expect([e.wrong_key.status, e.wrong_key.error.code]).toEqual([401, "invalid_api_key"]);
    expect(out.models.data[0].id).toBe("smollm2");
    // each node's one pool holds far more than a session: a route offers the model's trained 8192
    expect(out.models.data[0].context_length).toBe(8192);
    expect(e.too_long.error.message).toMatch(/^this model's context is 8192 tokens here/);
    // a node whose probe disagrees is refused and never routed
    expect(out.liar.admission).toMatch(/^refused: max \|Δ\|/);
    expect(out.liar.assigned).toBe(0);
    for (const route of out.liar.routes) expect(route).not.toContain("liar");
    // a client that disconnects gets its route cancelled
    expect(out.disconnect.sessionsWhileStreaming).toBeGreaterThan(0);
    expect(out.disconnect.sessionsAfter).toBe(0);
    // a node gone silent mid-generation (stopped, its sockets open): no seam fails, but once
    // its lease lapses the gateway's watch sees it gone and its streams go on through the
    // other route; nobody sees an error; resumed, it is live again
    const repairedOff = (d: { repairs?: Array<{ nodes: string[] }> }, node: string) =>
      (d.repairs ?? []).some((r) => r.nodes.includes(node));
    for (const d of out.silent.during) {
      expect(d.done && !d.error, JSON.stringify(d)).toBe(true);
    }
    expect(out.silent.during.some((d: never) => repairedOff(d, out.silent.node)), JSON.stringify(out.silent))
      .toBe(true);
    expect(out.silent.liveAgain).toBe(true);
    // a node killed mid-generation: its streams are repaired (blaming it) and finish without
    // an error, as do the non-streamed requests; later requests succeed; the node leaves the
    // tracker when its lease lapses
    for (const d of out.kill.during) expect(d.done && !d.error, JSON.stringify(d)).toBe(true);
    const repaired = [...out.kill.during, ...out.kill.non_streamed].filter((d) =>
      repairedOff(d, out.kill.victim)
    );
    expect(repaired.length, JSON.stringify(out.kill)).toBeGreaterThanOrEqual(1);
    for (const q of out.kill.non_streamed) expect(q.status, JSON.stringify(q)).toBe(200);
    expect(out.metrics.some((l: string) => l.startsWith("strata_repairs_total")), JSON.stringify(out.metrics))
      .toBe(true);
    for (const l of out.kill.later) expect(l.ok, JSON.stringify(l)).toBe(true);
    // the lease is 3 s; polling the tracker on two busy cores can add to what is seen
    expect(out.kill.left_tracker_after_ms).toBeGreaterThan(1_000);
    expect(out.kill.left_tracker_after_ms).toBeLessThan(60_000);
    expect(out.kill.others_alive).toEqual([true, true, true]);
    expect(out.metrics.some((l: string) => l.startsWith("strata_route_requests_total"))).toBe(true);
  });
});
