// `strata hosts link`: the user-space delay link in front of one service of a test host
// (checks/hosts/delay-link.ts). SIGHUP re-reads the delay from --delay-file.
import { Command } from "commander";
import { hostPort, untilSignal } from "../../server/cli/options.ts";
import { startDelayLink } from "./delay-link.ts";

export function hostsCommand(): Command {
  const hosts = new Command("hosts").description("test-host tools (network namespaces)");
  hosts.command("link")
    .description("forward host:port to a local service, holding each chunk for a one-way delay")
    .requiredOption("--listen <host:port>", "the host's public address")
    .requiredOption("--to <host:port>", "the service")
    .requiredOption("--delay-file <file>", "the one-way delay in ms; re-read on SIGHUP")
    .action(async (o) => {
      const delay = async () => Number((await Deno.readTextFile(o.delayFile)).trim()) || 0;
      const l = hostPort(o.listen), t = hostPort(o.to);
      const link = startDelayLink(
        { hostname: l.host, port: l.port },
        { hostname: t.host, port: t.port },
        await delay(),
      );
      Deno.addSignalListener("SIGHUP", () => void delay().then((d) => (link.delayMs = d)));
      console.log(JSON.stringify({ event: "ready", port: link.port, delay_ms: link.delayMs, pid: Deno.pid }));
      await untilSignal();
      link.close();
      Deno.exit(0);
    });
  return hosts;
}
