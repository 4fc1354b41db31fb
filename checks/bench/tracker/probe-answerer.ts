// The simulated nodes' one seam endpoint: it answers the tracker's admission probes as an
// honest node of the probed range would, from the model's signed reference (the very states
// the tracker compares with). Every simulated node advertises this endpoint; the probe's frames
// name the range. Other sessions (routes, spot checks) are refused: simulated sessions run on a
// latency model, not through seams.
import { ElementType, Phase, type SeamFrame } from "../../../src/gen/strata/seam/v1/seam_pb.ts";
import { answering, replyTo } from "../../../src/node/replies.ts";
import { SeamError } from "../../../src/seam/errors.ts";
import type { SeamServe } from "../../../src/seam/link.ts";
import { packTensor, unpackTensor } from "../../../src/seam/tensor.ts";
import type { ProbeReference } from "../../../src/tracker/admission/reference.ts";

export class ProbeAnswerer {
  /** probes answered */
  answered = 0;

  constructor(private readonly ref: ProbeReference) {}

  readonly serve: SeamServe = answering((f) => this.#answer(f));

  #answer(f: SeamFrame): SeamFrame {
    if (f.phase === Phase.OPEN) {
      if (!f.open?.probe) throw new SeamError("unavailable", "a simulated node takes admission probes only");
      return replyTo(f, { cacheResult: 0 });
    }
    if (f.phase === Phase.RELEASE || f.phase === Phase.CANCEL) return replyTo(f, { cacheResult: 0 });
    if (f.phase !== Phase.PREFILL || f.tensors.length !== 1 || !f.range) {
      throw new SeamError("malformed", "a probe is one prefill frame with one tensor");
    }
    const { start, end } = f.range;
    const first = start === 0;
    const input = unpackTensor(f.tensors[0], {
      name: first ? "token_ids" : "hidden_states",
      elementType: first ? ElementType.I32 : ElementType.F32,
      cols: first ? undefined : this.ref.nEmbd,
    }).values;
    // which of the reference's probes this is: its tokens, or the states before the range
    const probe = this.ref.probes.find((p) => {
      const want = first ? p.tokens : p.after[start - 1];
      return want.length === input.length && want.every((v, i) => v === input[i]);
    });
    if (!probe) throw new SeamError("malformed", "not one of the reference's probes");
    const n = probe.tokens.length;
    const last = end === this.ref.nLayer;
    this.answered++;
    const out = last
      ? packTensor("logits", probe.logits, [1, this.ref.nVocab])
      : packTensor("hidden_states", probe.after[end - 1], [n, this.ref.nEmbd]);
    return replyTo(f, { cacheResult: n, tensors: [out] });
  }
}
