// The reference a tracker admits nodes against: for each probe prompt, the residual stream
// leaving every layer and the last token's logits. It comes from a file the model's publisher
// signed (`strata model certify`), so the tracker never loads a weight. Nothing in the file is
// trusted before its signature, artifact and every size check out.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  ProbeSchema,
  type ProbeSet,
  ProbeSetSchema,
  SignedProbeSetSchema,
} from "../../gen/strata/model/v1/reference_pb.ts";
import { bytesToHex } from "../../bytes/hex.ts";
import { importPublicRouteKey } from "../../route/keys.ts";

export interface ReferenceProbe {
  readonly tokens: Int32Array;
  /** after[l]: tokens × nEmbd, the residual stream leaving layer l (the last: the last token's row) */
  readonly after: readonly Float32Array[];
  /** the last token's logits */
  readonly logits: Float32Array;
}

export interface ProbeReference {
  readonly nLayer: number;
  readonly nEmbd: number;
  readonly nVocab: number;
  /** the engine that computed it (same engine: exact tolerance) */
  readonly engine: string;
  readonly probes: readonly ReferenceProbe[];
  /** raw Ed25519 key that signed it, hex */
  readonly publisher: string;
}

export class ReferenceError extends Error {}

/** A probe set as stored: f32 states as little-endian bytes. */
export function probeSet(o: {
  artifactSha256: Uint8Array;
  nLayer: number;
  nEmbd: number;
  nVocab: number;
  engine: string;
  probes: readonly ReferenceProbe[];
  memoryCapBytes: number;
  ranges: ReadonlyArray<{ start: number; end: number }>;
}): ProbeSet {
  const bytes = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength).slice();
  return create(ProbeSetSchema, {
    artifactSha256: o.artifactSha256,
    nLayer: o.nLayer,
    nEmbd: o.nEmbd,
    nVocab: o.nVocab,
    engine: o.engine,
    memoryCapBytes: BigInt(o.memoryCapBytes),
    ranges: o.ranges.map((r) => ({ start: r.start, end: r.end })),
    probes: o.probes.map((p) =>
      create(ProbeSchema, { tokens: [...p.tokens], after: p.after.map(bytes), logits: bytes(p.logits) })
    ),
  });
}

/** The reference file: the set's bytes, the publisher's public key and its signature. */
export async function signProbeSet(set: ProbeSet, key: { privateKey: CryptoKey; publicRaw: Uint8Array }) {
  const body = toBinary(ProbeSetSchema, set);
  const signature = new Uint8Array(await crypto.subtle.sign("Ed25519", key.privateKey, body));
  return toBinary(
    SignedProbeSetSchema,
    create(SignedProbeSetSchema, { probeSet: body, publisherKey: key.publicRaw, signature }),
  );
}

/**
 * Verifies and reads a reference file for `artifact` (sha256 hex). With `publisher`, only a
 * file signed by that key (raw, hex) is taken.
 */
export async function openReference(
  file: Uint8Array,
  expect: { artifact: string; publisher?: string },
): Promise<ProbeReference> {
  let signed;
  try {
    signed = fromBinary(SignedProbeSetSchema, file);
  } catch (e) {
    throw new ReferenceError(`not a reference file: ${e instanceof Error ? e.message : e}`);
  }
  const publisher = bytesToHex(signed.publisherKey);
  if (expect.publisher && publisher !== expect.publisher.toLowerCase()) {
    throw new ReferenceError(`signed by ${publisher}, not by the publisher ${expect.publisher}`);
  }
  let key: CryptoKey;
  try {
    key = await importPublicRouteKey(signed.publisherKey);
  } catch {
    throw new ReferenceError("the publisher key is no Ed25519 key");
  }
  if (!await crypto.subtle.verify("Ed25519", key, signed.signature.slice(), signed.probeSet.slice())) {
    throw new ReferenceError("the signature does not match the probe set");
  }
  let set: ProbeSet;
  try {
    set = fromBinary(ProbeSetSchema, signed.probeSet);
  } catch (e) {
    throw new ReferenceError(`a signed probe set that does not parse: ${e instanceof Error ? e.message : e}`);
  }
  if (bytesToHex(set.artifactSha256) !== expect.artifact) {
    throw new ReferenceError(`made for artifact ${bytesToHex(set.artifactSha256)}, not ${expect.artifact}`);
  }
  const { nLayer, nEmbd, nVocab } = set;
  if (nLayer < 1 || nEmbd < 1 || nVocab < 1 || set.probes.length === 0) {
    throw new ReferenceError("an empty probe set");
  }
  const f32 = (b: Uint8Array, n: number, what: string) => {
    if (b.byteLength !== 4 * n) throw new ReferenceError(`${what}: ${b.byteLength} bytes, not ${4 * n}`);
    return new Float32Array(b.slice().buffer);
  };
  const probes = set.probes.map((p, i) => {
    const n = p.tokens.length;
    if (n === 0) throw new ReferenceError(`probe ${i} has no tokens`);
    if (p.tokens.some((t) => t < 0 || t >= nVocab)) {
      throw new ReferenceError(`probe ${i}: a token outside the vocabulary`);
    }
    if (p.after.length !== nLayer) {
      throw new ReferenceError(`probe ${i}: ${p.after.length} states for ${nLayer} layers`);
    }
    return {
      tokens: Int32Array.from(p.tokens),
      after: p.after.map((b, l) => f32(b, (l === nLayer - 1 ? 1 : n) * nEmbd, `probe ${i} layer ${l}`)),
      logits: f32(p.logits, nVocab, `probe ${i} logits`),
    };
  });
  return { nLayer, nEmbd, nVocab, engine: set.engine, probes, publisher };
}
