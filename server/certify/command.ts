// `strata model certify FILE --memory-cap SIZE`: the model's signed probe reference.
import { Command } from "commander";
import { bytesToHex } from "../../src/bytes/hex.ts";
import { backendOption, int, MEMORY_SIZE_HELP, memorySize, nativeBackend } from "../cli/options.ts";
import { certify } from "./certify.ts";
import { defaultPublisherKeyPath, publisherKey } from "../model/publisher-key.ts";
import { referenceBeside } from "../model/reference-file.ts";

/** This process's memory (Linux): now (VmRSS) or the most it has held (VmHWM), in bytes. */
async function rss(which: "VmRSS" | "VmHWM"): Promise<number | undefined> {
  const m = new RegExp(`${which}:\\s+(\\d+) kB`).exec(
    await Deno.readTextFile("/proc/self/status").catch(() => ""),
  );
  return m ? Number(m[1]) * 1024 : undefined;
}

export function certifyCommand(): Command {
  return new Command("certify")
    .description(
      "compute the tracker's probe reference range by range under a memory cap, and sign it",
    )
    .argument("<file>", "the .gguf")
    .requiredOption(
      "--memory-cap <size>",
      `the most one loaded range may take: weights, KV, compute (e.g. 2GiB; ${MEMORY_SIZE_HELP})`,
      memorySize,
    )
    .option("--out <file>", "where to write it (default: <file>.strata-ref)")
    .option("--key <file>", "the publisher's Ed25519 key file (made when absent)", defaultPublisherKeyPath())
    .option("--probes <n>", "probe prompts", int("probes"), 4)
    .option("--tokens <n>", "tokens in each probe prompt", int("tokens"), 8)
    .addOption(backendOption())
    .action(async (file: string, o) => {
      const t0 = performance.now();
      // before any engine: what the process takes without a model
      const baseRss = await rss("VmRSS");
      const key = await publisherKey(o.key);
      const made = await certify({
        modelPath: file,
        capBytes: o.memoryCap,
        backend: nativeBackend(o.backend),
        key,
        probes: o.probes,
        tokens: o.tokens,
      });
      const out = o.out ?? referenceBeside(file);
      await Deno.writeFile(out, made.file);
      console.log(JSON.stringify({
        event: "certified",
        reference: out,
        bytes: made.file.length,
        artifact: made.artifact,
        publisher: bytesToHex(key.publicRaw),
        ranges: made.ranges.map((r) => `${r.start}:${r.end}`),
        memory_cap_bytes: o.memoryCap,
        base_rss_bytes: baseRss,
        peak_rss_bytes: await rss("VmHWM"),
        ms: Math.round(performance.now() - t0),
      }));
    });
}
