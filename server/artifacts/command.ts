// `strata artifacts`: serves model files' bytes and manifests over HTTP Range, the origin
// nodes and volunteer tabs download their shards from.
import { Command } from "commander";
import { DEFAULT_MODEL } from "../model/default-model.ts";
import { resolveModel } from "../model/fetch.ts";
import { hostPort, untilSignal } from "../cli-options.ts";
import { serveHttp } from "../http/serve-http.ts";
import { artifactManifest } from "./manifest.ts";
import { artifactRoutes } from "./routes.ts";

const collect = (v: string, all: string[] = []) => [...all, v];

export function artifactsCommand(): Command {
  return new Command("artifacts")
    .description("serve GGUF artifacts with HTTP Range and their manifests (the origin shards download from)")
    .option("--model <name|path>", `"${DEFAULT_MODEL.name}" or a GGUF path (repeat for several)`, collect)
    .option("--listen <host:port>", "where to serve", "127.0.0.1:8090")
    .action(async (o) => {
      const models = await Promise.all(
        ((o.model as string[] | undefined) ?? [DEFAULT_MODEL.name]).map(resolveModel),
      );
      const served = await Promise.all(
        models.map(async (m) => ({ path: m.path, manifest: await artifactManifest(m.path) })),
      );
      const { host, port } = hostPort(o.listen);
      const server = serveHttp(artifactRoutes(served).fetch, host, port);
      console.log(JSON.stringify({
        event: "ready",
        url: server.url,
        artifacts: served.map((s) => `${server.url}/artifacts/${s.manifest.artifact}`),
        pid: Deno.pid,
      }));
      await untilSignal();
      await server.close();
      Deno.exit(0);
    });
}
