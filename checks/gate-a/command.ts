// `strata bench gate-a` (runs the four lanes, writes the signed report and its summary) and
// `strata bench verify REPORT` (checks a signed report).
import { Command } from "commander";
import { join } from "node:path";
import { DEFAULT_MODEL } from "../../server/model/default-model.ts";
import { int } from "../../server/cli/options.ts";
import { benchGateA } from "./gate-a.ts";
import { gateAMarkdown } from "./gate-a-report.ts";
import { benchKey, signReport, verifyReport } from "./signed-report.ts";

export function gateACommand(): Command {
  return new Command("gate-a")
    .description(
      "Gate A: the same weights as F32 Transformers (PyTorch CPU), llama.cpp F16 and Q4_1, and a Strata route of 2; speed, memory, size and drift; a signed report",
    )
    .option("--split <ranges>", "the route's 2-shard split", DEFAULT_MODEL.split)
    .option("--threads <n>", "threads of every engine process (and of PyTorch)", int("threads"), 1)
    .option("--prompt <n>", "prompt tokens", int("prompt"), 64)
    .option("--tokens <n>", "decode steps", int("tokens"), 32)
    .option(
      "--text-tokens <n>",
      "tokens of the fixed text the drift is measured over",
      int("text-tokens"),
      2048,
    )
    .option("--key <file>", "the Ed25519 signing key (made on first use when absent)")
    .option("--out <dir>", "write gate-a.json and gate-a.md here", "bench-results")
    .action(async (o) => {
      const report = await benchGateA({
        threads: o.threads,
        promptTokens: o.prompt,
        decodeTokens: o.tokens,
        textTokens: o.textTokens,
        split: o.split,
        progress: (s) => console.error(`gate-a: ${s}`),
      });
      const signed = await signReport(report, await benchKey(o.key));
      await Deno.mkdir(o.out, { recursive: true });
      await Deno.writeTextFile(join(o.out, "gate-a.json"), JSON.stringify(signed, null, 2) + "\n");
      const md = gateAMarkdown(signed);
      await Deno.writeTextFile(join(o.out, "gate-a.md"), md);
      console.log(md);
      console.error(
        `gate-a: wrote ${o.out}/gate-a.json (signed by ${signed.signature.public_key}) and gate-a.md`,
      );
    });
}

export function verifyCommand(): Command {
  return new Command("verify")
    .description("check the Ed25519 signature of a signed bench report (exit 1 when it does not hold)")
    .argument("<report>", "a signed report, e.g. gate-a.json")
    .option("--public-key <base64>", "require this signer")
    .action(async (path: string, o) => {
      const r = await verifyReport(JSON.parse(await Deno.readTextFile(path)), o.publicKey);
      console.log(`${r.ok ? "OK" : "FAILED"}: ${path}: ${r.why}${r.signer ? ` (key ${r.signer})` : ""}`);
      if (!r.ok) Deno.exitCode = 1;
    });
}
