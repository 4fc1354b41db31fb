// A `strata` subcommand (node, relay) in its own OS process, started and awaited until it
// prints its one-line JSON "ready" event.
import { v8FlagsFor } from "./v8-flags.ts";
import { describeExit, OutputTail } from "./exit.ts";
import { PARENT_ENV } from "./parent-watch.ts";
const cli = new URL("../cli.ts", import.meta.url).pathname;
const config = new URL("../../deno.json", import.meta.url).pathname;

export class ServiceProcess {
  private constructor(
    readonly child: Deno.ChildProcess,
    readonly ready: Record<string, unknown>,
    readonly label: string,
  ) {}

  /** `netns`: run it inside that network namespace (a test host; needs root). */
  static async start(
    label: string,
    args: string[],
    env: Record<string, string> = {},
    timeoutMs = 120_000,
    netns?: string,
  ) {
    const deno = [
      Deno.execPath(),
      "run",
      "-A",
      "--quiet",
      v8FlagsFor(args[0]),
      "--config",
      config,
      cli,
      ...args,
    ];
    return await ServiceProcess.#spawn(label, deno, { env, timeoutMs, netns });
  }

  /** A shell command line that ends in a `strata` server (as a guide prints it), run in `cwd`. */
  static async startLine(
    label: string,
    line: string,
    o: { env?: Record<string, string>; cwd?: string; timeoutMs?: number; netns?: string },
  ): Promise<ServiceProcess> {
    // `exec env`: the server (after any VAR=value words) is the process this one signals
    return await ServiceProcess.#spawn(label, ["bash", "-c", `exec env ${line}`], o);
  }

  static async #spawn(
    label: string,
    argv: string[],
    o: { env?: Record<string, string>; cwd?: string; timeoutMs?: number; netns?: string },
  ): Promise<ServiceProcess> {
    const { env = {}, timeoutMs = 120_000, netns, cwd } = o;
    // `ip netns exec` enters the namespace and execs: the child's pid is the command's own
    const [cmd, ...rest] = netns ? ["ip", "netns", "exec", netns, ...argv] : argv;
    const child = new Deno.Command(cmd, {
      args: rest,
      cwd,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      // the child ends when this process is gone (parent-watch.ts)
      env: { ...env, [PARENT_ENV]: String(Deno.pid) },
    }).spawn();
    // its log still reaches ours; the last lines are kept to say why it died
    const tail = new OutputTail();
    const forwarded = (async () => {
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
        tail.push(chunk);
        await Deno.stderr.write(new TextEncoder().encode(chunk));
      }
    })().catch(() => {});
    const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    try {
      for (;;) {
        const { value, done } = await lines.read();
        if (done) {
          const status = await child.status;
          await forwarded;
          const last = tail.lines();
          throw new Error(
            `${label} exited before it was ready (${describeExit(status)})` +
              (last.length ? `; its last lines:\n${last.map((l) => `  ${l}`).join("\n")}` : ""),
          );
        }
        buf += value;
        const nl = buf.indexOf("\n");
        if (nl < 0) continue;
        const ready = JSON.parse(buf.slice(0, nl));
        // keep draining stdout so the child never blocks on a full pipe
        void (async () => {
          while (!(await lines.read()).done);
        })();
        return new ServiceProcess(child, ready, label);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM, then SIGKILL if it lingers. */
  async stop(graceMs = 5000): Promise<void> {
    try {
      this.child.kill("SIGTERM");
    } catch {
      return;
    }
    const t = setTimeout(() => {
      try {
        this.child.kill("SIGKILL");
      } catch { /* gone */ }
    }, graceMs);
    await this.child.status;
    clearTimeout(t);
  }

  kill(): void {
    try {
      this.child.kill("SIGKILL");
    } catch { /* gone */ }
  }
}
