// The checks a shard node makes of every Seam Frame that reaches it, at the edge, before it
// touches a session's KV: addressed to this range of this artifact, a phase its stream may
// carry, the session and epoch the stream holds, a route that goes on from here, a step whole
// and continuing the cache. Each refusal is a SeamError with a code the sender can act on.
import { ElementType, type Open, Phase, type SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { bytesToHex } from "../bytes/hex.ts";
import type { LayerRange } from "../engine/layer-range.ts";
import { verifyTicket } from "../route/ticket.ts";
import { SeamError } from "../seam/errors.ts";
import { checkFrame } from "../seam/frame.ts";
import { unpackTensor } from "../seam/tensor.ts";
import type { NodeSession } from "./node-session.ts";

/** Who a frame must be for: this node's artifact and layer range. */
export interface Addressee {
  readonly artifact: Uint8Array;
  readonly range: LayerRange;
}

/** What a session's own stream carries (a SNAPSHOT travels on a stream of its own). */
const SESSION_PHASES: ReadonlySet<Phase> = new Set([
  Phase.OPEN,
  Phase.PREFILL,
  Phase.DECODE,
  Phase.RELEASE,
  Phase.CANCEL,
]);

export const sameBytes = (a: Uint8Array, b: Uint8Array) =>
  a.length === b.length && a.every((v, i) => v === b[i]);
const hex8 = (b: Uint8Array) => b.length ? bytesToHex(b.subarray(0, 4)) : "(none)";

/** A frame that is whole and addressed to this node's range of its artifact. */
export function checkAddressed(f: SeamFrame, to: Addressee): void {
  checkFrame(f);
  const mine = to.range;
  if (f.range!.start !== mine.start || f.range!.end !== mine.end) {
    throw new SeamError(
      "wrong_shard",
      `frame for layers ${f.range!.start}:${f.range!.end}; this node holds ${mine.start}:${mine.end}`,
    );
  }
  if (!sameBytes(f.artifactSha256, to.artifact)) {
    throw new SeamError("wrong_shard", "frame for another model artifact");
  }
}

/** OPEN, a reply link or a parked session's cancel: a ticket for the frame's session, epoch and this range. */
export async function checkTicket(
  f: SeamFrame,
  key: CryptoKey | Promise<CryptoKey>,
  to: Addressee,
): Promise<void> {
  await verifyTicket(await key, f.open!.routeTicket, {
    sessionId: f.sessionId,
    routeEpoch: f.routeEpoch,
    artifactSha256: to.artifact,
    range: to.range,
  });
}

export function checkSessionPhase(f: SeamFrame): void {
  if (!SESSION_PHASES.has(f.phase)) {
    throw new SeamError("malformed", `phase ${f.phase} does not travel on a session's stream`);
  }
}

/** A step, release or cancel for the session its stream opened, at its epoch, while it has a route. */
export function checkOnStream(
  f: SeamFrame,
  session: NodeSession | undefined,
): asserts session is NodeSession {
  if (!session || session.closed) {
    throw new SeamError("unknown_session", `session ${f.sessionId} is not open on this stream`);
  }
  if (session.id !== f.sessionId) {
    throw new SeamError("malformed", `this stream carries session ${session.id}, not ${f.sessionId}`);
  }
  if (f.routeEpoch !== session.epoch) {
    throw new SeamError(
      "wrong_epoch",
      `session ${session.id} is at epoch ${session.epoch}, frame at ${f.routeEpoch}`,
    );
  }
  if (session.parkedUntil && f.phase !== Phase.CANCEL && f.phase !== Phase.RELEASE) {
    throw new SeamError("unavailable", `session ${session.id} lost its route here; it waits for a repair`);
  }
}

/** A step from the engine recipe that opened the session. */
export function checkRecipe(f: SeamFrame, session: NodeSession): void {
  if (!sameBytes(f.recipeFingerprint, session.upstreamRecipe)) {
    // this shard's KV holds what the opening engine computed: another build's states would not continue it
    throw new SeamError(
      "wrong_recipe",
      `session ${session.id} opened behind engine recipe ${hex8(session.upstreamRecipe)}, frame from ${
        hex8(f.recipeFingerprint)
      }`,
    );
  }
}

/** An OPEN's route, as this shard sees it: it goes on past this range exactly where a shard must. */
export function checkRoute(open: Open, range: LayerRange, last: boolean): void {
  const next = open.nextHops[0];
  if (open.probe && next) throw new SeamError("malformed", "a probe goes to one shard only");
  if (last && next) throw new SeamError("malformed", "the route goes on past the last layer");
  if (!last && !next && !open.probe) {
    throw new SeamError("malformed", `the route ends at layer ${range.end}`);
  }
  if (next && next.range?.start !== range.end) {
    throw new SeamError("malformed", `the next hop starts at layer ${next.range?.start}, not ${range.end}`);
  }
}

/** An owner's reply link: whole, and to the shard that samples. */
export function checkReplyLink(f: SeamFrame, last: boolean): void {
  checkFrame(f);
  if (!last) throw new SeamError("malformed", "only the last shard sends replies to the owner");
}

export function checkStepId(f: SeamFrame): void {
  if (f.stepId === 0n) throw new SeamError("malformed", "a step needs a step id");
}

/** A new step (not a duplicate): at the session's next position, one tensor, chunks in order. */
export function checkStep(f: SeamFrame, s: NodeSession): void {
  const { start } = f.positions!;
  if (start !== s.nextPos || f.cacheExpect !== s.nextPos) {
    throw new SeamError(
      "bad_position",
      `session ${s.id} continues at ${s.nextPos}; frame at ${start} expecting ${f.cacheExpect}`,
    );
  }
  if (f.phase === Phase.PREFILL && !(f.chunkCount > 0 && f.chunkIndex < f.chunkCount)) {
    throw new SeamError("malformed", `prefill chunk ${f.chunkIndex} of ${f.chunkCount}`);
  }
  if (f.tensors.length !== 1) {
    throw new SeamError("bad_tensor", `${f.tensors.length} tensors; a step carries one`);
  }
  if (f.rebuild && f.phase !== Phase.PREFILL) {
    throw new SeamError("malformed", "a rebuild frame is a prefill");
  }
}

/** A first shard's step: its token ids, each inside the vocabulary. */
export function tokenIds(f: SeamFrame, count: number, nVocab: number): Int32Array {
  const ids = unpackTensor(f.tensors[0], { name: "token_ids", elementType: ElementType.I32, cols: count })
    .values as Int32Array;
  const bad = ids.findIndex((t) => t < 0 || t >= nVocab);
  if (bad >= 0) {
    throw new SeamError("bad_tensor", `token id ${ids[bad]} outside the vocabulary (${nVocab})`);
  }
  return ids;
}
