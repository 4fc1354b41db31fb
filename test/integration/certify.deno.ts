// `strata model certify` under a cap smaller than the model: its states against the whole
// model's own capture on the same probes (same engine: they must be equal), the file's
// signature and checks, and a tracker that has no reference for its model.
import { defaultModelPath } from "../../server/model/fetch.ts";
import { sha256File } from "../../server/model/hash.ts";
import { NativeEngine } from "../../server/engine/native/native-engine.ts";
import { openReference } from "../../src/tracker/admission/reference.ts";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { SignedProbeSetSchema } from "../../src/gen/strata/model/v1/reference_pb.ts";
import { bytesToHex } from "../../src/bytes/hex.ts";

const strata = `${new URL("../../strata", import.meta.url).pathname}`;
const run = async (args: string[]) => {
  const o = await new Deno.Command(strata, { args, stdout: "piped", stderr: "piped" }).output();
  return {
    code: o.code,
    stdout: new TextDecoder().decode(o.stdout),
    stderr: new TextDecoder().decode(o.stderr),
  };
};

const model = defaultModelPath();
const dir = await Deno.makeTempDir({ prefix: "strata-certify-" });
const report: Record<string, unknown> = {};
try {
  const out = `${dir}/smol.strata-ref`;
  const key = `${dir}/publisher.json`;
  const made = await run(["model", "certify", model, "--memory-cap", "40MB", "--out", out, "--key", key]);
  if (made.code !== 0) throw new Error(made.stderr);
  const summary = JSON.parse(made.stdout.trim().split("\n").pop()!);
  report.certified = summary;
  const artifact = await sha256File(model);
  const file = await Deno.readFile(out);
  const ref = await openReference(file, { artifact, publisher: summary.publisher });

  // the whole model on the same probes, capturing every layer
  const whole = await NativeEngine.load(
    { modelPath: model, range: "whole", kvCells: 32, maxSequences: 1, batchTokens: 8, threads: 2 },
    "cpu",
    { capture: true },
  );
  let maxDiff = 0;
  let maxLogitDiff = 0;
  try {
    await whole.capture(Array.from({ length: ref.nLayer }, (_, i) => i));
    for (const p of ref.probes) {
      const n = p.tokens.length;
      const seq = whole.openSequence();
      const outputs = new Uint8Array(n);
      outputs[n - 1] = 1;
      const o = await whole.decode({
        tokens: p.tokens,
        seq: new Int32Array(n).fill(seq),
        pos: Int32Array.from({ length: n }, (_, i) => i),
        outputs,
      });
      for (let l = 0; l < ref.nLayer; l++) {
        const w = await whole.captured(l);
        if (w.length !== p.after[l].length) {
          throw new Error(`layer ${l}: ${w.length} vs ${p.after[l].length}`);
        }
        for (let i = 0; i < w.length; i++) maxDiff = Math.max(maxDiff, Math.abs(w[i] - p.after[l][i]));
      }
      for (let i = 0; i < ref.nVocab; i++) {
        maxLogitDiff = Math.max(maxLogitDiff, Math.abs(o.data[i] - p.logits[i]));
      }
      await whole.releaseSequence(seq);
    }
  } finally {
    await whole.close();
  }
  report.vsWhole = { probes: ref.probes.length, layers: ref.nLayer, maxDiff, maxLogitDiff };

  // what a reference file must withstand
  const refused = async (bytes: Uint8Array, expect: { artifact: string; publisher?: string }) => {
    try {
      await openReference(bytes, expect);
      return "taken";
    } catch (e) {
      return (e as Error).message;
    }
  };
  const signed = fromBinary(SignedProbeSetSchema, file);
  const flipped = signed.probeSet.slice();
  flipped[flipped.length >> 1] ^= 1;
  report.checks = {
    tampered: await refused(toBinary(SignedProbeSetSchema, { ...signed, probeSet: flipped }), { artifact }),
    otherArtifact: await refused(file, { artifact: "00".repeat(32) }),
    otherPublisher: await refused(file, { artifact, publisher: bytesToHex(new Uint8Array(32).fill(7)) }),
    garbage: await refused(new Uint8Array([1, 2, 3, 4, 5]), { artifact }),
  };

  // a tracker for a model nobody certified refuses to start, and says how to make a reference
  const bare = `${dir}/bare.gguf`;
  const synth = await run(["model", "synth", "--arch", "llama", "--out", bare, "--layers", "2"]);
  if (synth.code !== 0) throw new Error(synth.stderr);
  const t = await run([
    "tracker",
    "--model",
    bare,
    "--node-token",
    "t",
    "--listen",
    "127.0.0.1:0",
    "--db",
    `${dir}/t.db`,
  ]);
  report.noReference = { code: t.code, stderr: t.stderr.trim().split("\n").pop() };
} finally {
  await Deno.remove(dir, { recursive: true });
}
console.log(JSON.stringify(report));
