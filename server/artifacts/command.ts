// `strata artifacts`: serves model files' bytes and manifests over HTTP Range, the origin
// nodes and volunteer tabs download their shards from.
import { Command } from "commander";
import { DEFAULT_MODEL } from "../model/default-model.ts";
import { resolveModel } from "../model/fetch.ts";
import { hostPort, publicUrl, untilSignal } from "../cli/options.ts";
import { serveHttp } from "../http/serve-http.ts";
import { artifactManifest } from "./manifest.ts";
import { artifactRoutes } from "./routes.ts";
import { findReference } from "../model/reference-file.ts";
import { addCertFileOptions, tlsOf } from "../tls/options.ts";

const collect = (v: string, all: string[] = []) => [...all, v];

export function artifactsCommand(): Command {
  return addCertFileOptions(new Command("artifacts"), "HTTPS (pages on HTTPS fetch only from HTTPS)")
    .description(
      "serve GGUF artifacts with HTTP Range, their manifests and signed references (the origin shards " +
        "download from, and trackers and gateways read headers from)",
    )
    .option("--model <name|path>", `"${DEFAULT_MODEL.name}" or a GGUF path (repeat for several)`, collect)
    .option("--listen <host:port>", "where to serve", "127.0.0.1:8090")
    .option("--public-url <url>", "where others reach it, in the artifact URLs it prints (default: --listen)")
    .action(async (o) => {
      const models = await Promise.all(
        ((o.model as string[] | undefined) ?? [DEFAULT_MODEL.name]).map(resolveModel),
      );
      const served = await Promise.all(
        models.map(async (m) => {
          const manifest = await artifactManifest(m.path);
          return { path: m.path, manifest, reference: await findReference(m.path, manifest.artifact) };
        }),
      );
      const { host, port } = hostPort(o.listen);
      const server = serveHttp(artifactRoutes(served).fetch, host, port, await tlsOf(o));
      const url = publicUrl(o.publicUrl, server.url);
      console.log(JSON.stringify({
        event: "ready",
        url,
        artifacts: served.map((s) => `${url}/artifacts/${s.manifest.artifact}`),
        pid: Deno.pid,
      }));
      await untilSignal();
      await server.close();
      Deno.exit(0);
    });
}
