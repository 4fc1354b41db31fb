// A `strata` command run to its end, for the suite's Deno scripts: its stdout (it must succeed).
const cli = new URL("../../server/cli.ts", import.meta.url).pathname;
const config = new URL("../../deno.json", import.meta.url).pathname;

export async function strataCli(args: string[]): Promise<string> {
  const o = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "--config", config, cli, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!o.success) {
    throw new Error(`strata ${args.join(" ")}: ${new TextDecoder().decode(o.stderr).slice(-2000)}`);
  }
  return new TextDecoder().decode(o.stdout);
}
