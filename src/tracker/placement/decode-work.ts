// What one decode step costs a range, in weights multiplied: every weight of a layer takes part
// in a token's step, and the output head is a full matrix-vector product over the vocabulary,
// so the last range pays for it (SmolLM2's head has as many weights as eight of its layers).
// The input embedding is a row lookup (free). Weights, not bytes: on a CPU a quant type's cost
// is its unpacking as much as its memory traffic. Measured on SmolLM2 Q4_1 (2-vCPU EPYC, one
// thread a node): its Q8_0 head has the weights of 8 layers and the bytes of 13.8; it took the
// time of 6.6 layers at one session, of 7.5 at four. Speeds are measured per range and turned
// into weights a second with this, so they compare across ranges.
import type { Manifest, ManifestTensor } from "../../gguf/manifest.ts";

export interface Span {
  readonly start: number;
  readonly end: number;
}

const weights = (t: ManifestTensor) => t.shape.reduce((n, d) => n * d, 1);

/** Weights one decoded token multiplies in a range (prefix sums: asked many times over). */
export function decodeWork(m: Manifest): (span: Span) => number {
  const perLayer = new Array<number>(m.nLayer).fill(0);
  let head = 0;
  for (const t of m.tensors) {
    // layers past the trunk (a next-token head's) are the output's, as the manifest counts them
    if (t.role === "layer" && t.layer !== null && t.layer < m.nLayer) perLayer[t.layer] += weights(t);
    else if (t.role === "output" || (t.layer !== null && t.layer >= m.nLayer)) head += weights(t);
  }
  // the tied embedding doing the output matrix's job
  const embd = m.tensors.find((t) => t.name === "token_embd.weight");
  if (m.tiedEmbeddings && embd) head += weights(embd);
  const upTo = [0];
  for (let l = 0; l < m.nLayer; l++) upTo.push(upTo[l] + perLayer[l]);
  return (s) => upTo[s.end] - upTo[s.start] + (s.end === m.nLayer ? head : 0);
}
