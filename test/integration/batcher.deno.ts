// Run by batcher.test.ts under Deno: 8 sessions with different prompts start at staggered
// times on one native engine through the Batcher; each must produce what it produces alone.
import { layerRange } from "../../src/engine/layer-range.ts";
import { synthModel } from "../../src/model/synth.ts";
import { agreement, type Step as Gen, top2 } from "../../src/parity/compare.ts";
import { Batcher } from "../../src/scheduler/batcher.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";

const file = `${Deno.makeTempDirSync()}/llama.gguf`;
Deno.writeFileSync(file, synthModel({ arch: "llama", seed: 21 }));
const engine = await NativeEngine.load({
  modelPath: file,
  range: layerRange(0, 6),
  kvCells: 1024,
  maxSequences: 8,
  batchTokens: 256,
  threads: 2,
});
const batcher = new Batcher(engine, {
  maxBatchTokens: 256,
  maxQueuedPerSession: 4,
  kvCells: (await engine.memory()).kvCells,
  kvCellsPerSession: (await engine.memory()).kvCellsPerSequence,
});
const STEPS = 12;
const prompts = Array.from(
  { length: 8 },
  (_, i) => Int32Array.from({ length: 4 + 3 * i }, (_, j) => (j * 31 + i * 7) % 380 + 1),
);

async function generate(
  id: string,
  prompt: Int32Array,
  stopAfter = STEPS,
  onStep = (_done: number) => {},
): Promise<Gen[]> {
  const out: Gen[] = [];
  let input = prompt;
  for (let k = 0; k < stopAfter; k++) {
    const r = await batcher.submit(id, { tokens: input, wantLogits: true });
    const token = top2(r.data).best;
    out.push({ token, logits: r.data });
    input = Int32Array.of(token);
    onStep(k + 1);
  }
  return out;
}

// alone: one session at a time
const alone: Gen[][] = [];
for (let i = 0; i < 8; i++) {
  batcher.open(`alone-${i}`, 64);
  alone.push(await generate(`alone-${i}`, prompts[i]));
  await batcher.release(`alone-${i}`);
}

// together: session i joins once session 0 has taken i steps, so each joins a running batch
// (staggered by steps, not by a clock: a tiny model's 12 steps can end within a few ms);
// sessions 6 and 7 are cancelled after 4 steps
const joinAt: { step: number; go: () => void }[] = [];
const afterLeadStep = (step: number) => new Promise<void>((go) => joinAt.push({ step, go }));
const leadStepped = (done: number) => {
  for (const j of joinAt.filter((j) => j.step <= done)) j.go();
};
const cancelled: Record<string, string> = {};
const together = await Promise.all(prompts.map(async (p, i) => {
  if (i > 0) await afterLeadStep(i);
  const id = `s-${i}`;
  batcher.open(id, 64);
  if (i >= 6) {
    const first = await generate(id, p, 4);
    const pending = batcher.submit(id, { tokens: Int32Array.of(first[3].token), wantLogits: true })
      .then(() => "completed", (e) => `${e.code}: ${e.message}`);
    await batcher.release(id, "cancelled");
    cancelled[id] = await pending;
    return first;
  }
  return await generate(id, p, STEPS, i === 0 ? leadStepped : undefined);
}));
// the cancelled sessions hold nothing; the six others hold exactly their tokens
const kvAfterCancel = (await engine.memory()).kvCellsUsed;
const expectedKvAfterCancel = prompts.slice(0, 6).reduce((n, p) => n + p.length + STEPS - 1, 0);
const statsTogether = batcher.stats();
for (let i = 0; i < 6; i++) await batcher.release(`s-${i}`);
const agreements = together.map((t, i) => agreement(alone[i].slice(0, t.length), t));

// bad input: none of it sinks a session that shares the batch
const refusals: Record<string, string> = {};
const attempt = async (name: string, fn: () => unknown) => {
  try {
    await fn();
    refusals[name] = "accepted";
  } catch (e) {
    refusals[name] = `${(e as { code?: string }).code}: ${(e as Error).message}`;
  }
};
await attempt("over_budget", () => batcher.open("greedy", 1025));
await attempt(
  "unknown_session",
  () => batcher.submit("nobody", { tokens: Int32Array.of(1), wantLogits: true }),
);
batcher.open("flood", 8);
const flood = Array.from(
  { length: 6 },
  () => batcher.submit("flood", { tokens: Int32Array.of(1), wantLogits: false }),
);
const floodResults = await Promise.allSettled(flood);
refusals["flood"] = floodResults.map((r) =>
  r.status === "fulfilled" ? "ok" : (r.reason as { code: string }).code
).join(",");
batcher.open("bad", 8);
batcher.open("good", 8);
const [bad, good] = await Promise.allSettled([
  batcher.submit("bad", { hidden: new Float32Array(64), wantLogits: true }),
  batcher.submit("good", { tokens: Int32Array.of(5, 6), wantLogits: true }),
]);
refusals["bad_step"] = bad.status === "rejected" ? `${(bad.reason as { code: string }).code}` : "accepted";
refusals["good_beside_bad"] = good.status === "fulfilled"
  ? `${good.value.rows}x${good.value.dim}`
  : String(good.reason);
const expired = await batcher.expireIdle(0, Date.now() + 1);

console.log(JSON.stringify({
  agreements,
  cancelled,
  kvAfterCancel,
  expectedKvAfterCancel,
  statsTogether,
  refusals,
  expired: expired.sort(),
  kvAtEnd: (await engine.memory()).kvCellsUsed,
}));
await engine.close();
