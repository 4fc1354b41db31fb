// `strata relay`: the WebSocket hub; `strata relay token`: a peer's token.
import { Command, InvalidArgumentError } from "commander";
import { peerToken } from "../../src/relay/token.ts";
import { hostPort, untilSignal } from "../cli-options.ts";
import { startRelay } from "./relay-server.ts";
import { addCertFileOptions, tlsOf } from "../tls/options.ts";

const secretOf = (o: { secret?: string }) => {
  const s = o.secret ?? Deno.env.get("STRATA_RELAY_SECRET");
  if (!s) throw new InvalidArgumentError("give --secret or set STRATA_RELAY_SECRET");
  return s;
};

export function relayCommand(): Command {
  const relay = addCertFileOptions(new Command("relay"), "wss://")
    .description("carry seams for nodes that cannot accept connections (WebSocket hub)")
    .option("--listen <host:port>", "where peers connect", "127.0.0.1:7700")
    .option("--secret <secret>", "signs peer tokens (or STRATA_RELAY_SECRET)")
    .action(async (o) => {
      const { host, port } = hostPort(o.listen);
      const r = await startRelay({ host, port, secret: secretOf(o), tls: await tlsOf(o) });
      console.log(JSON.stringify({ event: "ready", url: r.url }));
      await untilSignal();
      await r.close();
      Deno.exit(0);
    });
  relay.command("token")
    .description("print the token a peer connects with (its name is inside)")
    .requiredOption("--name <name>", "the peer's name")
    .option("--secret <secret>", "the relay's secret (or STRATA_RELAY_SECRET)")
    .action(async (o) => console.log(await peerToken(secretOf(o), o.name)));
  return relay;
}
