// What one decode step costs a range, in bytes of weights read: a step is bound by memory
// traffic, so a layer costs what it weighs. The input embedding is a row lookup (free); the
// output head is a full matrix-vector product over the vocabulary, so the last range pays for
// it (SmolLM2's head weighs as much as eight of its layers). Speeds are measured per range and
// turned into bytes a second with this, so they compare across ranges.
import type { Manifest } from "../gguf/manifest.ts";

export interface Span {
  readonly start: number;
  readonly end: number;
}

/** Bytes of weights one decoded token reads in a range (prefix sums: asked many times over). */
export function decodeWork(m: Manifest): (span: Span) => number {
  const upTo = [0];
  for (let l = 0; l < m.nLayer; l++) upTo.push(upTo[l] + m.layers[l]);
  const embd = m.tensors.find((t) => t.name === "token_embd.weight")?.size ?? 0;
  // the output norm and matrix, or the tied embedding doing the matrix's job
  const head = m.outputBytes + (m.tiedEmbeddings ? embd : 0);
  return (s) => upTo[s.end] - upTo[s.start] + (s.end === m.nLayer ? head : 0);
}
