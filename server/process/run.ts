// Runs a child command; its output lines go to a callback (for progress) and are kept
// for the error message when it fails.
import { describeExit } from "./exit.ts";

export async function runCommand(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; onLine?: (line: string) => void } = {},
): Promise<void> {
  const child = new Deno.Command(cmd, {
    args,
    cwd: opts.cwd,
    env: opts.env,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const tail: string[] = [];
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let buf = "";
    for await (
      const chunk of stream.pipeThrough(new TextDecoderStream() as TransformStream<Uint8Array, string>)
    ) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        tail.push(line);
        if (tail.length > 40) tail.shift();
        opts.onLine?.(line);
      }
    }
  };
  const [status] = await Promise.all([child.status, pump(child.stdout), pump(child.stderr)]);
  if (!status.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${describeExit(status)}):\n${tail.join("\n")}`);
  }
}
