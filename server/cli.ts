// The `strata` command line. Each subcommand is a thin shell over one module, loaded only when
// that subcommand runs: a node, the relay and the tracker hold only their own code.
import { existsSync } from "node:fs";
import { Command } from "commander";
import { watchParent } from "./process/parent-watch.ts";

watchParent();

type Load = () => Promise<Command>;

/** Every subcommand by name, in the order help lists them. */
const COMMANDS: [string, Load][] = [
  ["build", async () => (await import("./build/command.ts")).buildCommand()],
  // certify drives engines, which read model files: the two meet here, above both
  ["model", async () =>
    (await import("./model/commands.ts")).modelCommands()
      .addCommand((await import("./certify/command.ts")).certifyCommand())],
  ["key", async () => (await import("./route/command.ts")).keyCommand()],
  ["node", async () => (await import("./node/command.ts")).nodeCommand()],
  ["relay", async () => (await import("./relay/command.ts")).relayCommand()],
  ["route", async () => (await import("./route/command.ts")).routeCommand()],
  ["tracker", async () => (await import("./tracker/command.ts")).trackerCommand()],
  ["gateway", async () => (await import("./gateway/command.ts")).gatewayCommand()],
  ["artifacts", async () => (await import("./artifacts/command.ts")).artifactsCommand()],
  ["chat", async () => (await import("./gateway/command.ts")).chatCommand()],
  ["status", async () => (await import("./gateway/command.ts")).statusCommand()],
  ["tls", async () => (await import("./tls/command.ts")).tlsCommand()],
  ["test", async () => (await import("./test-command.ts")).testCommand()],
  ["up", async () => (await import("./up/command.ts")).upCommand()],
];

const program = new Command("strata")
  .description("Run GGUF language models across machines, one contiguous layer range per node.")
  .showHelpAfterError();

// the subcommand asked for alone; help, or a name not listed here, loads them all
const asked = COMMANDS.find(([name]) => name === Deno.args[0]);
for (const [, load] of asked ? [asked] : COMMANDS) program.addCommand(await load());

// parity, the benchmarks and test hosts live with the checks, apart from what users deploy;
// a tree without checks/ (a deployment) simply lacks those commands
const checks = new URL("../checks/commands.ts", import.meta.url);
if (!asked && existsSync(checks)) {
  const { addCheckCommands } = await import(checks.href);
  addCheckCommands(program);
}

try {
  await program.parseAsync(["deno", "strata", ...Deno.args]);
} catch (err) {
  // a refused request is one line; STRATA_DEBUG keeps the stack
  console.error(
    `strata: ${Deno.env.get("STRATA_DEBUG") ? (err as Error).stack : (err as Error).message ?? err}`,
  );
  Deno.exit(1);
}
// a command that returned is done: pthread workers of WASM engines would keep Deno alive
Deno.exit(Deno.exitCode);
