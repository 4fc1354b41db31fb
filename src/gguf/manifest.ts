// A Model Artifact's manifest: every tensor with its place in the file and in the model,
// and what a Shard [start, end) must load. Built from the header alone, so a node can plan
// ranged fetches before it downloads any weights.

import { arch, blockCount, GgufError, type GgufHeader, trunkLayers } from "./reader.ts";
import { ggmlTypeName, type TensorRole } from "./types.ts";
import { type KvLayer, kvShape } from "./kv-shape.ts";
import { type CutRule, cutRule } from "./cut-points.ts";

/** The sha256 of an artifact's bytes, lower-case hex: the artifact's name. */
export type ArtifactId = string & { readonly __brand: "ArtifactId" };

export interface ManifestTensor {
  readonly name: string;
  readonly layer: number | null;
  readonly role: TensorRole;
  readonly type: number;
  readonly typeName: string;
  readonly shape: readonly number[];
  /** Absolute byte offset in the file. */
  readonly offset: number;
  readonly size: number;
}

export interface Manifest {
  readonly artifact: ArtifactId;
  readonly arch: string;
  readonly nLayer: number;
  readonly fileSize: number;
  readonly dataOffset: number;
  readonly tensors: readonly ManifestTensor[];
  /** Tensor bytes of each layer, indexed by layer. */
  readonly layers: readonly number[];
  readonly inputBytes: number;
  readonly outputBytes: number;
  readonly sharedBytes: number;
  /** True when the model has no output.weight and its head reuses token_embd.weight. */
  readonly tiedEmbeddings: boolean;
  /** each trunk layer's KV cache (absent from manifests built before it was recorded) */
  readonly kv?: readonly KvLayer[];
  /** layers no range may start at, and why (absent: any boundary is a cut) */
  readonly cuts?: CutRule;
}

export interface ShardNeeds {
  readonly tensors: readonly ManifestTensor[];
  readonly bytes: number;
  /** The same bytes as merged [start, end) file spans, in file order: what to fetch. */
  readonly spans: ReadonlyArray<readonly [number, number]>;
}

export function artifactId(sha256Hex: string): ArtifactId {
  const hex = sha256Hex.toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(hex)) {
    throw new GgufError("bad_value", `'${sha256Hex}' is not a sha256 hex digest`);
  }
  return hex as ArtifactId;
}

/** sha256 of bytes through WebCrypto (browser, Deno and Node alike). */
export async function sha256Hex(bytes: Uint8Array): Promise<ArtifactId> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return artifactId(Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""));
}

/** Builds the manifest; GgufError when a tensor lies outside the file or names a layer the model lacks. */
export function buildManifest(header: GgufHeader, fileSize: number, sha256: string): Manifest {
  const blocks = blockCount(header);
  const nLayer = trunkLayers(header);
  const layers = new Array<number>(nLayer).fill(0);
  let inputBytes = 0, outputBytes = 0, sharedBytes = 0;
  const tensors = header.tensors.map((t): ManifestTensor => {
    if (t.offset + t.size > fileSize) {
      throw new GgufError(
        "truncated",
        `tensor '${t.name}' ends at ${t.offset + t.size}, past the ${fileSize}-byte file`,
      );
    }
    if (t.layer !== null && t.layer >= blocks) {
      throw new GgufError("bad_tensor", `tensor '${t.name}' is in layer ${t.layer} of ${blocks}`);
    }
    // a nextn (MTP) layer goes with the output head
    const role = t.layer !== null && t.layer >= nLayer ? "output" : t.role;
    if (role === "layer") layers[t.layer!] += t.size;
    else if (role === "input") inputBytes += t.size;
    else if (role === "output") outputBytes += t.size;
    else sharedBytes += t.size;
    const { name, layer, type, shape, offset, size } = t;
    return { name, layer, role, type, typeName: ggmlTypeName(type), shape, offset, size };
  });
  return {
    artifact: artifactId(sha256),
    arch: arch(header),
    nLayer,
    fileSize,
    dataOffset: header.dataOffset,
    tensors,
    layers,
    inputBytes,
    outputBytes,
    sharedBytes,
    tiedEmbeddings: !tensors.some((t) => t.name === "output.weight"),
    kv: kvShape(header).layers,
    cuts: cutRule(header),
  };
}

/**
 * Tensors a Shard of layers [start, end) loads: its blocks, the input tensors when it
 * starts at 0, the output tensors when it ends at nLayer (plus token_embd.weight as the
 * head when embeddings are tied), and shared tensors always.
 */
export function shardBytes(m: Manifest, start: number, end: number): ShardNeeds {
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || start >= end || end > m.nLayer) {
    throw new RangeError(`layer range [${start}, ${end}) is not inside [0, ${m.nLayer})`);
  }
  const first = start === 0, last = end === m.nLayer;
  const tensors = m.tensors.filter((t) => {
    switch (t.role) {
      case "layer":
        return t.layer! >= start && t.layer! < end;
      case "input":
        return first || (last && m.tiedEmbeddings && t.name === "token_embd.weight");
      case "output":
        return last;
      case "shared":
        return true;
    }
  });
  const sorted = [...tensors].sort((a, b) => a.offset - b.offset);
  const spans: Array<[number, number]> = [];
  for (const t of sorted) {
    const prev = spans[spans.length - 1];
    // tensors separated only by alignment padding fetch as one span
    if (prev && t.offset - prev[1] < 64) prev[1] = Math.max(prev[1], t.offset + t.size);
    else spans.push([t.offset, t.offset + t.size]);
  }
  return { tensors, bytes: tensors.reduce((s, t) => s + t.size, 0), spans };
}

const mib = (n: number): string => (n / (1024 * 1024)).toFixed(2);

/** A readable summary: one line per layer group, then every tensor. */
export function formatManifest(m: Manifest): string {
  const lines = [
    `artifact ${m.artifact}`,
    `arch ${m.arch}, ${m.nLayer} layers, ${m.tensors.length} tensors, ${m.fileSize} bytes (data at ${m.dataOffset})` +
    (m.tiedEmbeddings ? ", tied embeddings" : ""),
    `input ${mib(m.inputBytes)} MiB, output ${mib(m.outputBytes)} MiB, shared ${mib(m.sharedBytes)} MiB`,
    "",
    "layer        MiB",
    ...m.layers.map((b, i) => `${String(i).padStart(5)} ${mib(b).padStart(10)}`),
    "",
  ];
  const rows = m.tensors.map((
    t,
  ) => [t.name, t.role, t.typeName, `[${t.shape.join(", ")}]`, String(t.offset), String(t.size)]);
  const head = ["tensor", "role", "type", "shape", "offset", "bytes"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) =>
    r.map((c, i) => (i >= 4 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join("  ").trimEnd();
  lines.push(fmt(head), ...rows.map(fmt));
  return lines.join("\n");
}
