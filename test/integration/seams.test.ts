import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("seams across node processes (HTTP/2 and the relay)", () => {
  it("relayed frames are byte-identical to direct ones; bad input is refused clearly and hurts no one", async () => {
    const r = await denoRun(`${root}test/integration/seams.deno.ts`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    // the same session over both transports: same tokens, same frame bytes on the seam
    expect(out.tokens.relay).toEqual(out.tokens.direct);
    expect(out.taps.direct).toBeGreaterThan(out.tokens.direct.length);
    expect(out.taps.identical, JSON.stringify(out.taps.firstDifference)).toBe(true);
    const f = out.refusals;
    expect(f.no_ticket).toBe("unauthenticated: route ticket refused: none given");
    expect(f.expired_ticket).toMatch(/^unauthenticated: route ticket refused: expired at /);
    expect(f.ticket_for_other_range).toBe("unauthenticated: route ticket refused: issued for layers 12:30");
    expect(f.wrong_schema).toBe("wrong_schema: schema version 2; this peer speaks 1");
    expect(f.unknown_session).toMatch(/^unknown_session: /);
    expect(f.wrong_epoch).toBe("wrong_epoch: session t5 is at epoch 1, frame at 9");
    expect(f.wrong_recipe).toBe(
      "wrong_recipe: session t14 opened behind engine recipe (none), frame from 07070707",
    );
    expect(f.checksum).toBe('checksum: tensor "token_ids" does not match its CRC-32C');
    expect(f.token_outside_vocab).toBe("bad_tensor: token id 999999 outside the vocabulary (49152)");
    expect(f.wrong_position).toMatch(/^bad_position: session t8 continues at 0/);
    // a duplicate is answered again and never run twice: the next step continues at 3
    expect(f.duplicate_step).toBe("ok, again: ok, same token: true, next step: ok");
    expect(out.duplicateCells).toBe(4);
    expect(f.flood).toMatch(/overloaded×\d+/);
    expect(f.oversized).toMatch(/stream_failed: .*resource_exhausted.*readMaxBytes/);
    expect(f.hidden_width).toBe(
      `bad_tensor: tensor "hidden_states": shape [1,100] does not match the model's width 576`,
    );
    expect(f.truncated_frame).toMatch(/^ERROR: not a seam frame/);
    expect(f.unknown_peer).toBe("peer nobody is not connected to this relay");
    expect(out.protocols).toEqual({ grpc: "0:12", "grpc-web": "0:12", connect: "0:12" });
    // the session that ran through all of it is unharmed; nothing is left behind
    expect(out.bystander.sameAsAlone).toBe(true);
    expect(out.node0After).toMatchObject({ sessions: 0, kvCellsUsed: 0, kvCellsReserved: 0 });
    expect(out.nodesAlive).toEqual([true, true]);
  });
});
