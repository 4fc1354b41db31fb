// `strata relay`: the WebSocket hub; `strata relay token`: a peer's token.
import { Command } from "commander";
import { addSecretOption, needSecret, RELAY_SECRET } from "../cli/secrets.ts";
import { peerToken } from "../../src/relay/token.ts";
import { hostPort, publicUrl, untilSignal } from "../cli/options.ts";
import { startRelay } from "./relay-server.ts";
import { addCertFileOptions, tlsOf } from "../tls/options.ts";

export function relayCommand(): Command {
  const relay = addSecretOption(addCertFileOptions(new Command("relay"), "wss://"), RELAY_SECRET)
    .description("carry seams for nodes that cannot accept connections (WebSocket hub)")
    .option("--listen <host:port>", "where peers connect", "127.0.0.1:7700")
    .option("--public-url <url>", "where browsers and nodes reach it (ws:// or wss://; default: --listen)")
    .action(async (o) => {
      const { host, port } = hostPort(o.listen);
      const r = await startRelay({ host, port, secret: needSecret(o, RELAY_SECRET), tls: await tlsOf(o) });
      console.log(JSON.stringify({ event: "ready", url: publicUrl(o.publicUrl, r.url) }));
      await untilSignal();
      await r.close();
      Deno.exit(0);
    });
  addSecretOption(relay.command("token"), RELAY_SECRET)
    .description("print the token a peer connects with (its name is inside)")
    .requiredOption("--name <name>", "the peer's name")
    // `relay` takes the same options: commander hands them to whichever of the two is first
    .action(async (o) =>
      console.log(await peerToken(needSecret({ ...relay.opts(), ...o }, RELAY_SECRET), o.name))
    );
  return relay;
}
