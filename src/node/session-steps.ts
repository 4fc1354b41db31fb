// A session's prefill chunks and decode steps on a shard node: each is checked whole, queued for
// a batch, and its result goes on to the next shard, or (on the last shard) is sampled and
// answered to the session's owner. A step id already taken never runs twice.
import { create } from "@bufbuild/protobuf";
import {
  ElementType,
  type NodeTelemetry,
  NodeTelemetrySchema,
  Phase,
  type Sampled,
  SampledSchema,
  type SeamFrame,
  SeamFrameSchema,
} from "../gen/strata/seam/v1/seam_pb.ts";
import type { RangeEngine } from "../engine/range-engine.ts";
import type { Batcher, Step, StepResult } from "../scheduler/batcher.ts";
import { unixMs } from "../seam/clock.ts";
import { codecMs } from "../seam/codec-time.ts";
import { packTensor, unpackTensor } from "../seam/tensor.ts";
import { checkStep, checkStepId, tokenIds } from "./frame-checks.ts";
import type { NodeCounters } from "./node-info.ts";
import type { NodeSession } from "./node-session.ts";
import type { OwnerLinks } from "./owner-links.ts";
import { errorCode, errorText, refusal, replyTo, tensorBytes } from "./replies.ts";
import { sampleNow, sampleUnderGrammar } from "./session-sampling.ts";
import type { SessionTable } from "./session-table.ts";

export class SessionSteps {
  constructor(
    readonly engine: RangeEngine,
    readonly batcher: Batcher,
    readonly nodeId: string,
    readonly table: SessionTable,
    readonly owners: OwnerLinks,
    readonly counters: NodeCounters,
  ) {}

  get #first(): boolean {
    return this.engine.input === "tokens";
  }

  get #last(): boolean {
    return this.engine.output === "logits";
  }

  /** Takes a prefill chunk or decode step: checks it whole, then queues it for a batch. */
  take(s: NodeSession, f: SeamFrame): void {
    // taken off its stream this turn: telemetry times the crossing with it
    const arrived = unixMs();
    checkStepId(f);
    // rebuild frames come from the previous shard, numbered apart from the driver's steps
    if (!f.rebuild && f.stepId <= s.lastStep) {
      // a duplicate never runs twice: answered again if done, otherwise its reply is coming
      const again = s.remembered(f.stepId);
      if (again) s.reply(again);
      return;
    }
    const { start, count } = f.positions!;
    if (s.reused > 0 && !f.rebuild) {
      // the route continues from the smallest prefix its shards held: this one may hold more
      if (start < s.nextPos && start === f.cacheExpect) {
        s.nextPos = s.sentFrom = this.batcher.cutBack(s.id, start);
        s.fromEntry = Math.min(s.fromEntry, s.nextPos);
      }
      s.reused = 0;
    }
    checkStep(f, s);
    const wantLogits = this.#last && !f.rebuild &&
      (f.phase === Phase.DECODE || f.chunkIndex === f.chunkCount - 1);
    const step: Step = this.#first ? { tokens: tokenIds(f, count, this.engine.facts.nVocab), wantLogits } : {
      hidden: unpackTensor(f.tensors[0], {
        name: "hidden_states",
        elementType: ElementType.F32,
        cols: this.engine.facts.seamWidth,
        rows: count,
      }).values as Float32Array,
      wantLogits,
    };
    this.batcher.check(s.id, step);
    s.nextPos += count;
    if (!f.rebuild) s.lastStep = f.stepId;
    this.batcher.submit(s.id, step).then(
      (r) => this.#done(s, f, r, arrived),
      (e) => this.#failed(s, f, e),
    );
  }

  #done(s: NodeSession, f: SeamFrame, r: StepResult, arrived: number): void {
    if (s.closed) return;
    const range = this.engine.facts.range;
    const telemetry = create(NodeTelemetrySchema, {
      node: this.nodeId,
      range: { start: range.start, end: range.end },
      queueMs: r.queuedMs,
      computeMs: r.computeMs,
      batchSessions: r.batchSessions,
      batchTokens: r.batchTokens,
      batchPasses: r.batchPasses,
      bytesIn: tensorBytes(f),
      // this step's frame in, and the last frame out (this one's is known once it is encoded)
      codecMs: codecMs(f) + s.lastEncodeMs,
      receivedUnixMs: arrived,
    });
    if (s.open.probe) {
      // an admission probe: the output itself goes back, for the tracker to check
      // (a copy: a step's logits are the batcher's to reuse once it has moved on)
      const out = packTensor(this.#last ? "logits" : "hidden_states", r.data.slice(), [r.rows, r.dim]);
      s.answer(
        replyTo(f, {
          cacheResult: f.positions!.start + f.positions!.count,
          telemetry: [telemetry],
          tensors: [out],
        }),
      );
      return;
    }
    if (!this.#last) {
      const hop = s.open.nextHops[0];
      // the step goes on with every node's telemetry so far: the last shard's reply carries it all
      const out = create(SeamFrameSchema, {
        ...f,
        range: hop.range,
        recipeFingerprint: this.engine.recipe,
        tensors: [packTensor("hidden_states", r.data, [r.rows, r.dim], s.open.seamCompression || undefined)],
        telemetry: [...f.telemetry, telemetry],
        crossings: f.crossings + 1,
      });
      this.table.history.keep(s, f.positions!.start, r.rows, out.tensors[0]);
      if (f.rebuild || !s.downstream) {
        // rebuilt positions: the next shard holds them already (parked: nobody to send to)
        if (f.rebuild) {
          s.answer(replyTo(f, { cacheResult: s.nextPos, rebuild: true, telemetry: [telemetry] }));
        }
        return;
      }
      telemetry.bytesOut = tensorBytes(out);
      telemetry.transport = s.downstream.transport;
      this.counters.bytesOut += telemetry.bytesOut;
      telemetry.sentUnixMs = unixMs();
      s.downstream.send(out);
      s.lastEncodeMs = codecMs(out);
      return;
    }
    const { start, count } = f.positions!;
    if (f.rebuild) {
      s.answer(replyTo(f, { cacheResult: start + count, rebuild: true, telemetry: [telemetry] }));
      return;
    }
    if (r.rows === 1 && s.grammar) {
      // the grammar is the engine's: a wait (a WASM worker's), then the reply
      const t0 = performance.now();
      sampleUnderGrammar(s, r.data.slice(), start + count - 1).then(
        (c) => {
          if (s.closed) return;
          telemetry.sampleMs = performance.now() - t0;
          this.#sampled(s, f, telemetry, create(SampledSchema, c));
        },
        (e) => this.#failed(s, f, e),
      );
      return;
    }
    const t0 = performance.now();
    const sampled = r.rows === 1 ? create(SampledSchema, sampleNow(s, r.data, start + count - 1)) : undefined;
    telemetry.sampleMs = performance.now() - t0;
    this.#sampled(s, f, telemetry, sampled);
  }

  /** The last shard's reply to a step, with its token. */
  #sampled(s: NodeSession, f: SeamFrame, telemetry: NodeTelemetry, sampled: Sampled | undefined): void {
    const { start, count } = f.positions!;
    const owner = this.owners.of(s);
    telemetry.transport = owner?.transport ?? s.upstreamTransport;
    telemetry.sentUnixMs = unixMs();
    const reply = replyTo(f, {
      cacheResult: start + count,
      // last shard first
      telemetry: [telemetry, ...f.telemetry.reverse()],
      sampled,
      crossings: f.crossings + 1,
    });
    s.answer(reply, owner?.send);
    s.lastEncodeMs = codecMs(reply);
  }

  #failed(s: NodeSession, f: SeamFrame, e: unknown): void {
    if (s.closed) return;
    s.reply(refusal(f, e));
    // an engine failure leaves the session's cache where no frame expects it
    if (errorCode(e) !== "cancelled") void this.table.drop(s, `step failed: ${errorText(e)}`);
  }
}
