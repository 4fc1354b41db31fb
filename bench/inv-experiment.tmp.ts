// experiment: alone vs batched logits, bitwise
import { NativeEngine } from "../server/engine/native/native-engine.ts";
const modelPath = `${Deno.env.get("HOME")}/.cache/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const threads = Number(Deno.env.get("THREADS") ?? 1);
const promptLen = Number(Deno.env.get("PROMPT") ?? 490);
const STEPS = 40;
const argmax = (r: Float32Array) => { let b = 0; for (let i = 1; i < r.length; i++) if (r[i] > r[b]) b = i; return b; };
const mk = (n: number, salt: number) => Int32Array.from({ length: n }, (_, i) => 100 + ((i * 7919 + salt * 104729) % 40000));
const e = await NativeEngine.load({ modelPath, range: "whole", kvCells: 8192, maxSequences: 16, batchTokens: 1024, threads }, "cpu");
const last = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i === n - 1 ? 1 : 0));
async function alone(): Promise<Float32Array[]> {
  const s = e.openSequence();
  const p = mk(promptLen, 0);
  let r = await e.decode({ tokens: p, seq: new Int32Array(p.length).fill(s), pos: Int32Array.from(p.keys()), outputs: last(p.length) });
  const out = [r.data.slice()];
  for (let i = 0; i < STEPS; i++) {
    r = await e.decode({ tokens: Int32Array.of(argmax(r.data)), seq: Int32Array.of(s), pos: Int32Array.of(p.length + i), outputs: last(1) });
    out.push(r.data.slice());
  }
  await e.releaseSequence(s);
  return out;
}
async function batched(mates: number): Promise<Float32Array[]> {
  // pre-fill some other sessions first and release one, so the pool is fragmented
  const junk = e.openSequence();
  const jp = mk(37, 99);
  await e.decode({ tokens: jp, seq: new Int32Array(jp.length).fill(junk), pos: Int32Array.from(jp.keys()), outputs: last(jp.length) });
  const s = e.openSequence();
  await e.releaseSequence(junk);
  const p = mk(promptLen, 0);
  // target prefill together with a mate's prefill
  const m0 = e.openSequence();
  const mp = mk(23, 1);
  const both = { tokens: new Int32Array([...p, ...mp]), seq: new Int32Array([...new Array(p.length).fill(s), ...new Array(mp.length).fill(m0)]), pos: Int32Array.from([...p.keys(), ...mp.keys()]), outputs: Uint8Array.from([...last(p.length), ...last(mp.length)]) };
  let r = await e.decode(both);
  const dim = r.dim;
  let tRow = r.data.slice(0, dim);
  const out = [tRow.slice()];
  const mates_: { seq: number; next: number; tok: number }[] = [{ seq: m0, next: mp.length, tok: argmax(r.data.subarray(dim, 2 * dim)) }];
  for (let i = 0; i < STEPS; i++) {
    // mates join over time (prefill chunks beside the target's decode), one leaves halfway
    const tokens = [argmax(tRow)], seq = [s], pos = [p.length + i], outs = [1];
    const rowsFor: typeof mates_ = [];
    for (const m of mates_) {
      tokens.push(m.tok); seq.push(m.seq); pos.push(m.next); outs.push(1); m.next++; rowsFor.push(m);
    }
    if (mates_.length < mates && i % 2 === 0) {
      const ms = e.openSequence();
      const q = mk(5 + (i * 3) % 17, i + 2);
      q.forEach((t, k) => { tokens.push(t); seq.push(ms); pos.push(k); outs.push(k === q.length - 1 ? 1 : 0); });
      const m = { seq: ms, next: q.length, tok: -1 };
      mates_.push(m);
      rowsFor.push(m);
    }
    r = await e.decode({ tokens: Int32Array.from(tokens), seq: Int32Array.from(seq), pos: Int32Array.from(pos), outputs: Uint8Array.from(outs) });
    tRow = r.data.slice(0, dim);
    out.push(tRow.slice());
    rowsFor.forEach((m, k) => (m.tok = argmax(r.data.subarray((k + 1) * dim, (k + 2) * dim))));
    if (i === Math.floor(STEPS / 2) && mates_.length > 1) { const gone = mates_.splice(1, 1)[0]; await e.releaseSequence(gone.seq as never); }
  }
  for (const m of mates_) await e.releaseSequence(m.seq as never);
  await e.releaseSequence(s);
  return out;
}
const ref = await alone();
const ref2 = await alone();
const same = (a: Float32Array[], b: Float32Array[]) => a.findIndex((x, i) => !x.every((v, k) => Object.is(v, b[i][k])));
console.log(JSON.stringify({ alone_repeat_first_diff_step: same(ref, ref2) }));
for (const mates of [1, 3, 7, 15]) {
  const b = await batched(mates);
  let maxd = 0;
  b.forEach((x, i) => x.forEach((v, k) => (maxd = Math.max(maxd, Math.abs(v - ref[i][k])))));
  console.log(JSON.stringify({ mates, first_diff_step: same(ref, b), max_abs_diff: maxd, tokens_equal: b.every((x, i) => argmax(x) === argmax(ref[i])) }));
}
await e.close();
